"""Policy specs as an operator writes them on the command line: `search`, `fixed:20000`, `observe`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from vftune.agent.mode import HybridModeController, ModeOptions
from vftune.agent.policy import (
    DEFAULT_GOAL,
    FixedItr,
    GoalPolicyFactory,
    Observe,
    PfControllerFactory,
    StockMode,
    VfGoal,
)
from vftune.agent.tuner import SearchTuner, TunerOptions
from vftune.model import Capabilities

Made = TypeVar("Made")


class PolicyError(ValueError):
    pass


def _fixed(arg: str) -> GoalPolicyFactory:
    try:
        itr = int(arg)
    except ValueError:
        raise PolicyError(f"--policy fixed:{arg}: the rate must be a whole number of interrupts/s") from None

    def make(pci: str, caps: Capabilities, goal: VfGoal = DEFAULT_GOAL) -> FixedItr:
        if not caps.itr_min <= itr <= caps.itr_max:
            raise PolicyError(
                f"--policy fixed:{itr}: outside this host's range {caps.itr_min}..{caps.itr_max} interrupts/s"
            )
        return FixedItr(itr)

    return make


def _search(arg: str) -> GoalPolicyFactory:
    if arg:
        raise PolicyError(f"--policy search:{arg}: search takes no argument")

    def make(pci: str, caps: Capabilities, goal: VfGoal = DEFAULT_GOAL) -> SearchTuner:
        # The objective is carried for the tuner to act on; the interval bound it acts on today.
        options = TunerOptions(max_interval_us=goal.max_interval_us) if goal.max_interval_us else None
        return SearchTuner(pci, caps, options)

    return make


def _observe(arg: str) -> GoalPolicyFactory:
    def make(pci: str, caps: Capabilities, goal: VfGoal = DEFAULT_GOAL) -> Observe:
        return Observe()

    return make


def _hybrid(arg: str) -> PfControllerFactory:
    try:
        options = ModeOptions(cliff_pps=float(arg)) if arg else ModeOptions()
    except ValueError:
        raise PolicyError(f"--pf-mode hybrid:{arg}: the cliff must be a packet rate > 0") from None
    return lambda pf, caps: HybridModeController(pf, caps, options)


VF_POLICIES: dict[str, Callable[[str], GoalPolicyFactory]] = {
    "search": _search,
    "fixed": _fixed,
    "observe": _observe,
}

PF_CONTROLLERS: dict[str, Callable[[str], PfControllerFactory]] = {
    "hybrid": _hybrid,
    "stock": lambda _arg: (lambda pf, caps: StockMode()),
}


def _parse(spec: str, table: Mapping[str, Callable[[str], Made]], option: str) -> Made:
    name, _, arg = spec.partition(":")
    if name not in table:
        raise PolicyError(f"{option} {spec}: unknown; choose from {', '.join(sorted(table))}")
    return table[name](arg)


def vf_policy(spec: str) -> GoalPolicyFactory:
    """A factory callable as (pci, caps) or (pci, caps, goal)."""
    return _parse(spec, VF_POLICIES, "--policy")


def pf_controller(spec: str) -> PfControllerFactory:
    return _parse(spec, PF_CONTROLLERS, "--pf-mode")
