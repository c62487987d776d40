"""`vftune bench`: every scenario with every ITR policy side by side, in simulated time."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from vftune.bench.random_hosts import MAX_RANDOM
from vftune.cli.common import SEED_MAX, Number, fail

MAX_SEEDS = 1000  # a bench over more seeds than this is a typo, not a plan
MAX_DURATION_S = 7 * 86400.0  # simulated seconds per pair: a week of host time at most


def _fmt(value: object, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def parse_seeds(text: str) -> list[int]:
    """'0-4' or '0,2,5' or '3' -> the seeds, in order; ValueError naming the bad part."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            a, b = (int(low), int(high)) if dash else (int(part), int(part))
        except ValueError:
            raise ValueError(f"{part[:40]!r} is not a seed or a range like 0-4") from None
        # Checked before the range is built: 0-99999999999 must not allocate its list first.
        if not 0 <= a <= b <= SEED_MAX or len(seeds) + b - a + 1 > MAX_SEEDS:
            raise ValueError(f"{part[:40]!r}: seeds are 0..{SEED_MAX}, ranges ascending, at most {MAX_SEEDS} in all")
        seeds.extend(range(a, b + 1))
    return list(dict.fromkeys(seeds))


class _Bar:
    """A rich progress bar on a terminal (stderr): oracle sweeps, then pairs, with time left."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        console = Console(stderr=True)
        self.enabled = console.is_terminal
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("time left"), TimeRemainingColumn(), console=console, transient=True)
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> _Bar:
        if self.enabled:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if stage not in self.tasks:
            label = "oracle sweeps" if stage == "oracle" else "pairs done"
            self.tasks[stage] = self.progress.add_task(label, total=total)
        self.progress.update(self.tasks[stage], completed=done, total=total)


@click.command("bench")
@click.option("--scenario", "scenarios", multiple=True, metavar="NAME",
              help="Scenario to run (repeatable; default: all, see `vftune sim list`).")
@click.option("--scenario-file", "files", multiple=True, metavar="PATH",
              help="Scenario TOML file to run (repeatable; format: docs/scenarios.md).")
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help="Policy to run (repeatable; default: all). The oracle and the default always run: "
                   "every score is taken against them. vftune-efficiency:0.05 runs the efficiency "
                   "objective with a config rule's margin = 0.05.")
@click.option("--seed", type=Number(0, SEED_MAX, integer=True), default=None, metavar="N",
              help="One seed: scenario instance and noise [0].")
@click.option("--seeds", "seed_spec", default=None, metavar="LIST",
              help="Several seeds, e.g. 0-4 or 0,3: each figure is the mean with a 95% interval.")
@click.option("--quick", is_flag=True,
              help="A small subset: four scenarios, 300 simulated seconds each, one seed (under a minute).")
@click.option("--objective", type=click.Choice(["throughput", "efficiency", "latency"]), default="throughput",
              show_default=True, help="What the oracle's best fixed ITR maximizes.")
@click.option("--duration", type=Number(60, MAX_DURATION_S), default=None, metavar="SECONDS",
              help="Simulated seconds per pair (default: the scenario's duration_s, else 600, "
                   "or two full cycles for phased scenarios).")
@click.option("--random", "random_count", type=Number(0, MAX_RANDOM, integer=True), default=0, metavar="N",
              help="Add N random hosts per seed (drawn from the seed alone: the same seed, the same hosts), "
                   "each run on its seed and reported as its own family.")
@click.option("--random-only", is_flag=True,
              help="Run the --random hosts and no built-in (what a tuner never saw, in minutes).")
@click.option("--ablate", "ablate", multiple=True, metavar="NAME",
              help="Also run vftune with this mechanism switched off (vftune-without:NAME), beside vftune "
                   "(repeatable); `--ablate list` names the mechanisms.")
@click.option("--jobs", type=Number(1, 1024, integer=True), default=None, metavar="N",
              help="Worker processes (default: one per CPU).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def command(scenarios: tuple[str, ...], files: tuple[str, ...], policies: tuple[str, ...], seed: int | None,
            seed_spec: str | None, quick: bool, objective: str, duration: float | None, random_count: int,
            random_only: bool, ablate: tuple[str, ...], jobs: int | None, as_json: bool) -> None:
    """Per-VF scores against the oracle, CPU, latency, convergence and ITR churn per policy.

    Each pair drives the real agent loop against the simulated host (no waiting: simulated
    time); the same seed gives every policy the same host, load and noise.
    """
    from vftune.bench import QUICK_SCENARIOS, ablation, aggregate, conflicts, oracle_warnings, run, targets
    from vftune.bench.registry import check_policy
    from vftune.bench.scores import families, oracle_beaten
    from vftune.cli.sim import register_scenario_files
    from vftune.sim.scenarios import SCENARIOS

    if "list" in ablate:
        for m in ablation.MECHANISMS:
            click.echo(f"{m.name:22} {m.what}")
        return
    for name in ablate:
        try:
            policies += ("vftune", ablation.policy(name))
        except ValueError as exc:
            fail(f"--ablate: {exc}", 2)
    scenarios = scenarios + tuple(register_scenario_files(files))
    for name in scenarios:
        if name not in SCENARIOS:
            fail(f"--scenario {name!r}: unknown scenario; valid: {', '.join(SCENARIOS)}", 2)
    for name in policies:
        try:
            check_policy(name)
        except ValueError as exc:
            fail(f"--policy: {exc}", 2)
    if seed is not None and seed_spec is not None:
        fail("--seed and --seeds: give one of them", 2)
    try:
        seeds = parse_seeds(seed_spec) if seed_spec is not None else [seed or 0]
    except ValueError as exc:
        fail(f"--seeds: {exc}", 2)
    chosen = list(dict.fromkeys(scenarios))
    if random_only and (chosen or quick):
        fail("--random-only: runs random hosts alone; drop --scenario, --scenario-file and --quick", 2)
    if random_only and not random_count:
        fail("--random-only: needs --random N with N >= 1", 2)
    if quick:
        chosen = chosen or [s for s in QUICK_SCENARIOS if s in SCENARIOS]
        duration = duration or 300.0

    started = time.monotonic()
    with _Bar() as bar:
        named = [] if random_only else chosen or None  # [] is no built-in at all, None the default set
        results = run(named, list(dict.fromkeys(policies)) or None, seeds=seeds, duration=duration, jobs=jobs,
                      objective=objective, progress=bar, random=int(random_count))
    wall = time.monotonic() - started
    rows = aggregate(results)
    verdicts = targets(results)
    warnings = oracle_warnings(results, objective)
    clashes = conflicts(results)
    bound = oracle_beaten(results, objective)
    family_rows = families(rows, bound["beaten"])
    if as_json:
        click.echo(json.dumps({
            "seeds": seeds,
            "objective": objective,
            "wall_s": round(wall, 1),
            "results": rows,
            "runs": [r.as_dict() for r in results],
            "targets": [{"target": t.name, "ok": t.ok, "detail": t.detail} for t in verdicts],
            "oracle_warnings": warnings,
            "oracle_bound": bound,
            "families": family_rows,
            "conflicts": clashes,
        }))
        return
    _print_table(rows, seeds, objective, verdicts, warnings, clashes, len(results), wall, bound, family_rows)


def _with_interval(row: dict[str, Any], name: str, spec: str) -> str:
    value = row.get(name)
    if value is None:
        return "-"
    ci = row.get("ci95", {}).get(name)
    if not ci:
        return format(value, spec)
    return f"{format(value, spec)}±{format((ci[1] - ci[0]) / 2, spec)}"


def _print_table(rows: list[dict[str, Any]], seeds: list[int], objective: str, verdicts: list[Any],
                 warnings: list[str], clashes: list[str], pairs: int, wall: float, bound: dict[str, Any],
                 family_rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {','.join(map(str, seeds))} (mean ± 95%)"
    table = Table(title=f"vftune bench, {seed_text}, oracle objective {objective}")
    for heading in ("scenario", "policy", "VF geomean", "VF min", "thpt/oracle", "CPU", "CPU/Gb vs default",
                    "rr mean us", "rr p99 us", "converge s", "reconverge s", "ITR chg/min"):
        names = heading in ("scenario", "policy")
        table.add_column(heading, justify="left" if names else "right", no_wrap=names)
    previous = None
    drawn = 0
    for r in rows:
        if r["family"] == "random":  # one line each in the JSON; here only in the families' table
            drawn += 1
            continue
        table.add_row(
            r["scenario"] if r["scenario"] != previous else "", r["policy"],
            _with_interval(r, "vf_geomean", ".3f"), _with_interval(r, "vf_min", ".3f"),
            _with_interval(r, "throughput_ratio", ".3f"), _fmt(r["cpu"], ".3f"),
            _with_interval(r, "cpu_per_gbps_vs_default", ".2f"),
            _fmt(r["latency_us_mean"], ".1f"), _fmt(r["latency_us_p99"], ".1f"),
            _fmt(r["converge_s"], ".0f"), _fmt(r["reconverge_s"], ".0f"), _fmt(r["changes_per_min"], ".2f"),
            style="bold" if r["policy"] == "vftune" else None,
        )
        previous = r["scenario"]
    heads = Table(title="by family: built-in scenarios and random hosts (--random), each policy over the family")
    for heading in ("family", "policy", "scenarios", "VF geomean, mean", "VF min, lowest", "CPU/Gb vs default",
                    "CPU/Gb vs frontier", "VFs > oracle"):
        names = heading in ("family", "policy")
        heads.add_column(heading, justify="left" if names else "right", no_wrap=names)
    previous = None
    for f in family_rows:
        low = "-" if f["vf_min"] is None else f"{f['vf_min']:.3f} ({f['vf_min_scenario']})"
        heads.add_row(f["family"] if f["family"] != previous else "", f["policy"], str(f["scenarios"]),
                      _fmt(f["vf_geomean"], ".3f"), low, _fmt(f["cpu_per_gbps_vs_default"], ".2f"),
                      _fmt(f["cpu_per_gbps_vs_frontier"], ".2f"),
                      f"[bold red]{f['vfs_above_oracle']}[/]" if f["vfs_above_oracle"] else "0",
                      style="bold" if f["policy"] == "vftune" else None)
        previous = f["family"]
    console = Console()
    if not console.is_terminal:
        console = Console(width=170)  # a file or a pipe: keep each row on one line
    if table.row_count:
        console.print(table)
    if drawn:
        console.print(f"{drawn} rows of random hosts: in the JSON (results[], family \"random\")")
    console.print(heads)
    worst = bound["worst"]
    if worst is not None:
        console.print(f"oracle as a per-VF bound: the highest VF score of any policy {worst['score']:.4f} "
                      f"({worst['policy']}, {worst['scenario']} seed {worst['seed']}, VF {worst['vf']}); "
                      f"{len(bound['beaten'])} VF-runs above 1 + {bound['slack']:g}")
    for b in bound["beaten"]:
        run_gm = b["run_vf_geomean"]
        trade = (f"; the run's per-VF geomean {run_gm:.4f}: it gained what its neighbours lost" if run_gm is not None
                 and run_gm < 1.0 else "")
        console.print(f"[bold red]ORACLE BEATEN[/]: {b['scenario']} seed {b['seed']}: {b['policy']} VF {b['vf']} "
                      f"scores {b['score']:.4f} of its oracle (> 1 + {bound['slack']:g}): the oracle is no bound "
                      f"for it{trade}")
    console.print("VF geomean / min: each VF's throughput (request/response: response time) against its own "
                  "oracle's; converge/reconverge: seconds until the worst VF's ITR then held 60 s "
                  "('-' = never in some seed, or no phase change); paper: Wu & Wang as printed, not a headline peer; "
                  "frontier: the cheapest fixed plan at 0.97 of the oracle, a reference.")
    for w in warnings:
        console.print(f"[bold red]ORACLE WRONG[/]: {w}")
    for t in verdicts:
        console.print(f"{'PASS' if t.ok else 'FAIL'}  {t.name}: {t.detail}")
    for c in clashes:  # after the targets: the CPU target's line points down to them
        console.print(f"[bold]CONFLICT[/]: {c}")
    console.print(f"{pairs} runs in {wall:.0f} s wall time")
