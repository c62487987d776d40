"""Turn `vftune testbed --json` into the compact Markdown tables README.md carries.

    .venv/bin/vftune testbed --json > /tmp/testbed.json
    .venv/bin/python bench/testbed_table.py /tmp/testbed.json
"""

from __future__ import annotations

import json
import sys

GRO_US = (0, 10, 20, 50, 100, 200, 500)


def _cell(point: dict | None) -> str:
    if point is None:
        return "-"
    return f"{point['latency_us_p50']:.0f} / {point['latency_us_p99']:.0f} / {point['cpu']:.3f}"


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
    print(f"Sweep ({load['mode']} loop, {load['rate']:.0f} requests/s of {load['size']} B over {load['conns']} "
          f"connections, {load['window_s']:g} s windows, {data['repeats']} shuffled repeats; medians of "
          "p50 us / p99 us / CPU cores of the testbed's own tasks):\n")
    print("| gro_flush_timeout | defer 0 | defer 1 | defer 0, threaded | defer 1, threaded |")
    print("|---|---|---|---|---|")
    for us in GRO_US:
        if us == 0:
            row = [by_knob.get((0, 0, False)), None, by_knob.get((0, 0, True)), None]
            label = "0 (no deferral)"
        else:
            row = [by_knob.get((d, us, t)) for t in (False, True) for d in (0, 1)]
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
    print()
    for tgt in data["targets"]:
        print(f"- {'PASS' if tgt['ok'] else 'FAIL'} {tgt['target']} ({tgt['detail']})")
    n = data["noise"]
    print(f"\nNoise: CPU CV {n['cpu_cv_median']}, p99 CV {n['p99_cv_median']}, p50 CV {n['p50_cv_median']} "
          f"between repeats (median over settings); machine busy {n['machine_busy_mean']} cores of 2 "
          f"(other work), steal {n['steal_mean']}; wall {data['wall_s']:.0f} s.")
    for b in data.get("bulk") or []:
        print(f"Bulk TCP (iperf3, 3 s): {b['knob']['label']} {b['gbit_s']:.2f} Gbit/s.")


if __name__ == "__main__":
    main(sys.argv[1])
