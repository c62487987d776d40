"""The agent's behaviour as hashes, to compare two trees: over 400 ticks of search (steady, changing
and idle loads) and 200 of observe on the 126-VF fixture host, the samples each policy sees, its
decisions, the policies' states after every tick, the agent's views every 10 ticks and every
history row (samples, minute rows, PF samples, decisions). The wall clock follows the fixture's
and the temporary directory's name is left out, so a tree hashes the same run after run.

    PYTHONPATH=<tree>/src .venv/bin/python bench/footprint_identity.py   # once per tree, then diff
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
from linux_host import ManualClock, make_tree

import footprint as fp
from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import pf_controller, vf_policy
from vftune.hostdriver.linux.host import LinuxHost
from vftune.hostdriver.linux.netlink_vfstats import ReplaySource
from vftune.store.db import Store

logging.disable(logging.WARNING)
RUNS = (("search", "steady", 400), ("search", "changing", 400), ("search", "idle", 400), ("observe", "steady", 200))


def run(policy: str, load: str, ticks: int) -> dict[str, str]:
    h = {k: hashlib.sha256() for k in ("samples", "states", "decisions", "rows", "views")}
    with tempfile.TemporaryDirectory() as tmp:

        def text(x: Any) -> bytes:  # the temporary directory's name is the run's, not the code's
            return repr(x).replace(tmp, "TMP").encode()

        def recorded(step: Callable[[Any], Any]) -> Callable[[Any], Any]:
            def step_and_hash(s: Any) -> Any:
                h["samples"].update(text(s))
                d = step(s)
                h["decisions"].update(text(d))
                return d
            step_and_hash.recorded = True  # type: ignore[attr-defined]
            return step_and_hash

        clock = ManualClock()
        time.time = lambda: 1.7e9 + clock.t  # wall times (rows, views) follow the fixture's clock
        sysfs, procfs, uri = make_tree(Path(tmp) / "host")
        host = LinuxHost(sysfs, procfs, uri, ReplaySource(fp._replies(load)), clock=clock, sleeper=clock.sleep)
        store = Store(Path(tmp) / "vftune.db")
        agent = Agent(host, store, vf_policy(policy), pf_controller("hybrid"), AgentConfig(interval=0.25))
        agent.view_wanted = lambda: True
        agent.start("identity")
        for n in range(ticks):
            for p in agent._policies.values():  # policies come with the inventory: wrap new ones
                if not getattr(p.step, "recorded", False):
                    p.step = recorded(p.step)  # type: ignore[method-assign]
            clock.sleep(0.25)
            agent.tick()
            for pci in sorted(agent._policies):
                h["states"].update(text((pci, agent._policies[pci].state())))
            if n % 10 == 9:
                v = agent.view()
                vfs = [dataclasses.replace(x, updated=None) for x in v.vfs]
                h["views"].update(text((v.ticks, v.pfs, vfs, v.cost_model, v.decisions, v.vs_adaptive)))
        host.restore()
        host.close()
        store.close()
        con = sqlite3.connect(Path(tmp) / "vftune.db")
        for table in ("samples", "samples_1m", "pf_samples", "decisions"):
            for row in con.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3"):
                h["rows"].update(text(row))
        con.close()
    return {k: v.hexdigest()[:12] for k, v in h.items()}


if __name__ == "__main__":
    for policy, load, ticks in RUNS:
        print(policy, load, ticks, run(policy, load, ticks))
