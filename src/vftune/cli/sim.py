"""`vftune sim`: the simulated host's scenarios and their steady-state sweeps."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from vftune.cli.common import SEED_MAX, FullHelpGroup, Number, fail
from vftune.sim.scenarios import SCENARIOS


@click.group("sim", cls=FullHelpGroup)
def command() -> None:
    """The simulated KVM host with 82599 VFs: scenarios and sweeps."""


@command.command("list")
def list_scenarios() -> None:
    """Name and one-line description of every scenario."""
    width = max(len(name) for name in SCENARIOS)
    for name, scenario in SCENARIOS.items():
        click.echo(f"{name:<{width}}  {scenario.description}")


def register_scenario_files(paths: tuple[str, ...]) -> list[str]:
    """Load each --scenario-file and return the names they declare; a bad file exits 2 with one line."""
    from vftune.sim.scenarios import ScenarioError, register_file

    names = []
    for path in paths:
        try:
            names.append(register_file(path))
        except ScenarioError as exc:
            fail(str(exc), 2)
    return names


@command.command("sweep")
@click.option("--scenario", "scenarios", multiple=True, metavar="NAME",
              help="Scenario to sweep (repeatable; see `vftune sim list`).")
@click.option("--scenario-file", "files", multiple=True, metavar="PATH",
              help="Scenario TOML file to sweep (repeatable; format: docs/scenarios.md).")
@click.option("--seed", type=Number(0, SEED_MAX, integer=True), default=0, show_default=True,
              help="Scenario instance.")
@click.option("--time", "at", type=Number(0, 1e9), default=0.0, show_default=True,
              help="Simulated second whose phase to sweep (phased scenarios).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--plot", type=click.Path(dir_okay=False, writable=True), default=None, metavar="FILE.svg",
              help="Also draw throughput and CPU against ITR into this SVG file (one pair of charts per sweep).")
def sweep_command(scenarios: tuple[str, ...], files: tuple[str, ...], seed: int, at: float, as_json: bool,
                  plot: str | None) -> None:
    """Steady state with every guest VF fixed at each ITR of a log-spaced grid.

    throughput_bps is rx + tx as the VF counters count it, summed over the guest VFs; goodput_bps
    what their applications get; cpu the fraction of the host's cores spent on network work (guest
    receive paths + host irq/softirq); latency_us_mean/p99 the request/response VFs' response
    time. --json adds the same figures per VF. With several scenarios, --json prints
    {"sweeps": [...]}.
    """
    names = list(scenarios) + register_scenario_files(files)
    if not names:
        fail("give --scenario NAME or --scenario-file PATH (see `vftune sim list`)", 2)
    for name in names:
        if name not in SCENARIOS:
            fail(f"--scenario {name!r}: unknown scenario; valid: {', '.join(SCENARIOS)}", 2)
    from vftune.sim.sweep import sweep

    results = [sweep(name, seed=seed, t=at) for name in dict.fromkeys(names)]
    if plot:
        from vftune.sim.sweep_plot import sweep_svg

        try:
            with open(plot, "w", encoding="utf-8") as out:
                out.write(sweep_svg(results, seed))
        except OSError as exc:
            fail(f"--plot {plot}: cannot write: {exc.strerror}", 2)
        click.echo(f"wrote {plot}", err=True)
    if as_json:
        click.echo(json.dumps(results[0] if len(results) == 1 else {"sweeps": results}))
        return
    console = Console()
    for result in results:
        table = Table(title=f"{result['scenario']} (seed {seed}, phase {result['phase']}): best ITR {result['best_itr']}/s")
        rr = any("latency_us_mean" in p for p in result["points"])
        headings = ["ITR /s", "interval us", "throughput Gb/s", "goodput Gb/s", "CPU (share of cores)", "interrupts /s"]
        for heading in headings + (["rr latency us (mean / p99)"] if rr else []):
            table.add_column(heading, justify="right")
        for p in result["points"]:
            style = "bold" if p["itr"] == result["best_itr"] else None
            cells = [str(p["itr"]), f"{p['interval_us']:.1f}", f"{p['throughput_bps'] / 1e9:.3f}",
                     f"{p['goodput_bps'] / 1e9:.3f}", f"{p['cpu']:.3f}", f"{p['interrupts_per_s']:.0f}"]
            if rr:
                cells.append(f"{p['latency_us_mean']:.0f} / {p['latency_us_p99']:.0f}" if "latency_us_mean" in p else "-")
            table.add_row(*cells, style=style)
        console.print(table)


@command.command("validate")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def validate_command(as_json: bool) -> None:
    """Run the model against published measurements (Geist et al., Wu & Wang, Salah & Qahtan).

    Every row names its source, the quantity, the published and the simulated value, the
    tolerance, and whether the row calibrated the model or was held out to validate it.
    Exits 1 if any row fails.
    """
    from vftune.sim.validate import exit_code, run

    rows = run()
    code = exit_code(rows)
    failed = sum(1 for r in rows if r.verdict == "FAIL")
    if as_json:
        click.echo(json.dumps({"rows": [r.as_dict() for r in rows], "passed": len(rows) - failed,
                               "failed": failed, "exit": code}))
        raise SystemExit(code)
    table = Table(title="vftune sim validate: the simulator against published measurements", show_lines=False)
    for heading in ("source", "quantity", "published", "simulated", "tolerance", "role", "verdict"):
        table.add_column(heading, overflow="fold")
    previous = None
    for r in rows:
        source = r.source.split(",")[0]
        table.add_row(source if source != previous else "", r.quantity, r.published, r.simulated, r.tolerance,
                      r.role, r.verdict, style="red" if r.verdict == "FAIL" else None)
        previous = source
    console = Console() if Console().is_terminal else Console(width=200)
    console.print(table)
    for r in rows:
        if r.verdict == "FAIL" and r.detail:
            console.print(f"FAIL {r.source.split(',')[0]}: {r.quantity}: {r.detail}")
    console.print(f"{len(rows)} rows: {len(rows) - failed} PASS, {failed} FAIL "
                  f"({sum(1 for r in rows if r.role == 'calibration')} calibration)")
    raise SystemExit(code)
