"""Which VFs run a poll-mode driver in their guest (DPDK): packets move, interrupts do not.

A poll-mode driver takes packets off the ring with its interrupts off, so the VF's ITR changes
nothing there and the agent leaves the VF alone. From the host the sign is the one posted
interrupts give (packets move while the VF's host interrupt count stands still), so a VF is
taken for poll-mode only while another VF of the same host shows its interrupts moving: with
posted interrupts every VF's count stands still, and nothing tells the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vftune.model import Snapshot

CONFIRM_S = 10.0  # host seconds the sign must hold: longer than a counter refresh or two
CAUSE = "poll-mode"  # the decision's cause (its metric label)
REASON = ("poll-mode driver in the guest: packets move without interrupts while other VFs' move, "
          "so its ITR changes nothing; left to it")


@dataclass
class PollModeWatch:
    """Feed it every snapshot; `confirmed` holds the VFs the sign has held for CONFIRM_S."""

    confirm_s: float = CONFIRM_S
    _since: dict[str, float] = field(default_factory=dict)
    confirmed: set[str] = field(default_factory=set)

    def update(self, snap: Snapshot) -> None:
        host_sees_interrupts = any(c.interrupts and not c.interrupts_frozen for c in snap.vfs.values())
        signs = {pci for pci, c in snap.vfs.items() if c.interrupts_frozen} if host_sees_interrupts else set()
        for pci in set(self._since) - signs:
            del self._since[pci]
        for pci in signs:
            self._since.setdefault(pci, snap.time)
        self.confirmed = {pci for pci, t in self._since.items() if snap.time - t >= self.confirm_s}
