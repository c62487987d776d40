"""The targets vftune must meet in the benchmark, each with the figures behind its verdict."""

from __future__ import annotations

from dataclasses import dataclass

from vftune.bench.registry import PEERS
from vftune.bench.scores import PairResult
from vftune.sim.scenarios import build


@dataclass(frozen=True)
class Target:
    name: str
    ok: bool
    detail: str


def targets(results: list[PairResult]) -> list[Target]:
    """The issue's targets for vftune, each with the figures behind its verdict."""
    by = {(r.scenario, r.policy): r for r in results}
    scenarios = list(dict.fromkeys(r.scenario for r in results))
    ours = [by[(s, "vftune")] for s in scenarios if (s, "vftune") in by]
    if not ours:
        return []
    out: list[Target] = []
    ratios = [r.throughput_ratio for r in ours]
    mean = sum(ratios) / len(ratios)
    low = min(ours, key=lambda r: r.throughput_ratio)
    out.append(Target("throughput vs oracle", mean >= 0.97 and low.throughput_ratio >= 0.90,
                      f"mean {mean:.3f} (>= 0.97), lowest {low.throughput_ratio:.3f} in {low.scenario} (>= 0.90)"))
    if all((s, "default") in by for s in scenarios):
        gaps = [(r.throughput_ratio / by[(r.scenario, "default")].throughput_ratio - 1.0, r.scenario) for r in ours]
        worst_gap, where = min(gaps)
        out.append(Target("never below default by > 1%", worst_gap >= -0.01,
                          f"worst {worst_gap * 100:+.2f}% vs default in {where}"))
    peers = [p for p in PEERS if all((s, p) in by for s in scenarios)]
    if peers:
        means = {p: sum(by[(s, p)].throughput_ratio for s in scenarios) / len(scenarios) for p in peers}
        out.append(Target("ahead of paper, net_dim, ixgbe on average", all(mean > m for m in means.values()),
                          f"vftune {mean:.3f}; " + ", ".join(f"{p} {m:.3f}" for p, m in means.items())))
    cold_max = max((r.extra.get("search_probes_cold") or 0 for r in ours), default=0)
    phase_max = max((r.extra.get("search_probes_phase") or 0 for r in ours), default=0)
    never = [r.scenario for r in ours if r.converge_s is None]
    never += [r.scenario for r in ours if build(r.scenario, r.seed).cycle_s and r.reconverge_s is None]
    out.append(Target("converges in <= 15 probes cold, <= 20 after a phase change",
                      cold_max <= 15 and phase_max <= 20 and not never,
                      f"cold max {cold_max} probes; after a phase change max {phase_max}"
                      + (f"; never settled in {', '.join(never)}" if never else "")))
    unasked = sum(int(r.extra.get("unasked_changes", 0)) for r in ours)
    load_restarts = {r.scenario: r.extra.get("restarts_load", 0) for r in ours
                     if not build(r.scenario, r.seed).cycle_s and r.extra.get("restarts_load", 0)}
    cpm = max(r.changes_per_min for r in ours)
    out.append(Target("no steady-state changes beyond the restart policy", unasked == 0 and not load_restarts,
                      f"{unasked} changes outside searches; max {cpm:.2f} changes/min, all from restarts"
                      + (f"; load-change restarts without a load change: {load_restarts}" if load_restarts else "")))
    if all((s, "default") in by for s in scenarios):
        equal = [(r, by[(r.scenario, "default")]) for r in ours
                 if abs(r.throughput_ratio / by[(r.scenario, "default")].throughput_ratio - 1.0) <= 0.01]
        worse = [f"{r.scenario} ({r.cpu:.4f} vs {d.cpu:.4f})" for r, d in equal if r.cpu >= d.cpu]
        out.append(Target("less CPU than default where throughput is equal", not worse,
                          f"{len(equal)} scenario(s) within 1% of default"
                          + (f"; not less in {', '.join(worse)}" if worse else ", less CPU in all")))
    return out
