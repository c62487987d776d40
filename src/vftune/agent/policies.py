"""Policy specs as an operator writes them on the command line: `search`, `fixed:20000`, `observe`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from vftune.agent.mode import HybridModeController, ModeOptions
from vftune.agent.policy import FixedItr, Observe, PfControllerFactory, StockMode, VfPolicyFactory
from vftune.agent.tuner import SearchTuner
from vftune.model import Capabilities

Made = TypeVar("Made")


class PolicyError(ValueError):
    pass


def _fixed(arg: str) -> VfPolicyFactory:
    try:
        itr = int(arg)
    except ValueError:
        raise PolicyError(f"--policy fixed:{arg}: the rate must be a whole number of interrupts/s") from None

    def make(pci: str, caps: Capabilities) -> FixedItr:
        if not caps.itr_min <= itr <= caps.itr_max:
            raise PolicyError(
                f"--policy fixed:{itr}: outside this host's range {caps.itr_min}..{caps.itr_max} interrupts/s"
            )
        return FixedItr(itr)

    return make


def _search(arg: str) -> VfPolicyFactory:
    if arg:
        raise PolicyError(f"--policy search:{arg}: search takes no argument")
    return lambda pci, caps: SearchTuner(pci, caps)


def _hybrid(arg: str) -> PfControllerFactory:
    try:
        options = ModeOptions(cliff_pps=float(arg)) if arg else ModeOptions()
    except ValueError:
        raise PolicyError(f"--pf-mode hybrid:{arg}: the cliff must be a packet rate > 0") from None
    return lambda pf, caps: HybridModeController(pf, caps, options)


VF_POLICIES: dict[str, Callable[[str], VfPolicyFactory]] = {
    "search": _search,
    "fixed": _fixed,
    "observe": lambda _arg: (lambda pci, caps: Observe()),
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


def vf_policy(spec: str) -> VfPolicyFactory:
    return _parse(spec, VF_POLICIES, "--policy")


def pf_controller(spec: str) -> PfControllerFactory:
    return _parse(spec, PF_CONTROLLERS, "--pf-mode")
