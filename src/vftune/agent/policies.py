"""Policy specs as an operator writes them on the command line: `search`, `fixed:20000`, `observe`.

Every VF factory here is a GoalPolicyFactory: called as (pci, caps) it gives the default goal
(objective `balanced`), called as (pci, caps, Goal.of(objective, max_interval_us, margin)) it gives the
goal of the VF's config rule. make_vf_policy() is the same in one call. The search factory holds
one HostProfiles for all the VFs it makes: the host's workload memory (Agent.profiles()).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TypeVar

from vftune.control.memory import HostProfiles
from vftune.control.mode import HybridModeController, ModeOptions
from vftune.control.objective import Goal, Objective
from vftune.control.policy import (
    DEFAULT_GOAL,
    FixedItr,
    GoalPolicyFactory,
    Observe,
    PfControllerFactory,
    StockMode,
    VfPolicy,
)
from vftune.control.tuner import SearchTuner, TunerOptions
from vftune.model import Capabilities

Made = TypeVar("Made")


class PolicyError(ValueError):
    pass


def _fixed(arg: str) -> GoalPolicyFactory:
    try:
        itr = int(arg)
    except ValueError:
        raise PolicyError(f"--policy fixed:{arg}: the rate must be a whole number of interrupts/s") from None

    def make(pci: str, caps: Capabilities, goal: Goal = DEFAULT_GOAL, /) -> FixedItr:
        if not caps.itr_min <= itr <= caps.itr_max:
            raise PolicyError(
                f"--policy fixed:{itr}: outside this host's range {caps.itr_min}..{caps.itr_max} interrupts/s"
            )
        return FixedItr(itr)

    return make


class SearchFactory:
    """Makes SearchTuners that share one host's workload memory, each with its VF's goal."""

    def __init__(self, options: TunerOptions | None = None, profiles: HostProfiles | None = None,
                 default_goal: Goal = DEFAULT_GOAL) -> None:
        self.options = options
        self.profiles = profiles or HostProfiles()
        self.default_goal = default_goal  # for VFs no config rule gives a goal

    def __call__(self, pci: str, caps: Capabilities, goal: Goal = DEFAULT_GOAL, /) -> SearchTuner:
        if goal == DEFAULT_GOAL:
            goal = self.default_goal
        return SearchTuner(pci, caps, self.options, goal=goal, profiles=self.profiles)


def _search(arg: str) -> GoalPolicyFactory:
    if arg:
        raise PolicyError(f"--policy search:{arg}: search takes no argument")
    return SearchFactory()


def _observe(arg: str) -> GoalPolicyFactory:
    def make(pci: str, caps: Capabilities, goal: Goal = DEFAULT_GOAL, /) -> Observe:
        return Observe()

    return make


def _hybrid(arg: str) -> PfControllerFactory:
    try:
        cliff = float(arg) if arg else None
        if cliff is not None and not (math.isfinite(cliff) and cliff > 0):
            raise ValueError
        options = ModeOptions(cliff_pps=cliff) if cliff is not None else ModeOptions()
    except ValueError:
        raise PolicyError(f"--pf-mode hybrid:{arg[:40]}: the cliff must be a finite packet rate > 0") from None
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


def make_vf_policy(spec: str, pci: str, caps: Capabilities, objective: Objective | str = Objective.BALANCED,
                   max_interval_us: float | None = None, margin: float | None = None) -> VfPolicy:
    """One VF's policy from a spec and its config rule's objective, bound (microseconds) and
    throughput margin (efficiency)."""
    try:
        goal = Goal.of(objective, max_interval_us, margin)
    except ValueError as exc:
        raise PolicyError(str(exc)) from None
    return vf_policy(spec)(pci, caps, goal)


def pf_controller(spec: str) -> PfControllerFactory:
    return _parse(spec, PF_CONTROLLERS, "--pf-mode")
