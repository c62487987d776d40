"""How noisy is `vftune testbed`'s judge? Paired rounds of three settings on the live testbed.

Usage (root): python bench/testbed_judge_noise.py ROUNDS OUT.json
              python bench/testbed_judge_noise.py --analyse OUT.json

Each round measures no deferral, defer 0 / 50 us and defer 1 / 200 us one after another (the
load of `vftune testbed`). The analysis resamples the rounds (seed 1) into judges of 6, 12 and
16 rounds and prints the standard deviation of two scores: the ratio of the two settings'
medians, and the median of the per-round ratios (what testbed/run.py's _judge uses).
"""

from __future__ import annotations

import json
import random
import statistics as st
import sys

CASES = (("defer 0 gro 50us", "p99"), ("defer 0 gro 50us", "cpu"), ("defer 1 gro 200us", "cpu"))
BASE = "no deferral"


def measure(rounds: int, out: str) -> None:
    from vftune.testbed.knob import NO_DEFERRAL, Knob
    from vftune.testbed.measure import LoadSpec, measure
    from vftune.testbed.netns import Testbed

    knobs, load, rows = [NO_DEFERRAL, Knob(0, 50_000), Knob(1, 200_000)], LoadSpec(), []
    with Testbed() as tb:
        measure(tb, NO_DEFERRAL, load)  # warm the path
        for r in range(rounds):
            row = {}
            for k in knobs:
                m = measure(tb, k, load)
                row[k.label] = {"p99": m.p99_us, "cpu": m.cpu, "busy": m.busy}
            rows.append(row)
            print(r, {k: (round(v["p99"]), round(v["cpu"], 3)) for k, v in row.items()}, flush=True)
    with open(out, "w") as f:
        json.dump(rows, f)


def analyse(path: str) -> None:
    with open(path) as f:
        rows = json.load(f)
    rng = random.Random(1)
    for other, key in CASES:
        a = [r[BASE][key] for r in rows]
        b = [r[other][key] for r in rows]
        per = [y / x for x, y in zip(a, b)]
        for n in (6, 12, 16):
            of_medians, paired = [], []
            for _ in range(4000):
                idx = [rng.randrange(len(rows)) for _ in range(n)]
                of_medians.append(st.median(b[i] for i in idx) / st.median(a[i] for i in idx))
                paired.append(st.median(per[i] for i in idx))
            print(f"{other} {key} over {BASE}, {n:2d} rounds: sd ratio of medians {st.pstdev(of_medians):.3f}, "
                  f"median of paired ratios {st.pstdev(paired):.3f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--analyse":
        analyse(sys.argv[2])
    elif len(sys.argv) == 3:
        measure(int(sys.argv[1]), sys.argv[2])
    else:
        sys.exit(__doc__)
