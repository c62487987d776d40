"""Random scenario files through the bench: hosts nobody wrote a scenario for.

    .venv/bin/python bench/random_hosts.py [--count 25] [--seed 2000] [--keep DIR]

Each file is drawn by the package's generator (vftune.bench.random_hosts, the one `vftune
bench --random N` uses; here file i is drawn from Random(seed + i)). Every file runs vftune,
the default and net_dim on one drawn seed, or on each of `--seeds` (e.g. 10-14: one draw of
noise can decide a search on a noisy host).
Printed per file: the per-VF geomean of each (the mean over the seeds), and a mark where
vftune is more than 1% below the default; then the means over all files. Nothing is
asserted: a crash or a loss is something to look at (file `--keep`).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import traceback
from pathlib import Path

from vftune.bench import run
from vftune.bench.random_hosts import random_host
from vftune.cli.bench import parse_seeds
from vftune.sim.scenarios import register_file


def _seeds(text: str) -> list[int]:
    try:
        return parse_seeds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=25)
    parser.add_argument("--seed", type=int, default=2000, help="file i is drawn from seed + i")
    parser.add_argument("--keep", type=Path, help="write the files here (default: a temporary directory)")
    parser.add_argument("--seeds", type=_seeds, help="run every file on these seeds (e.g. 10-14) "
                        "instead of one drawn seed")
    args = parser.parse_args()
    where = args.keep or Path(tempfile.mkdtemp(prefix="vftune-random-hosts-"))
    where.mkdir(parents=True, exist_ok=True)
    crashes = losses = 0
    policies = ("vftune", "default", "net_dim")
    means: dict[str, list[float]] = {p: [] for p in policies}
    for i in range(args.count):
        name = f"random-{args.seed + i}"
        rng = random.Random(args.seed + i)
        path = where / f"{name}.toml"
        path.write_text(random_host(name, rng), encoding="utf-8")
        drawn = rng.randrange(100)  # drawn either way, so a file is the same with or without --seeds
        seeds = args.seeds or [drawn]
        try:
            results = run([register_file(path)], list(policies), seeds=seeds, jobs=None if args.seeds else 1)
        except Exception:  # a crash is the finding: print it and go on
            crashes += 1
            print(f"{name}: CRASH ({path})")
            traceback.print_exc()
            continue
        by = {p: _mean([r.vf_geomean for r in results if r.policy == p]) for p in policies}
        for p in policies:
            means[p].append(by[p])
        ours, default = by["vftune"], by["default"]
        lost = math.isfinite(ours) and math.isfinite(default) and ours < default * 0.99
        losses += lost
        on = f"seeds {args.seeds[0]}-{args.seeds[-1]}" if args.seeds else f"seed {drawn}"
        print(f"{name} {on}: vftune {ours:.3f} default {default:.3f} net_dim {by['net_dim']:.3f}"
              + ("  <-- more than 1% below the default" if lost else ""), flush=True)
    overall = ", ".join(f"{p} {_mean(v):.4f}" for p, v in means.items())
    print(f"{args.count} files, {crashes} crashes, {losses} more than 1% below the default; "
          f"mean per-VF geomean over the files: {overall}; files in {where}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
