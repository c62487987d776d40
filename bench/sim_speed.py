"""How fast the simulated host runs: one simulated hour of the mixed host under the real agent.

    .venv/bin/python bench/sim_speed.py [--seconds 3600] [--scenario mixed-host]

Target: one simulated hour of 16 VFs in under 10 s of wall time, i.e. at least
360 simulated seconds per wall second. Printed side by side: the model alone (snapshots only)
and the model under the agent with the search policy and a SQLite store, so the agent's own
share of the cost shows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from vftune.agent.loop import Agent
from vftune.agent.policies import pf_controller, vf_policy
from vftune.sim.host import SimHost
from vftune.store.db import Store

TARGET_RATIO = 360.0


def model_alone(scenario: str, seconds: int) -> float:
    host = SimHost(scenario, seed=0, speed=float("inf"))
    t0 = time.perf_counter()
    for _ in range(seconds):
        host.sleep(1.0)
        host.snapshot()
    return time.perf_counter() - t0


def with_agent(scenario: str, seconds: int, db: Path) -> tuple[float, int]:
    host = SimHost(scenario, seed=0, speed=float("inf"))
    store = Store(db)
    agent = Agent(host, store, vf_policy("search"), pf_controller("hybrid"))
    t0 = time.perf_counter()
    agent.start("bench")
    for _ in range(seconds):
        host.sleep(1.0)
        agent.tick()
    agent.shutdown()
    wall = time.perf_counter() - t0
    store.close()
    return wall, len(agent.inventory.vfs())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3600)
    parser.add_argument("--scenario", default="mixed-host")
    args = parser.parse_args()
    alone = model_alone(args.scenario, args.seconds)
    with tempfile.TemporaryDirectory() as tmp:
        agent_wall, vfs = with_agent(args.scenario, args.seconds, Path(tmp) / "h.db")
    for label, wall in (("model alone", alone), ("model + agent + store", agent_wall)):
        print(f"{label:>22}: {args.seconds} simulated s of {args.scenario} ({vfs} VFs) in {wall:.2f} s wall, "
              f"{args.seconds / wall:.0f}x real time")
    print(f"agent + store cost {agent_wall / alone:.2f}x the model alone; target >= {TARGET_RATIO:.0f}x real time")
    ok = args.seconds / agent_wall >= TARGET_RATIO
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
