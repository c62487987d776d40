"""Turn `vftune testbed --json` into the compact Markdown tables README.md carries.

    .venv/bin/vftune testbed --json > /tmp/testbed.json
    .venv/bin/python bench/testbed_table.py /tmp/testbed.json

A `--competing-app` run's cells give the job's ops/s in place of the testbed's CPU, and its
side-by-side trade-off follows the tuner's table.
"""

from __future__ import annotations

import json
import sys

GRO_US = (0, 10, 20, 50, 100, 200, 500)


def _cell(point: dict | None) -> str:
    if point is None:
        return "-"
    last = f"{point['app_ops_per_s'] / 1000:.1f}k" if "app_ops_per_s" in point else f"{point['cpu']:.3f}"
    return f"{point['latency_us_p50']:.0f} / {point['latency_us_p99']:.0f} / {last}"


def _choice(run: dict) -> str:
    """A run's choice and ratio; a mode reached off the search's axis names the axis's choice."""
    axis = run.get("axis_choice")
    via = f" from {axis['label']}" if axis and axis["label"] != run["choice"]["label"] else ""
    return f"{run['choice']['label']}{via} ({run['ratio_to_best']:.2f})"


def main(path: str) -> None:
    with open(path) as f:
        data = json.load(f)
    by_knob = {(p["napi_defer_hard_irqs"], p["gro_flush_timeout_ns"] // 1000, p["threaded"]): p
               for p in data["sweep"]}
    load = data["load"]
    app = data.get("competing_app")
    last = "the job's units of work/s" if app else "CPU cores of the testbed's own tasks"
    where = (f"; server and job on CPU {app['job_and_server_cpu']}, client on CPU {app['client_cpu']}"
             if app else "")
    tick = f", sent every {load['tick_s'] * 1e6:.0f} us" if "tick_s" in load else ""
    print(f"Sweep ({load['mode']} loop, {load['rate']:.0f} requests/s of {load['size']} B over {load['conns']} "
          f"connections{tick}, {load['window_s']:g} s windows, {data['repeats']} shuffled repeats{where}; medians of "
          f"p50 us / p99 us / {last}):\n")
    threads = (False, True) if any(p["threaded"] for p in data["sweep"]) else (False,)
    print("| gro_flush_timeout | defer 0 | defer 1 |" + (" defer 0, threaded | defer 1, threaded |" if True in threads else ""))
    print("|---|---|---|" + ("---|---|" if True in threads else ""))
    for us in GRO_US:
        if us == 0:
            row = [p for t in threads for p in (by_knob.get((0, 0, t)), None)]
            label = "0 (no deferral)"
        else:
            row = [by_knob.get((d, us, t)) for t in threads for d in (0, 1)]
            label = f"{us} us"
        print(f"| {label} | " + " | ".join(_cell(p) for p in row) + " |")
    print("\nThe tuner, cold start, 3 runs per objective, each choice measured side by side with the "
          "sweep's best (the search's own axis is defer 1; the modes stage tries the other "
          "combinations at its choice):\n")
    print("| objective | constraint | sweep's best | best on the tuner's axis | choices (3 runs) | "
          "ratio to best, worst run | per-round spread | probes (max) | converge s (max) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in data["tuners"]:
        choices = ", ".join(_choice(r) for r in t["runs"])
        axis = t["best_on_tuner_axis"]["label"] if t["best_on_tuner_axis"] else "-"
        lo, hi = t["ratio_spread"]
        print(f"| {t['objective']} | {t['definition']['constraint']} | {t['best']['label']} | {axis} | {choices} | "
              f"{t['ratio_to_best']:.3f} | {lo:.2f}-{hi:.2f} | {t['probes']} | {t['converge_s']:.0f} |")
    trade = data.get("trade_off")
    if trade and trade.get("job_ratio"):
        b, n, r = trade["at_best"], trade["at_no_deferral"], trade["job_ratio"]
        print(f"\nThe sweep's best against no deferral, side by side ({r['rounds']} rounds, each pair in a random "
              "order):\n")
        print("| setting | job ops/s | job CV | p50 us | p99 us | goodput/s | testbed CPU |")
        print("|---|---|---|---|---|---|---|")
        for label, side in ((trade["best"]["label"], b), ("no deferral", n)):
            print(f"| {label} | {side['app_ops_per_s']:.0f} | {side['app_cv']:.3f} | {side['latency_us_p50']:.0f} | "
                  f"{side['latency_us_p99']:.0f} | {side['rate']:.0f} | {side['cpu']:.3f} |")
        print(f"\nJob's progress at the best over no deferral: median of per-round ratios {r['median_ratio']:.3f} "
              f"(95% bootstrap interval {r['ci95'][0]:.3f}-{r['ci95'][1]:.3f}, rounds {r['min_ratio']:.3f}-"
              f"{r['max_ratio']:.3f}, {r['wins']} of {r['rounds']} above 1, sign test p = {r['sign_test_p']:.2g}).")
    print()
    for tgt in data["targets"]:
        print(f"- {'PASS' if tgt['ok'] else 'FAIL'} {tgt['target']} ({tgt['detail']})")
    n = data["noise"]
    job_cv = f"job ops/s CV {n['app_cv_median']}, " if "app_cv_median" in n else ""
    print(f"\nNoise: {job_cv}CPU CV {n['cpu_cv_median']}, p99 CV {n['p99_cv_median']}, p50 CV {n['p50_cv_median']} "
          f"between repeats (median over settings); machine busy {n['machine_busy_mean']} cores of 2 "
          f"(other work), steal {n['steal_mean']}; wall {data['wall_s']:.0f} s.")
    for b in data.get("bulk") or []:
        print(f"Bulk TCP (iperf3, 3 s): {b['knob']['label']} {b['gbit_s']:.2f} Gbit/s.")


if __name__ == "__main__":
    main(sys.argv[1])
