"""Plug-in points for the control logic: per-VF ITR policies and per-PF mode controllers.

Policies are pure: they see derived samples (rates over one interval) and answer with a
decision or None. No clock, no I/O; the agent applies what they decide and records it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from vftune.control.objective import Goal
from vftune.itr import quantize_itr, same_itr
from vftune.model import Capabilities, ItrDecision, ModeDecision, PfSample, VfSample


class VfPolicy(Protocol):
    """Decides one VF's ITR. Classes that subclass it explicitly inherit the default state()."""

    name: str

    def step(self, sample: VfSample) -> ItrDecision | None: ...

    def state(self) -> dict[str, object]:
        """What the API shows of the policy's progress (JSON-able); {} when there is nothing."""
        return {}

    def initial(self) -> ItrDecision | None:
        """A setting to apply as soon as the VF is found, before any sample (a fixed or pinned ITR
        needs no counters). Default: none."""
        return None

    def at_rest(self) -> bool:
        """Whether samples without traffic or interrupts would change nothing in this policy now
        (no decision, no state), so the agent may stop sampling its VF until its counts move.
        Default: no."""
        return False


class PfController(Protocol):
    """Decides one PF's rx mode. Subclass it explicitly to inherit the defaults."""

    name: str

    def step(self, sample: PfSample) -> ModeDecision | None: ...

    def state(self) -> dict[str, object]:
        """What the API shows of the controller's progress (JSON-able)."""
        return {}

    def takes_measured_cliff(self) -> bool:
        """Whether a cliff from the host's measured costs is wanted (none configured). Default: no."""
        return False

    def set_cliff(self, cliff_pps: float, source: str) -> None:
        """(Re)set the saturation packet rate the controller switches around; `source` says where
        it came from (configured, measured costs, cost model). Default: not used."""
        return None


VfPolicyFactory = Callable[[str, Capabilities], VfPolicy]
PfControllerFactory = Callable[[str, Capabilities], PfController]


DEFAULT_GOAL = Goal()  # what a VF no config rule names is tuned for


class GoalPolicyFactory(Protocol):
    """A VfPolicyFactory that also takes the VF's goal: vftune.agent.policies' factories."""

    def __call__(self, pci: str, caps: Capabilities, goal: Goal = DEFAULT_GOAL, /) -> VfPolicy: ...


class FixedItr(VfPolicy):
    """Sets one ITR once and keeps it: the simplest policy, and the fixed-ITR peers."""

    def __init__(self, itr: int) -> None:
        self.itr = itr
        self.name = f"fixed-{itr}"

    def step(self, sample: VfSample) -> ItrDecision | None:
        # The 82599 delivers whole 2.048-us steps: 20000/s reads back as 20345/s. A write on its
        # way (the patched VF takes it at its next fetch) is not asked for again.
        if sample.itr_pending is not None and same_itr(sample.itr_pending, self.itr):
            return None
        if sample.itr != quantize_itr(self.itr):
            return ItrDecision(self.itr, f"fixed policy: {self.itr}/s")
        return None

    def initial(self) -> ItrDecision | None:
        return ItrDecision(self.itr, f"fixed policy: {self.itr}/s, set when the VF was found")

    def at_rest(self) -> bool:
        return True  # the rate in force stays (the agent checks nothing is on its way)


class Observe(VfPolicy):
    """Changes nothing: the VF keeps whatever it runs (the guest's adaptive ITR by default)."""

    name = "observe"

    def step(self, sample: VfSample) -> ItrDecision | None:
        return None

    def at_rest(self) -> bool:
        return True


class Excluded(VfPolicy):
    """A VF the config file excludes: never written, whatever it runs stays."""

    name = "excluded"

    def step(self, sample: VfSample) -> ItrDecision | None:
        return None

    def at_rest(self) -> bool:
        return True


class StockMode(PfController):
    """Leaves the PF in stock NAPI."""

    name = "stock"

    def step(self, sample: PfSample) -> ModeDecision | None:
        return None
