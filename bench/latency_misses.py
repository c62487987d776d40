"""Where the `latency` target's misses come from: request/response VFs more than 5% from their
best response time under `vftune-latency`, each beside how much of the time its guest's own
application went without the CPU it wanted.

A request/response VF's merit (bench/scores.py, Cell.merit) is its transactions over their
summed response time, times the share of its wanted CPU the guest's application got: interrupts
and softirqs run first on the guest's vCPUs, so on a guest whose vCPUs are full every interrupt
more is time its application loses. The agent sees the guest's CPU as one figure, which stays at
the guest's vCPUs whatever the rate, so it cannot tell that loss from the network's own work.
This script separates the two kinds of miss:

    .venv/bin/python bench/latency_misses.py --seeds 5-9 --random 20

It runs the bench's pairs (vftune-latency, and `--compare` beside it: vftune by default) and
prints each miss with its score, the share of its request/response seconds its guest's
application lost, and the compared policy's figures for the same VF; then how many misses, and
what share of their summed shortfall (1 - score), fall on guests that lost more than
STARVED of those seconds. Takes about 4 minutes a seed on two cores.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from dataclasses import dataclass

from vftune.bench.harness import run
from vftune.bench.scores import PairResult
from vftune.bench.targets import LATENCY, OURS, RR_WITHIN, rr_scores
from vftune.cli.bench import parse_seeds

STARVED = 0.10  # a guest whose application lost more than this share of the VF's rr seconds


@dataclass(frozen=True)
class Miss:
    scenario: str
    seed: int
    pci: str
    score: float
    starved: float  # share of the VF's request/response seconds its guest's application lost
    compared: tuple[float, float] | None  # the compared policy's score and starved share


def starved_share(result: PairResult, pci: str) -> float:
    """The application time the VF's guest lost over the VF's request/response seconds."""
    cells = [c for (p, _), c in result.cells.items() if p == pci and c.kind == "rr"]
    seconds = sum(c.seconds for c in cells)
    return sum(c.app_lost_s for c in cells) / seconds if seconds else 0.0


def misses(results: Iterable[PairResult], compare: str) -> tuple[list[Miss], int]:
    """The rr VF-runs of vftune-latency beyond 5%, worst first, and how many rr VF-runs there were."""
    results = list(results)
    others = {(r.scenario, r.seed): r for r in results if r.policy == compare}
    out: list[Miss] = []
    total = 0
    for r in results:
        if r.policy != LATENCY:
            continue
        for pci, score in rr_scores(r).items():
            total += 1
            if score >= RR_WITHIN:
                continue
            other = others.get((r.scenario, r.seed))
            compared = (other.vf_scores.get(pci, math.nan), starved_share(other, pci)) if other else None
            out.append(Miss(r.scenario, r.seed, pci, score, starved_share(r, pci), compared))
    out.sort(key=lambda m: m.score)
    return out, total


def report(found: list[Miss], total: int, compare: str) -> list[str]:
    lines = [f"| score | scenario | seed | VF | app time lost | {compare}: score, app time lost |",
             "|---|---|---|---|---|---|"]
    for m in found:
        other = f"{m.compared[0]:.3f}, {m.compared[1]:.0%}" if m.compared else "-"
        lines.append(f"| {m.score:.3f} | {m.scenario} | {m.seed} | {m.pci} | {m.starved:.0%} | {other} |")
    shortfall = [1.0 - m.score for m in found]  # linear: a score near 0 counts 1, not log's infinity
    starved = [s for m, s in zip(found, shortfall) if m.starved > STARVED]
    share = sum(starved) / sum(shortfall) if shortfall else 0.0
    lines.append(f"{len(found)} of {total} request/response VF-runs beyond 5% of their best; "
                 f"{len(starved)} of them on guests whose application lost more than {STARVED:.0%} of the "
                 f"time, carrying {share:.0%} of the summed shortfall")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="5-9", help="seeds, e.g. 5-9 or 5,7 (default 5-9)")
    parser.add_argument("--random", type=int, default=20, help="random hosts per seed (default 20)")
    parser.add_argument("--compare", default=OURS, help=f"policy shown beside each miss (default {OURS})")
    args = parser.parse_args()
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        parser.exit(2, f"latency_misses.py: --seeds: {exc}\n")
    if args.random < 0:
        parser.exit(2, f"latency_misses.py: --random: must be 0 or more, got {args.random}\n")
    policies = [LATENCY] + ([args.compare] if args.compare != LATENCY else [])
    try:
        results = run(policies=policies, seeds=seeds, random=args.random)
    except ValueError as exc:  # an unknown policy
        parser.exit(2, f"latency_misses.py: {exc}\n")
    print("\n".join(report(*misses(results, args.compare), args.compare)))


if __name__ == "__main__":
    main()
