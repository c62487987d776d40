"""The restart clock: when a held setting is searched again although nothing changed.

A hold lasts restart_interrupts interrupts or restart_s seconds, whichever comes first,
each stretched by a per-VF, per-search factor 1 +- jitter: VFs that converged together would
otherwise restart together, and on a shared port one VF's probes move the others' throughput.
Why not the paper's 1000 interrupts: at 10^4..10^5 interrupts/s that is 10-100 ms, shorter than
one measurement window, so the search would never hold an answer. Pure logic.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from vftune.model import VfSample


@dataclass(frozen=True)
class RestartDue:
    count: int
    unit: str  # "interrupts" | "s"


class RestartClock:
    def __init__(self, pci: str, interrupts: int, seconds: float, jitter: float) -> None:
        self.pci = pci
        self.limit_interrupts = interrupts
        self.limit_s = seconds
        self.jitter = jitter
        self.interrupts = 0
        self.held_s = 0.0
        self._factor = 1.0

    def reset(self, searches: int) -> None:
        """A new hold begins (after search number `searches`)."""
        self.interrupts = 0
        self.held_s = 0.0
        self._factor = self.factor(searches)

    def factor(self, searches: int) -> float:
        """This hold's share of the thresholds: a cryptographic digest of the PCI address and the
        search count (CRC is linear: neighbouring addresses would get nearly the same jitter)."""
        if self.jitter <= 0:
            return 1.0
        digest = hashlib.blake2b(f"{self.pci}/{searches}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / float(1 << 64)
        return 1.0 + self.jitter * (2.0 * u - 1.0)

    def tick(self, s: VfSample) -> RestartDue | None:
        self.held_s += s.dt
        # Posted interrupts: packets move but the host's counts do not; only intervals count then.
        visible = s.interrupts is not None and not (s.interrupts == 0 and s.rx_pps + s.tx_pps > 0)
        if visible:
            self.interrupts += int(s.interrupts or 0)
            if self.interrupts >= self.limit_interrupts * self._factor:
                return RestartDue(self.interrupts, "interrupts")
        if self.held_s >= self.limit_s * self._factor:
            return RestartDue(round(self.held_s), "s")
        return None
