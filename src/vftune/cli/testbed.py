"""`vftune testbed`: the tuner's search on live Linux NAPI (netns + veth) against an exhaustive sweep."""

from __future__ import annotations

import json
import signal
import sys
from types import FrameType

import click

from vftune.cli.common import SEED_MAX, Number, fail


@click.command("testbed")
@click.option("--objective", type=click.Choice(["efficiency", "latency"]), default=None,
              help="Objective to tune for (default: both). efficiency = least CPU with p99 under the bound; "
                   "latency = lowest p99 with CPU under the no-deferral CPU.")
@click.option("--latency-bound-us", type=Number(0, 1e7, low_open=True), default=None, metavar="N",
              help="p99 bound for efficiency (default: twice the no-deferral p99 of this run).")
@click.option("--rate", type=Number(0, 1e8, low_open=True), default=None,
              help="Offered requests/s (open loop) [default: 5000; 10000 with --competing-app].")
@click.option("--tick-us", type=Number(10, 100_000, integer=True), default=None, metavar="N",
              help="Open loop: what is due is sent every N us, in a burst [default: 1000; 100 with --competing-app].")
@click.option("--competing-app", is_flag=True,
              help="Pin the server and a CPU-bound job to CPU 1 (the client to CPU 0) and tune for the job's "
                   "progress at the no-deferral goodput and p99 bound (efficiency; the default objective here).")
@click.option("--conns", type=Number(1, 256, integer=True), default=8, show_default=True, help="Connections.")
@click.option("--mode", type=click.Choice(["open", "closed"]), default="open", show_default=True,
              help="open: fixed offered rate; closed: ping-pong (rate follows latency).")
@click.option("--window", type=Number(0.5, 60), default=2.5, show_default=True, help="Seconds measured per probe.")
@click.option("--repeats", type=Number(1, 20, integer=True), default=3, show_default=True, help="Sweep repeats per setting.")
@click.option("--runs", type=Number(1, 10, integer=True), default=3, show_default=True,
              help="Cold-start tuner runs per objective.")
@click.option("--eval-rounds", type=Number(1, 30, integer=True), default=12, show_default=True,
              help="Side-by-side rounds of each choice against the sweep's best.")
@click.option("--no-threaded", is_flag=True, help="Leave threaded NAPI out of the sweep.")
@click.option("--bulk-seconds", type=Number(0, 60), default=3.0, show_default=True,
              help="iperf3 seconds per setting (0: no bulk run).")
