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


_COUNT = re.compile(r"[0-9]{1,20}")  # ASCII digits, at most a 64-bit counter's width (the reference)


def _is_count(text: str) -> bool:
    """_COUNT.fullmatch(text), without the regex machinery (a row has a count per CPU)."""
    return text.isascii() and text.isdigit() and len(text) <= 20


class InterruptsMemo:
    """What each row of the last read gave, by its text: a vector that did not fire since (most
    of a host's rows) is not parsed again. Rebuilt from each read's rows, so it holds one read."""

    def __init__(self) -> None:
        self.cpus = -1
        self.rows: dict[str, tuple[int, int, str | None] | None] = {}


def _row(line: str, cpus: int) -> tuple[int, int, str | None] | None:
    """(IRQ, its count over the CPUs, the vfio-msix device or None) of one row; None for a row
    that is not a numbered vector."""
    label, sep, rest = line.partition(":")
    label = label.strip()
    if not sep or not _is_count(label):
        return None  # NMI, LOC, ERR, MIS ...: not device vectors
    fields = rest.split(None, cpus)
    total = 0
    for f in fields[:cpus]:
        if not _is_count(f):
            break
        total += int(f)
    tail = fields[cpus] if len(fields) > cpus else ""
    m = _VFIO.search(tail) if "vfio-msix[" in tail else None
    return int(label), total, m.group(1).lower() if m else None


def parse_interrupts(text: str, memo: InterruptsMemo | None = None) -> InterruptCounts:
    """Never raises: a row that does not parse counts as far as it does (or not at all).
    memo: kept by the caller between reads of the same file (InterruptsMemo)."""
    lines = text.splitlines()
    if not lines:
        return InterruptCounts({}, {}, 0)
    cpus = len(lines[0].split())
    by_irq: dict[int, int] = {}
    vfio: dict[str, int] = {}
    last: dict[str, tuple[int, int, str | None] | None] = {}
    rows: dict[str, tuple[int, int, str | None] | None] = {}
    if memo is not None:
        if memo.cpus == cpus:
            last = memo.rows
        memo.cpus, memo.rows = cpus, rows
    for line in lines[1:]:
        row = last[line] if line in last else _row(line, cpus)
        if memo is not None:
            rows[line] = row
        if row is None:
            continue
        irq, total, pci = row
        by_irq[irq] = total
        if pci is not None:
            vfio[pci] = vfio.get(pci, 0) + total
    return InterruptCounts(by_irq, vfio, cpus)
