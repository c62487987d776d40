"""`vftune sim`: the simulated host's scenarios and their steady-state sweeps."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from vftune.cli.common import fail
from vftune.sim.scenarios import SCENARIOS


@click.group("sim")
def command() -> None:
    """The simulated KVM host with 82599 VFs: scenarios and sweeps."""


@command.command("list")
def list_scenarios() -> None:
    """Name and one-line description of every scenario."""
    width = max(len(name) for name in SCENARIOS)
    for name, scenario in SCENARIOS.items():
        click.echo(f"{name:<{width}}  {scenario.description}")


@command.command("sweep")
@click.option("--scenario", required=True, metavar="NAME", help="Scenario to sweep (see `vftune sim list`).")
@click.option("--seed", type=int, default=0, show_default=True, help="Scenario instance.")
@click.option("--time", "at", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Simulated second whose phase to sweep (phase-change scenario).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--plot", type=click.Path(dir_okay=False, writable=True), default=None, metavar="FILE.svg",
              help="Also draw throughput and CPU against ITR into this SVG file.")
def sweep_command(scenario: str, seed: int, at: float, as_json: bool, plot: str | None) -> None:
    """Steady state with every guest VF fixed at each ITR of a log-spaced grid.

    throughput_bps is rx + tx as the VF counters count it, summed over the guest VFs; cpu is the
    fraction of the host's cores spent on network work (guest receive paths + host irq/softirq).
    """
    if scenario not in SCENARIOS:
        fail(f"--scenario {scenario!r}: unknown scenario; valid: {', '.join(SCENARIOS)}", 2)
    from vftune.sim.sweep import sweep

    result = sweep(scenario, seed=seed, t=at)
    if plot:
        from vftune.sim.sweep_plot import sweep_svg

        try:
            with open(plot, "w", encoding="utf-8") as out:
                out.write(sweep_svg(result, f"{scenario} (seed {seed})"))
        except OSError as exc:
            fail(f"--plot {plot}: cannot write: {exc.strerror}", 2)
        click.echo(f"wrote {plot}", err=True)
    if as_json:
        click.echo(json.dumps(result))
        return
    table = Table(title=f"{scenario} (seed {seed}): best ITR {result['best_itr']}/s")
    for heading in ("ITR /s", "throughput Gb/s", "CPU (share of cores)", "interrupts /s"):
        table.add_column(heading, justify="right")
    for p in result["points"]:
        style = "bold" if p["itr"] == result["best_itr"] else None
        table.add_row(str(p["itr"]), f"{p['throughput_bps'] / 1e9:.3f}", f"{p['cpu']:.3f}",
                      f"{p['interrupts_per_s']:.0f}", style=style)
    Console().print(table)
