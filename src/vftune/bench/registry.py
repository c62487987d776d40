"""The one list of benchmark policies: the CLI, the harness, the README table and the tests use it.

Two kinds of policy:
- host-run (HOST): a VfPolicyFactory the agent runs on the host, one sample per tick, on the
  host's counters (vftune, bayesopt, paper; the fixed rates, which the bench writes directly);
- guest-run (GUEST): moderation inside the guest's driver, per interrupt on its own counters
  (default: ixgbevf's adaptive ITR; net_dim and net_dim-cqe: Linux DIM). The host agent only
  observes; the bench puts the algorithm in the simulated guest (groundtruth.MeasuredSim).
The oracle needs the scenario's plan, so the harness builds it; it is always last. The frontier
is a plan too, built from the oracle's (bench/frontier.py).

`paper` is Wu & Wang's search as printed (its wrong-end bug and 1000-interrupt restart kept): a
labelled reference, not a headline peer. ixgbe's PF algorithm is not here: no VF runs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from vftune.agent.policies import SearchFactory
from vftune.bench import ablation
from vftune.bench.peers.bayesopt import BayesOptPolicy
from vftune.bench.peers.net_dim import GuestNetDim
from vftune.bench.peers.paper import PaperPolicy
from vftune.control.objective import Goal
from vftune.control.policy import FixedItr, Observe, VfPolicyFactory
from vftune.itr import MAX_RX_USECS

ORACLE = "oracle"
# The cheapest fixed plan that meets the score targets (frontier.py): where it spends more CPU
# per Gb than the default, the score and CPU targets cannot both pass for a fixed-rate policy.
FRONTIER = "frontier"


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
TUNERS: dict[str, str] = {"vftune": "balanced", "vftune-throughput": "throughput", "vftune-efficiency": "efficiency",
                          "vftune-latency": "latency"}
# None: the simulated guest's own ixgbevf adaptive ITR, left as it is.
GUEST: dict[str, Callable[[], Any] | None] = {
    "default": None,
    "net_dim": lambda: GuestNetDim("ice"),
    "net_dim-cqe": lambda: GuestNetDim("cqe"),
}
# In the order the benchmark reports them.
POLICIES: tuple[str, ...] = ("default", "fixed-8000", "fixed-20000", "fixed-100000", "net_dim", "net_dim-cqe",
                             "bayesopt", "paper", *TUNERS, FRONTIER, ORACLE)
HEADLINE_PEERS: tuple[str, ...] = ("net_dim", "bayesopt")  # the adaptive peers vftune must beat
LABELLED: dict[str, str] = {
    "paper": "Wu & Wang as printed (wrong-end bug kept); not a headline peer",
    FRONTIER: "the cheapest fixed plan at 0.97 of the oracle, known in advance; a reference, not a peer",
}


# `vftune:0.05`, `vftune-efficiency:0.2`: an objective with an operator's margin (a config rule's
# `margin`), to see what a margin buys on a scenario before setting it. Latency takes none.
NO_MARGIN_TUNER = "vftune-latency"


def tuner_goal(policy: str) -> Goal | None:
    """The goal a vftune policy name gives (None: not a vftune policy); ValueError names a bad margin."""
    name, colon, arg = policy.partition(":")
    if name not in TUNERS:
        return None
    if not colon:
        return Goal.of(TUNERS[name])
    if name == NO_MARGIN_TUNER:
        raise ValueError(f"policy {policy!r}: {NO_MARGIN_TUNER} takes no margin (vftune:0.05 does)")
    try:
        return Goal.of(TUNERS[name], None, float(arg))
    except ValueError as exc:
        raise ValueError(f"policy {policy!r}: {exc}") from None


def frontier_delay_us(policy: str) -> float | None:
    """`frontier:250`: the frontier with no coalescing delay longer than 250 us (the throughput
    objective's own plateau bound), to see what a tuner held to that bound could reach. None for
    the plain frontier; ValueError for a policy that is no frontier or a bad bound."""
    name, colon, arg = policy.partition(":")
    if name != FRONTIER:
        raise ValueError(f"policy {policy!r} is not {FRONTIER}")
    if not colon:
        return None
    try:
        bound = float(arg)
    except ValueError:
        bound = math.nan
    if not 2.0 <= bound <= MAX_RX_USECS:  # rx-usecs' 2-us steps, the 9-bit interval field's top
        raise ValueError(f"policy {policy!r}: the delay bound must be 2..{MAX_RX_USECS} us (the 82599's ITR range), "
                         f"got {arg!r}")
    return bound


def is_frontier(policy: str) -> bool:
    return policy.partition(":")[0] == FRONTIER


def check_policy(policy: str) -> None:
    """ValueError naming the policy unless the bench knows it."""
    if is_frontier(policy):
        frontier_delay_us(policy)
        return
    if ablation.options(policy) is not None:
        return
    if policy not in POLICIES and tuner_goal(policy) is None:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)} (and vftune[-OBJECTIVE]:MARGIN, "
                         f"{FRONTIER}:DELAY_US)")


def host_factory(policy: str) -> VfPolicyFactory:
    if policy in GUEST:
        return lambda pci, caps: Observe()
    goal = tuner_goal(policy)
    if goal is not None:
        return SearchFactory(default_goal=goal)
    ablated = ablation.options(policy)
    if ablated is not None:
        return SearchFactory(options=ablated, default_goal=Goal.of(TUNERS["vftune"]))
    if policy not in HOST:
        check_policy(policy)
    return HOST[policy]
