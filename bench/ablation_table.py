"""The ablation table: what switching off each of the tuner's mechanisms costs, per scenario.

    .venv/bin/python bench/ablation_table.py [--seeds 0-2] [--random 8] [--draw-seed 1000]
        [--mechanism NAME ...] [--scenario NAME ...] [--duration S] [--jobs N] [--json-out PATH]

Runs vftune and `vftune-without:NAME` for every mechanism (bench/ablation.py) on the default
built-in set and on `--random` random hosts drawn from `--draw-seed`, every scenario on every
seed of `--seeds` (random hosts too, so each has its own interval). Per mechanism and scenario,
the paired difference over seeds of the per-VF geomean (vftune minus without) and of CPU per Gb
(without minus vftune): a mechanism matters on a scenario when either mean exceeds its own 95%
interval (Student's t over the seeds) on the side where switching it off is worse. It earns its
place (KEEP) when it matters on at least one built-in and one random scenario; where switching
it off is better beyond the interval, the table says so (HURTS).

Beside the verdict, each family's mean: the same paired differences pooled over all its
scenarios and seeds, with their 95% interval. An effect spread thinly over many scenarios
(each inside its own interval) shows there; the verdict does not use it. Last, per family, the
runs (scenario and seed) under the score floors with the mechanism and without it: a shift of
a few thousandths on hosts that sit at a floor moves that count while the means stay inside
their intervals.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Any

from vftune.bench import ablation, random_hosts, run
from vftune.bench.harness import default_scenarios
from vftune.bench.scores import mean_interval
from vftune.bench.targets import meets_floors
from vftune.cli.bench import parse_seeds


def _diffs(runs: list[Any], base: str, other: str, metric: str, sign: float) -> dict[str, list[float]]:
    """Per scenario, `sign` x (base - other) of `metric` for every seed both ran."""
    by: dict[tuple[str, str, int], float] = {}
    for r in runs:
        value = getattr(r, metric)
        if value is not None and value == value:
            by[(r.scenario, r.policy, r.seed)] = float(value)
    diffs: dict[str, list[float]] = defaultdict(list)
    for (scenario, policy, seed), value in by.items():
        if policy == base and (scenario, other, seed) in by:
            diffs[scenario].append(sign * (value - by[(scenario, other, seed)]))
    return diffs


def _family_mean(diffs: dict[str, list[float]], family: dict[str, str], which: str, label: str) -> str:
    pooled = [d for scenario, values in diffs.items() if family.get(scenario) == which for d in values]
    if len(pooled) < 2:
        return f"{label} -"
    mean, half = mean_interval(pooled)
    beyond = "" if half is None or abs(mean) <= half else "*"
    return f"{label} {mean:+.4f}±{half or 0.0:.4f}{beyond}"


def _under_floors(runs: list[Any], policy: str, family: dict[str, str], which: str) -> int:
    """Runs of `policy` on `which` family's scenarios below either score floor."""
    # A run with no per-VF score (no VF carried traffic: NaN) is neither under nor over.
    return sum(1 for r in runs if r.policy == policy and family.get(r.scenario) == which
               and r.vf_geomean == r.vf_geomean and not meets_floors({"vf_geomean": r.vf_geomean, "vf_min": r.vf_min}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--random", type=int, default=8)
    ap.add_argument("--draw-seed", type=int, default=1000)
    ap.add_argument("--mechanism", action="append", default=None)
    ap.add_argument("--scenario", action="append", default=None, help="built-in scenarios (default: the bench's set)")
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    seeds = parse_seeds(args.seeds)
    names = args.mechanism or [m.name for m in ablation.MECHANISMS]
    drawn = random_hosts.register(args.draw_seed, args.random)
    scenarios = (args.scenario or default_scenarios()) + drawn
    policies = ["vftune", *(ablation.policy(n) for n in names)]
    results = run(scenarios, policies, seeds=seeds, duration=args.duration, jobs=args.jobs)
    family = {s: ("random" if s in drawn else "built-in") for s in scenarios}
    table: list[dict[str, Any]] = []
    print("| mechanism | matters on (built-in) | matters on (random) | switching it off is better on | verdict "
          "| family means, built-in; random (* beyond the interval) | runs under the floors, with / without |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        other = ablation.policy(name)
        # Positive: switching the mechanism off is worse (score lower, CPU per Gb higher).
        score_diffs = _diffs(results, "vftune", other, "vf_geomean", +1.0)
        cpu_diffs = _diffs(results, "vftune", other, "cpu_per_gbps_vs_default", -1.0)
        score = {s: mean_interval(d) for s, d in score_diffs.items()}
        cpu = {s: mean_interval(d) for s, d in cpu_diffs.items()}
        matters: dict[str, list[str]] = {"built-in": [], "random": []}
        hurts: list[str] = []
        for scenario in scenarios:
            for label, cell in (("score", score.get(scenario)), ("CPU", cpu.get(scenario))):
                if cell is None:
                    continue
                mean, half = cell
                if half is None:
                    continue
                if mean > half and mean > 0:
                    matters[family[scenario]].append(f"{scenario} ({label} {mean:+.3f}±{half:.3f})")
                elif mean < -half and mean < 0:
                    hurts.append(f"{scenario} ({label} {mean:+.3f}±{half:.3f})")
        keep = bool(matters["built-in"]) and bool(matters["random"])
        verdict = "KEEP" if keep else ("HURTS" if hurts and not any(matters.values()) else "no effect shown")
        means = {which: f"{_family_mean(score_diffs, family, which, 'score')}, "
                        f"{_family_mean(cpu_diffs, family, which, 'CPU')}" for which in ("built-in", "random")}
        under = {which: (_under_floors(results, "vftune", family, which), _under_floors(results, other, family, which))
                 for which in ("built-in", "random")}
        table.append({"mechanism": name, "matters": matters, "hurts": hurts, "verdict": verdict,
                      "family_means": means, "under_floors": under})
        print(f"| {name} | {'; '.join(matters['built-in']) or '-'} | {'; '.join(matters['random']) or '-'} | "
              f"{'; '.join(hurts) or '-'} | {verdict} | {means['built-in']}; {means['random']} | "
              f"built-in {under['built-in'][0]} / {under['built-in'][1]}; random {under['random'][0]} / {under['random'][1]} |")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as out:
            json.dump({"seeds": seeds, "random": drawn, "scenarios": scenarios, "table": table}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
