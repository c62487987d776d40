"""Is a VF's counter fresh, and does the host see its interrupts? Pure logic, one call per VF per tick.

Stock ixgbe copies VF counters from the hardware about every 2 s, so between copies they
stand still even under load. counters_time is when they last moved (or when standing
still has lasted a whole refresh period, which proves the VF idle). With posted
interrupts the host's vfio-msix counts stop while packets still move.
"""

from __future__ import annotations

from typing import NamedTuple


class _Last:
    __slots__ = ("packets", "interrupts", "counters_time", "interrupts_at_refresh", "frozen")

    def __init__(self, packets: int, interrupts: int | None, counters_time: float,
                 interrupts_at_refresh: int | None, frozen: bool = False) -> None:
        self.packets, self.interrupts, self.counters_time = packets, interrupts, counters_time
        self.interrupts_at_refresh, self.frozen = interrupts_at_refresh, frozen


class Health(NamedTuple):  # one a VF a tick: a tuple's construction, not a frozen dataclass's
    counters_time: float
    stale: bool
    interrupts_frozen: bool


class CounterHealth:
    def __init__(self, refresh_s: float) -> None:
        self.refresh_s = refresh_s
        self._last: dict[str, _Last] = {}

    def forget(self, keep: set[str]) -> None:
        for pci in set(self._last) - keep:
            del self._last[pci]

    def update(self, pci: str, now: float, packets: int, interrupts: int | None, always_fresh: bool) -> Health:
        """packets: rx + tx; always_fresh: the PF reads the hardware on each request (patched ixgbe)."""
        last = self._last.get(pci)
        if last is None:
            self._last[pci] = _Last(packets, interrupts, now, interrupts)
            return Health(now, False, False)
        last_irqs = last.interrupts
        if packets != last.packets or always_fresh:
            # A refresh: compare interrupts over the same span as the packets.
            frozen = (
                packets > last.packets
                and interrupts is not None
                and last.interrupts_at_refresh is not None
                and interrupts == last.interrupts_at_refresh
            )
            # The VF's record updated in place (one a VF a tick: no new object per refresh).
            last.packets, last.interrupts, last.counters_time = packets, interrupts, now
            last.interrupts_at_refresh, last.frozen = interrupts, frozen
            return Health(now, False, frozen)
        irq_moved = interrupts is not None and last_irqs is not None and interrupts != last_irqs
        waited = now - last.counters_time
        if waited >= self.refresh_s and not irq_moved:
            # A whole refresh period without a change and without interrupts: really idle.
            last.packets, last.interrupts, last.counters_time = packets, interrupts, now
            last.interrupts_at_refresh, last.frozen = interrupts, False
            return Health(now, False, False)
        last.interrupts = interrupts
        return Health(last.counters_time, True, last.frozen)
