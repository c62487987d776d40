"""Plug-in points for the control logic: per-VF ITR policies and per-PF mode controllers.

Policies are pure: they see derived samples (rates over one interval) and answer with a
decision or None. No clock, no I/O; the agent applies what they decide and records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from vftune.hostdriver.base import Capabilities, quantize_itr


@dataclass(frozen=True)
class VfSample:
    """One VF over one interval [t - dt, t]."""

    pci: str
    pf: str
    t: float
    dt: float
    rx_pps: float
    rx_bps: float  # bits/s delivered to the VF
    tx_pps: float
    tx_bps: float
    interrupts_per_s: float | None  # None when the host cannot see them (posted interrupts)
    interrupts: int | None  # interrupts in this interval
    itr: int  # interrupts/s set now; 0 = the VF's own adaptive ITR
    guest_cpu: float | None  # CPU seconds per second of the owning guest
    fresh: bool = True  # counters were refreshed inside this interval
    # The VF's port (its PF) over the same interval, as the agent sees it; None when unknown.
    port_rx_bps: float | None = None  # received bits/s counted on the port: its VFs' plus the PF's own
    port_rx_capacity_bps: float | None = None  # the same counters at line rate, for the port's mean frame size
    port_rx_share_bps: float | None = None  # this VF's max-min fair share of the port's rx (sampling.port_view)

    @property
    def throughput_bps(self) -> float:
        return self.rx_bps + self.tx_bps


@dataclass(frozen=True)
class PfSample:
    pf: str
    t: float
    dt: float
    rx_pps: float
    rx_bps: float
    mode: str  # mode in force now


@dataclass(frozen=True)
class ItrDecision:
    itr: int  # interrupts/s; 0 = hand back to the VF's adaptive ITR
    reason: str


@dataclass(frozen=True)
class ModeDecision:
    mode: str  # "napi" | "de" | "hybrid"
    napi_budget: int | None
    reason: str
    cliff_pps: float | None = None  # "hybrid": where the driver switches
    epsilon: float | None = None


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
