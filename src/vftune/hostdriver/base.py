"""The one interface the agent uses for everything it needs from a host.

Backends (sim, linux) implement HostDriver. Units are fixed here so that no
caller converts twice: ITR is always interrupts per second, time is seconds
on the backend's own monotonic clock, counters are cumulative since boot.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Callable, Literal, Mapping

RxMode = Literal["napi", "de", "hybrid"]
RX_MODES: tuple[str, ...] = ("napi", "de", "hybrid")

# 82599: EITR interval field bits 11:3 in 2.048 us units (1..511 steps).
ITR_STEP_US = 2.048
ITR_MIN_RATE = 956  # IXGBE_MIN_INT_RATE, 511 steps
ITR_MAX_RATE = 488281  # IXGBE_MAX_INT_RATE, 1 step


class HostError(Exception):
    """An expected host condition (missing file, errno from a write); one line, no traceback."""


@dataclass(frozen=True)
class Guest:
    name: str
    uuid: str
    pid: int | None = None


@dataclass(frozen=True)
class VfInfo:
    pf: str  # PF network interface name
    index: int  # VF number on its PF (virtfnN)
    pci: str  # VF PCI address, 0000:03:10.0
    driver: str | None  # vfio-pci, ixgbevf or None when unbound
    guest: Guest | None = None


@dataclass(frozen=True)
class PfInfo:
    name: str
    pci: str
    device_id: int
    driver: str
    num_vfs: int
    total_vfs: int
    vfs: tuple[VfInfo, ...] = ()


@dataclass(frozen=True)
class Ignored:
    name: str
    reason: str


@dataclass(frozen=True)
class Inventory:
    pfs: tuple[PfInfo, ...]
    ignored: tuple[Ignored, ...] = ()

    def vfs(self) -> list[VfInfo]:
        return [vf for pf in self.pfs for vf in pf.vfs]

    def vf(self, pci: str) -> VfInfo | None:
        return next((vf for vf in self.vfs() if vf.pci == pci), None)


@dataclass(frozen=True)
class VfCounters:
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int
    # Cumulative interrupts of the VF's vectors as the host sees them; None when unknown.
    interrupts: int | None
    # When the packet/byte counters were last refreshed (unpatched ixgbe: every 2 s).
    counters_time: float
    # True when the counters did not change since the previous snapshot although
    # the refresh period says they should have been copied again.
    stale: bool = False
    # True when packets move but host interrupt counts do not (posted interrupts).
    interrupts_frozen: bool = False


@dataclass(frozen=True)
class PfCounters:
    rx_packets: int
    rx_bytes: int
    # Read from the patched driver when present: the mode in force and its estimate.
    current_mode: str | None = None
    rate_pps: int | None = None
    switches: int | None = None


@dataclass(frozen=True)
class Snapshot:
    time: float
    vfs: Mapping[str, VfCounters]  # by VF PCI address
    pfs: Mapping[str, PfCounters]  # by PF name
    guest_cpu: Mapping[str, float]  # cumulative CPU seconds by guest name
    host_irq_cpu: float  # cumulative irq + softirq seconds over all host CPUs
    host_cpus: int = 1
    errors: tuple[str, ...] = ()  # one line per source that could not be read


@dataclass(frozen=True)
class Capabilities:
    backend: str
    itr_min: int = ITR_MIN_RATE  # interrupts/s the tuner may ask for
    itr_max: int = ITR_MAX_RATE
    vf_itr: bool = False  # can the host push a VF's ITR
    rx_modes: tuple[str, ...] = ("napi",)  # modes the PF can switch to
    pf_coalesce: bool = False
    napi_budget: bool = False
    counter_refresh_s: float = 2.0  # how old a VF counter may be
    missing: tuple[str, ...] = ()  # why a capability is absent, one line each


@dataclass(frozen=True)
class Applied:
    """The outcome of one actuator call, read back from the host."""

    target: str  # VF PCI address or PF name
    setting: str  # "itr", "rx_mode", "napi_budget", "rx_usecs"
    requested: object
    old: object
    applied: object  # what a read-back shows now
    ok: bool = True
    error: str | None = None


class HostDriver(abc.ABC):
    """Everything the agent reads from or writes to a host."""

    name: str = "abstract"

    @abc.abstractmethod
    def inventory(self) -> Inventory: ...

    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abc.abstractmethod
    def snapshot(self) -> Snapshot:
        """All VFs' counters at once, with one timestamp."""

    @abc.abstractmethod
    def now(self) -> float:
        """The backend's monotonic clock, the one snapshots are stamped with."""

    @abc.abstractmethod
    def sleep(self, seconds: float) -> None:
        """Wait this long on the backend's clock (the sim advances its model)."""

    @abc.abstractmethod
    def set_vf_itr(self, vf_pci: str, itr: int) -> Applied:
        """Set a VF's interrupt rate in interrupts/s; 0 hands it back to the VF's own adaptive ITR."""

    @abc.abstractmethod
    def set_pf_rx_mode(self, pf: str, mode: str, napi_budget: int | None = None,
                       cliff_pps: float | None = None, epsilon: float | None = None) -> Applied:
        """Set a PF's rx mode. For "hybrid" the driver switches DE/NAPI itself (8 ms estimator)
        around `cliff_pps` with hysteresis `epsilon`; None keeps the driver's current values."""

    @abc.abstractmethod
    def set_pf_coalesce(self, pf: str, rx_usecs: int) -> Applied: ...

    @abc.abstractmethod
    def restore(self) -> list[Applied]:
        """Put back every value this driver changed, newest first."""

    def add_inventory_listener(self, listener: Callable[[], None]) -> None:
        """Call listener() (from any thread) when PFs, VFs or owners change. Default: never."""

    def close(self) -> None:
        """Release handles; restore() is separate so the agent decides when."""


@dataclass
class WriteJournal:
    """Old values of everything written, so restore() can undo them exactly once."""

    entries: dict[tuple[str, str], object] = field(default_factory=dict)

    def remember(self, target: str, setting: str, old: object) -> None:
        # Keep the first old value: that is what the host had before we touched it.
        self.entries.setdefault((target, setting), old)

    def drain(self) -> list[tuple[str, str, object]]:
        items = [(t, s, old) for (t, s), old in reversed(list(self.entries.items()))]
        self.entries.clear()
        return items


def _steps(itr: float) -> int:
    """EITR interval steps (2.048 us each, 1..511) whose rate is nearest to `itr`."""
    return max(1, min(511, round(1_000_000 / (itr * ITR_STEP_US))))


def itr_to_usecs(itr: int) -> int:
    """Interrupts/s to the drivers' rx-usecs (even, 2..1022) that deliver the nearest rate.

    ixgbe/ixgbevf store usecs << 2 and the 82599 keeps bits 11:3 of that, i.e. usecs / 2 steps
    of 2.048 us: 48 us is 24 steps, 49.15 us, 20345/s. 0 stays 0 (adaptive is the caller's).
    """
    return 0 if itr <= 0 else 2 * _steps(itr)


def usecs_to_itr(usecs: int) -> int:
    """The rate the 82599 delivers for an rx-usecs setting; 0 and 1 (off, adaptive) give 0."""
    if usecs <= 1:
        return 0
    return int(round(1_000_000 / (max(1, min(511, usecs // 2)) * ITR_STEP_US)))


def quantize_itr(itr: float) -> int:
    """The rate the 82599 really delivers for a request: whole 2.048 us interval steps."""
    return int(round(1_000_000 / (_steps(itr) * ITR_STEP_US)))
