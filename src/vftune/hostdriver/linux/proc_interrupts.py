"""/proc/interrupts, read once per tick: per-IRQ totals and per-device vfio-msix sums.

A passed-through VF's vectors are named `vfio-msix[N](<bdf>)`; a VF driven by ixgbevf on
the host has ordinary names, so its rows are found by IRQ number (from msi_irqs/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_VFIO = re.compile(r"vfio-msix\[\d+\]\(([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\)")


@dataclass(frozen=True)
class InterruptCounts:
    by_irq: dict[int, int]  # numbered IRQs, summed over CPUs
    vfio_by_pci: dict[str, int]  # vfio-msix vectors summed per PCI device
    cpus: int

    def for_vf(self, pci: str, msi_irqs: Iterable[int]) -> int | None:
        """The VF's interrupts: its vfio-msix rows, else its MSI-X IRQ rows; None when none is listed."""
        count = self.vfio_by_pci.get(pci)
        if count is not None:
            return count
        found = [self.by_irq[i] for i in msi_irqs if i in self.by_irq]
        return sum(found) if found else None


_COUNT = re.compile(r"[0-9]{1,20}")  # ASCII digits, at most a 64-bit counter's width


def parse_interrupts(text: str) -> InterruptCounts:
    """Never raises: a row that does not parse counts as far as it does (or not at all)."""
    lines = text.splitlines()
    if not lines:
        return InterruptCounts({}, {}, 0)
    cpus = len(lines[0].split())
    by_irq: dict[int, int] = {}
    vfio: dict[str, int] = {}
    for line in lines[1:]:
        label, sep, rest = line.partition(":")
        label = label.strip()
        if not sep or not _COUNT.fullmatch(label):
            continue  # NMI, LOC, ERR, MIS ...: not device vectors
        fields = rest.split(None, cpus)
        total = 0
        for f in fields[:cpus]:
            if not _COUNT.fullmatch(f):
                break
            total += int(f)
        irq = int(label)
        by_irq[irq] = total
        tail = fields[cpus] if len(fields) > cpus else ""
        m = _VFIO.search(tail)
        if m:
            pci = m.group(1).lower()
            vfio[pci] = vfio.get(pci, 0) + total
    return InterruptCounts(by_irq, vfio, cpus)
