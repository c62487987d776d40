"""The one list of benchmark policies: the CLI, the harness, the README table and the tests use it.

Every entry but the oracle is a VfPolicyFactory. The oracle needs the scenario's plan (the
best fixed ITR of each phase per VF), so the harness builds it; it is always last.
"""

from __future__ import annotations

from vftune.agent.policy import FixedItr, Observe, VfPolicyFactory
from vftune.agent.tuner import SearchTuner
from vftune.bench.peers.ixgbe import IxgbeAdaptive
from vftune.bench.peers.net_dim import NetDimPolicy
from vftune.bench.peers.paper import PaperPolicy

ORACLE = "oracle"


def _fixed(itr: int) -> VfPolicyFactory:
    return lambda pci, caps: FixedItr(itr)


# In the order the benchmark reports them.
FACTORIES: dict[str, VfPolicyFactory] = {
    "default": lambda pci, caps: Observe(),  # the VF's own adaptive ITR: change nothing
    "fixed-8000": _fixed(8000),
    "fixed-20000": _fixed(20000),
    "fixed-100000": _fixed(100000),
    "paper": lambda pci, caps: PaperPolicy(pci, caps),
    "net_dim": lambda pci, caps: NetDimPolicy(pci, caps),
    "ixgbe": lambda pci, caps: IxgbeAdaptive(pci, caps),
    "vftune": lambda pci, caps: SearchTuner(pci, caps),
}
POLICIES: tuple[str, ...] = (*FACTORIES, ORACLE)
PEERS: tuple[str, ...] = ("paper", "net_dim", "ixgbe")  # the adaptive peers vftune must beat
