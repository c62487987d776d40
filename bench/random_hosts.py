"""Random scenario files through the bench: hosts nobody wrote a scenario for.

    .venv/bin/python bench/random_hosts.py [--count 25] [--seed 2000] [--keep DIR]

Each file draws a host (1-3 ports, 82599 or pro1000, 2-32 cores, stock or patched counters,
posted interrupts, irq accounting, guest agents, the VF's fetch period, noise) and 1-8 VFs
with 1-3 phases of bulk TCP, UDP, request/response or idle, with or without a cycle, and
sometimes PF traffic. Every file runs vftune, the default and net_dim on one drawn seed, or
on each of `--seeds` (e.g. 10-14: one draw of noise can decide a search on a noisy host).
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
from vftune.cli.bench import parse_seeds
from vftune.sim.scenarios import register_file


def _phase(rng: random.Random, at: int) -> str:
    kind = rng.choice(["tcp", "udp", "rr", "idle"])
    keys = [f"at_s = {at}", f'kind = "{kind}"']
    if kind in ("tcp", "udp"):
        keys.append(f"packet_bytes = {rng.choice([64, 128, 512, 1500, 4000, 9000])}")
        if kind == "udp" or rng.random() < 0.6:
            keys.append(f"offered_bps = {rng.choice([1e7, 1e8, 5e8, 2e9, 6e9])}")
        keys.append(f"rtt_us = {rng.choice([20, 60, 200, 1000])}")
        if kind == "tcp" and rng.random() < 0.3:
            keys.append(f"window_bytes = {rng.choice([16384, 262144, 4194304])}")
    elif kind == "rr":
        keys += [f"request_bytes = {rng.choice([64, 400, 3000])}", f"response_bytes = {rng.choice([64, 1400, 20000])}",
                 f"in_flight = {rng.choice([1, 2, 8, 32])}", f"service_us = {rng.choice([1, 5, 50])}"]
    return "[[vf.phase]]\n" + "\n".join(keys)


def random_host(name: str, rng: random.Random) -> str:
    """One valid scenario file (docs/scenarios.md), drawn from rng."""
    ports = rng.randint(1, 3)
    cycle = rng.choice([None, None, 7, 20, 45, 90])
    lines = [f'name = "{name}"', 'description = "a random host"', f"duration_s = {rng.choice([60, 120, 200])}"]
    if cycle:
        lines.append(f"cycle_s = {cycle}")
    lines += ["[host]", f"cores = {rng.choice([2, 4, 12, 32])}", f"ports = {ports}",
              f'nic = "{rng.choice(["82599", "82599", "pro1000"])}"',
              f"irq_time_accounting = {str(rng.random() < 0.7).lower()}",
              f"posted_interrupts = {str(rng.random() < 0.2).lower()}",
              f'counters = "{rng.choice(["stock", "patched"])}"',
              f"guest_agent = {str(rng.random() < 0.8).lower()}",
              f"vf_itr_fetch_s = {rng.choice([0, 0.5, 2.0])}",
              "[noise]", f"sigma = {rng.choice([0.0, 0.03, 0.1, 0.3])}", f"burst = {rng.choice([1.0, 1.5, 4.0])}"]
    guests = rng.randint(1, 6)
    for g in range(guests):
        lines += ["[[guest]]", f'name = "g{g}"', f"vcpus = {rng.choice([1, 2, 4])}"]
    for _ in range(rng.randint(1, 8)):
        lines.append("[[vf]]")
        if rng.random() < 0.9:
            lines.append(f'guest = "g{rng.randrange(guests)}"')
        lines.append(f"port = {rng.randrange(ports)}")
        limit = cycle or 150
        first = 0 if rng.random() < 0.6 else rng.randrange(1, limit)
        starts = sorted({first} | {rng.randrange(0, limit) for _ in range(rng.randint(0, 2))})
        lines += [_phase(rng, at) for at in starts]
    if rng.random() < 0.3:
        lines += ["[[pf]]", f"port = {rng.randrange(ports)}", "[[pf.phase]]", "at_s = 0",
                  f"pps = {rng.choice([1000, 200000, 800000])}"]
    return "\n".join(lines) + "\n"


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