@click.option("--seed", type=Number(0, SEED_MAX, integer=True), default=0, show_default=True,
              help="Order of the sweep's shuffled repeats.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
def command(objective: str | None, latency_bound_us: float | None, rate: float | None, tick_us: int | None,
            competing_app: bool, conns: int, mode: str, window: float, repeats: int, runs: int, eval_rounds: int,
            no_threaded: bool, bulk_seconds: float, seed: int, as_json: bool, quiet: bool) -> None:
    """Sweep the stock NAPI deferral knobs on a veth pair between two network namespaces, then run
    vftune's own search from a cold start against the live knob and score its choice against the
    sweep's best, per objective. Needs root; takes minutes."""
    from vftune.testbed.appjob import AppSpec
    from vftune.testbed.measure import LoadSpec
    from vftune.testbed.netns import TestbedError, missing_prerequisites
    from vftune.testbed.run import RunConfig, run_testbed

    why = missing_prerequisites()
    if why:
        fail(f"testbed {why}", 2)

    caught = [signal.SIGINT]

    def on_term(signum: int, frame: FrameType | None) -> None:
        caught[0] = signal.Signals(signum)
        raise KeyboardInterrupt  # unwinds through the testbed's teardown like Ctrl-C

    signal.signal(signal.SIGTERM, on_term)
    # Also SIGINT: a background job starts with it ignored, and the teardown must run on Ctrl-C.
    signal.signal(signal.SIGINT, on_term)
    # With a competing job the load is denser and evenly paced (a request every 100 us), so that
    # no deferral wakes the receiver's CPU for each request, as independent senders would.
    rate = rate or (10_000.0 if competing_app else 5000.0)
    tick_s = (tick_us or (100 if competing_app else 1000)) / 1e6
    cfg = RunConfig(
        objectives=(objective,) if objective else (("efficiency",) if competing_app else ("efficiency", "latency")),
        load=LoadSpec(mode=mode, rate=rate, conns=conns, window_s=window, tick_s=tick_s),
        app=AppSpec() if competing_app else None,
        repeats=repeats, runs=runs, eval_rounds=eval_rounds, latency_bound_us=latency_bound_us, threaded=not no_threaded,
        bulk_s=bulk_seconds, seed=seed)

    def progress(msg: str) -> None:
        if not quiet:
            click.echo(msg, err=True)

    try:
        report = run_testbed(cfg, progress)
    except KeyboardInterrupt:
        click.echo(f"vftune: testbed interrupted by {caught[0].name}; namespaces removed", err=True)
        sys.exit(128 + caught[0])
    except TestbedError as exc:
        fail(f"testbed: {exc}", 1)
    if as_json:
        click.echo(json.dumps(report))
        return
    _print_report(report)


def _print_report(report: dict) -> None:  # type: ignore[type-arg]
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 150)
    load = report["load"]
    app = report.get("competing_app")
    t = Table(title=f"sweep: {load['mode']} loop, {load['rate']} req/s over {load['conns']} connections, "
                    f"{report['repeats']} repeats (medians)"
                    + (f"; server and job on CPU {app['job_and_server_cpu']}" if app else ""))
    cols = ["setting", "p50 us", "p99 us", "rate/s", "cpu (cores)", "cpu spread", "machine busy", "softirq"]
    if app:
        cols += ["job ops/s", "job spread"]
    for col in cols:
        t.add_column(col, justify="left" if col == "setting" else "right")
    for p in report["sweep"]:
        job = [f"{p['app_ops_per_s']:.0f}", f"{p['app_spread']:.0%}"] if app else []
        t.add_row(p["label"], f"{p['latency_us_p50']:.0f}", f"{p['latency_us_p99']:.0f}", f"{p['rate']:.0f}",
                  f"{p['cpu']:.3f}", f"{p['cpu_spread']:.0%}", f"{p['busy']:.2f}", f"{p['softirq']:.3f}", *job)
    console.print(t)
    tt = Table(title="tuner (cold start, worst of its runs) against the sweep's best")
    for col in ("objective", "constraint", "sweep best", "choice", "ratio", "spread", "probes", "converge s"):
        tt.add_column(col)
    for x in report["tuners"]:
        tt.add_row(x["objective"], x["definition"]["constraint"], x["best"]["label"], x["choice"]["label"],
                   f"{x['ratio_to_best']:.3f}", f"{x['ratio_spread'][0]:.2f}-{x['ratio_spread'][1]:.2f}",
                   str(x["probes"]), f"{x['converge_s']:.0f}")
    console.print(tt)
    trade = report.get("trade_off")
    if trade:
        b, n = trade["at_best"], trade["at_no_deferral"]
        console.print(f"trade-off, side by side: job {b['app_ops_per_s']:.0f}/s at {trade['best']['label']} "
                      f"(p99 {b['latency_us_p99']:.0f} us) against {n['app_ops_per_s']:.0f}/s at no deferral "
                      f"(p99 {n['latency_us_p99']:.0f} us); {trade['why']}")
    noise = report["noise"]
    console.print("noise: " + ", ".join(f"{k} {v}" for k, v in noise.items() if not isinstance(v, list)))
    for b in report["bulk"] or []:
        console.print(f"bulk TCP (iperf3) at {b['knob']['label']}: {b['gbit_s']:.2f} Gbit/s, "
                      f"sender {b['sender_cpu_pct']:.0f}% receiver {b['receiver_cpu_pct']:.0f}% of a core")
    for tgt in report["targets"]:
        console.print(f"{'PASS' if tgt['ok'] else 'FAIL'}  {tgt['target']} ({tgt['detail']})")
