"""The one interface the agent uses for everything it needs from a host.

Backends (sim, linux) implement HostDriver. Units are fixed here so that no
caller converts twice: ITR is always interrupts per second, time is seconds
on the backend's own monotonic clock, counters are cumulative since boot.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable

from vftune.model import Applied, Capabilities, Inventory, Snapshot, VfActuator, VfDrops, VfInfo


class HostError(Exception):
    """An expected host condition (missing file, errno from a write); one line, no traceback."""


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
        """Set a VF's interrupt rate in interrupts/s; 0 hands it back to the VF's own adaptive ITR.

        A rate the VF takes later (the patched ixgbevf at its next fetch, the guest agent when
        ethtool has run) comes back with Applied.pending, and collect_applied() reports it once
        it is in force ("itr" or "itr_confirmed"): until then the agent keeps showing, and
        measuring, the rate the VF runs."""

    def set_vf_itr_bounds(self, vf_pci: str, min_itr: int, max_itr: int) -> Applied:
        """Bound the VF's own adaptive ITR to [min_itr, max_itr] interrupts/s (0 = open on that
        side); a fixed ITR is not affected. Setting "itr_bounds", values "MIN..MAX" per second."""
        return Applied(vf_pci, "itr_bounds", f"{min_itr}..{max_itr}", None, None, ok=False,
                       error=f"{vf_pci}: the {self.name} backend cannot bound a VF's adaptive ITR")

    def collect_applied(self) -> list[Applied]:
        """Outcomes of writes that finish after their call returned (Applied.pending), drained
        by the agent every tick. Default: every write finishes in its call."""
        return []

    def vf_actuator(self, vf_pci: str) -> VfActuator | None:
        """How this VF's ITR is set here ("patched", "guest-agent", "none") and why."""
        return None

    def vf_drops(self, vf_pci: str) -> VfDrops | None:
        """Whether this VF's guest socket drops reach Snapshot.guest_rx_drops, and why not
        (model.DropsSource). None: the backend does not say (the agent shows "off")."""
        return None

    @abc.abstractmethod
    def set_pf_rx_mode(self, pf: str, mode: str, napi_budget: int | None = None,
                       cliff_pps: float | None = None, epsilon: float | None = None) -> Applied:
        """Set a PF's rx mode. For "hybrid" the driver switches DE/NAPI itself (8 ms estimator)
        around `cliff_pps` with hysteresis `epsilon`; None keeps the driver's current values."""

    @abc.abstractmethod
    def restore(self) -> list[Applied]:
        """Put back every value this driver changed, newest first. Every backend keeps its
        originals in the one write journal (store/journal.py: recorded before the write, forgotten
        once put back and read back), in memory or in the history file."""

    def add_inventory_listener(self, listener: Callable[[], None]) -> None:  # noqa: B027 (optional hook)
        """Call listener() (from any thread) when PFs, VFs or owners change. Default: never."""

    def stop(self) -> None:  # noqa: B027 (optional hook)
        """Wake a sleep() in progress and make later ones return at once, where the backend can."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release handles; restore() is separate so the agent decides when."""


def drops_scope(vf: VfInfo, vfs: Iterable[VfInfo], held: int | None = None) -> VfDrops | None:
    """"no-guest" or "shared" when the VF's guest's socket drops cannot be the VF's whatever its
    agent says (agent.sampling attributes them only to a guest's one VF); None when they can.
    held: how many of `vfs` the VF's guest holds, when the caller counted them already."""
    if vf.guest is None:
        return VfDrops("no-guest", "no running guest holds this VF")
    name = vf.guest.name
    if held is None:
        held = sum(1 for other in vfs if other.guest is not None and other.guest.name == name)
    if held > 1:
        return VfDrops("shared", f"guest {name} holds {held} VFs: its socket drops are counted per guest "
                       "and cannot be split between them")
    return None
