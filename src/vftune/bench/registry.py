"""The one list of benchmark policies: the CLI, the harness, the README table and the tests use it.

Two kinds of policy:
- host-run (HOST): a VfPolicyFactory the agent runs on the host, one sample per tick, on the
  host's counters (vftune, bayesopt, paper; the fixed rates, which the bench writes directly);
- guest-run (GUEST): moderation inside the guest's driver, per interrupt on its own counters
  (default: ixgbevf's adaptive ITR; net_dim and net_dim-cqe: Linux DIM). The host agent only
  observes; the bench puts the algorithm in the simulated guest (groundtruth.MeasuredSim).
The oracle needs the scenario's plan, so the harness builds it; it is always last.

`paper` is Wu & Wang's search as printed (its wrong-end bug and 1000-interrupt restart kept): a
labelled reference, not a headline peer. ixgbe's PF algorithm is not here: no VF runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vftune.agent.policies import SearchFactory
from vftune.agent.policy import FixedItr, Observe, VfGoal, VfPolicyFactory
from vftune.bench.peers.bayesopt import BayesOptPolicy
from vftune.bench.peers.net_dim import GuestNetDim
from vftune.bench.peers.paper import PaperPolicy

ORACLE = "oracle"


def _fixed(itr: int) -> VfPolicyFactory:
    return lambda pci, caps: FixedItr(itr)


FIXED: dict[str, int] = {"fixed-8000": 8000, "fixed-20000": 20000, "fixed-100000": 100000}
HOST: dict[str, VfPolicyFactory] = {
    **{name: _fixed(itr) for name, itr in FIXED.items()},
    "paper": lambda pci, caps: PaperPolicy(pci, caps),
    "bayesopt": lambda pci, caps: BayesOptPolicy(pci, caps),
}
# vftune under each objective: a new factory per run, so the VFs of one run share one host's
# workload memory and no run learns from another.
TUNERS: dict[str, str] = {"vftune": "throughput", "vftune-efficiency": "efficiency", "vftune-latency": "latency"}
# None: the simulated guest's own ixgbevf adaptive ITR, left as it is.
GUEST: dict[str, Callable[[], Any] | None] = {
    "default": None,
    "net_dim": lambda: GuestNetDim("ice"),
    "net_dim-cqe": lambda: GuestNetDim("cqe"),
}
# In the order the benchmark reports them.
POLICIES: tuple[str, ...] = ("default", "fixed-8000", "fixed-20000", "fixed-100000", "net_dim", "net_dim-cqe",
                             "bayesopt", "paper", *TUNERS, ORACLE)
HEADLINE_PEERS: tuple[str, ...] = ("net_dim", "bayesopt")  # the adaptive peers vftune must beat
LABELLED: dict[str, str] = {"paper": "Wu & Wang as printed (wrong-end bug kept); not a headline peer"}


def host_factory(policy: str) -> VfPolicyFactory:
    if policy in GUEST:
        return lambda pci, caps: Observe()
    if policy in TUNERS:
        return SearchFactory(default_goal=VfGoal(TUNERS[policy]))
    if policy not in HOST:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    return HOST[policy]
