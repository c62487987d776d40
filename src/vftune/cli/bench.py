"""`vftune bench`: every scenario with every ITR policy side by side, in simulated time."""

from __future__ import annotations

import json
import time

import click

from vftune.cli.common import fail


def _fmt(value: object, spec: str) -> str:
    return "-" if value is None else format(value, spec)


@click.command("bench")
@click.option("--scenario", "scenarios", multiple=True, metavar="NAME",
              help="Scenario to run (repeatable; default: all, see `vftune sim list`).")
@click.option("--scenario-file", "files", multiple=True, metavar="PATH",
              help="Scenario TOML file to run (repeatable; format: docs/scenarios.md).")
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Policy to run (repeatable; default: all). The oracle always runs: it is the reference.")
@click.option("--seed", type=int, default=0, show_default=True, help="Scenario instance and noise.")
@click.option("--duration", type=float, default=None, metavar="SECONDS",
              help="Simulated seconds per pair (default: 1800, two full cycles for phased scenarios).")
@click.option("--jobs", type=int, default=None, metavar="N", help="Worker processes (default: one per CPU).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def command(scenarios: tuple[str, ...], files: tuple[str, ...], policies: tuple[str, ...], seed: int,
            duration: float | None, jobs: int | None, as_json: bool) -> None:
    """Throughput against the oracle, CPU, interrupts, convergence and ITR churn per policy.

    Each pair drives the real agent loop against the simulated host (no waiting: simulated
    time); the same seed gives every policy the same host, load and noise.
    """
    from vftune.bench import POLICIES, run, targets
    from vftune.cli.sim import register_scenario_files
    from vftune.sim.scenarios import SCENARIOS

    scenarios = scenarios + tuple(register_scenario_files(files))
    for name in scenarios:
        if name not in SCENARIOS:
            fail(f"--scenario {name!r}: unknown scenario; valid: {', '.join(SCENARIOS)}", 2)
    for name in policies:
        if name not in POLICIES:
            fail(f"--policy {name!r}: unknown policy; valid: {', '.join(POLICIES)}", 2)
    if duration is not None and not duration >= 60:
        fail(f"--duration {duration:g}: must be at least 60 simulated seconds", 2)
    if jobs is not None and jobs < 1:
        fail(f"--jobs {jobs}: must be at least 1", 2)

    started = time.monotonic()
    results = run(list(dict.fromkeys(scenarios)) or None, list(dict.fromkeys(policies)) or None,
                  seed=seed, duration=duration, jobs=jobs)
    wall = time.monotonic() - started
    verdicts = targets(results)
    if as_json:
        click.echo(json.dumps({
            "seed": seed,
            "wall_s": round(wall, 1),
            "results": [r.as_dict() for r in results],
            "targets": [{"target": t.name, "ok": t.ok, "detail": t.detail} for t in verdicts],
        }))
        return

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"vftune bench, seed {seed} (throughput relative to the oracle)")
    for heading in ("scenario", "policy", "thpt/oracle", "CPU", "irq/s", "converge s", "changes",
                    "reconverge s", "changes", "ITR chg/min", "search probes"):
        names = heading in ("scenario", "policy")
        table.add_column(heading, justify="left" if names else "right", no_wrap=names)
    previous = None
    for r in results:
        d = r.as_dict()
        probes = None
        if r.policy == "vftune":
            cold, phase = d.get("search_probes_cold"), d.get("search_probes_phase")
            probes = f"{_fmt(cold, 'd')}" + (f" / {phase}" if phase is not None else "")
        table.add_row(
            r.scenario if r.scenario != previous else "", r.policy,
            _fmt(d["throughput_ratio"], ".3f"), _fmt(d["cpu"], ".3f"), _fmt(d["interrupts_per_s"], ",.0f"),
            _fmt(d["converge_s"], ".0f"), _fmt(d["converge_probes"], "d"),
            _fmt(d["reconverge_s"], ".0f"), _fmt(d["reconverge_probes"], "d"),
            _fmt(d["changes_per_min"], ".2f"), probes or "",
            style="bold" if r.policy == "vftune" else None,
            end_section=False,
        )
        previous = r.scenario
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)  # a file or a pipe: keep each row on one line
    console.print(table)
    console.print("converge/reconverge: seconds and ITR changes until the worst VF's ITR then held "
                  "60 s ('-' = never, or no phase change); search probes: vftune's measurements, cold / "
                  "after a phase change.")
    for t in verdicts:
        console.print(f"{'PASS' if t.ok else 'FAIL'}  {t.name}: {t.detail}")
    console.print(f"{len(results)} pairs in {wall:.0f} s wall time")
