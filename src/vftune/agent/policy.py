"""Plug-in points for the control logic: per-VF ITR policies and per-PF mode controllers.

Policies are pure: they see derived samples (rates over one interval) and answer with a
decision or None. No clock, no I/O; the agent applies what they decide and records it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from vftune.itr import quantize_itr
from vftune.model import Capabilities, ItrDecision, ModeDecision, PfSample, VfSample


class VfPolicy(Protocol):
    name: str

    def step(self, sample: VfSample) -> ItrDecision | None: ...


class PfController(Protocol):
    name: str

    def step(self, sample: PfSample) -> ModeDecision | None: ...


VfPolicyFactory = Callable[[str, Capabilities], VfPolicy]
PfControllerFactory = Callable[[str, Capabilities], PfController]


class FixedItr:
    """Sets one ITR once and keeps it: the simplest policy, and the fixed-ITR peers."""

    def __init__(self, itr: int) -> None:
        self.itr = itr
        self.name = f"fixed-{itr}"

    def step(self, sample: VfSample) -> ItrDecision | None:
        # The 82599 delivers whole 2.048-us steps: 20000/s reads back as 20345/s.
        if sample.itr != quantize_itr(self.itr):
            return ItrDecision(self.itr, f"fixed policy: {self.itr}/s")
        return None


class Observe:
    """Changes nothing: the VF keeps whatever it runs (the guest's adaptive ITR by default)."""

    name = "observe"

    def step(self, sample: VfSample) -> ItrDecision | None:
        return None


class StockMode:
    """Leaves the PF in stock NAPI."""

    name = "stock"

    def step(self, sample: PfSample) -> ModeDecision | None:
        return None
