"""ixgbevf's own adaptive ITR (rx-usecs 1, the default a guest gets), as a fluid state machine.

The driver (ixgbevf_update_itr / ixgbevf_set_itr) runs on every interrupt:
- bytes per microsecond = bytes since the last interrupt / the current interval in us;
- class moves one step per interrupt: lowest (100K/s) -> low (20K/s) above 10 B/us,
  low -> bulk (12K/s) above 20 B/us, bulk -> low at or below 20, low -> lowest at or below 10;
- the class of a vector is the higher of its rx and tx rings';
- the register follows the class through new = 10*new*old / (9*new + old) on intervals, which
  on rates is rate = 0.9*old_rate + 0.1*class_rate per interrupt.
A fluid step covers many interrupts, so the class walk and the smoothing are applied as many
times as interrupts happened in the step (in closed form for the smoothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from vftune.itr import quantize_itr

LOWEST, LOW, BULK = 0, 1, 2
CLASS_RATES = (100_000, 20_000, 12_000)
LOW_THRESHOLD_B_PER_US = 10
BULK_THRESHOLD_B_PER_US = 20


def next_class(current: int, bytes_per_us: float) -> int:
    """One interrupt's class transition, exactly as the driver's switch statement."""
    if current == LOWEST:
        return LOW if bytes_per_us > LOW_THRESHOLD_B_PER_US else LOWEST
    if current == LOW:
        if bytes_per_us > BULK_THRESHOLD_B_PER_US:
            return BULK
        if bytes_per_us <= LOW_THRESHOLD_B_PER_US:
            return LOWEST
        return LOW
    return LOW if bytes_per_us <= BULK_THRESHOLD_B_PER_US else BULK


@dataclass
class AdaptiveItr:
    """State of one VF's adaptive ITR; starts where the driver starts (20K, low latency)."""

    rx_class: int = LOW
    tx_class: int = LOW
    rate: float = float(CLASS_RATES[LOW])

    @property
    def itr(self) -> int:
        """What the VTEITR register delivers now, in interrupts/s."""
        return quantize_itr(self.rate)

    def update(self, rx_bytes: float, tx_bytes: float, interrupts: float) -> None:
        """Advance over a step in which `interrupts` fired and these bytes moved."""
        if interrupts < 1.0:
            return  # the driver only updates from an interrupt; no packets, no update
        interval_us = 1e6 / self.rate
        per_int = 1.0 / interrupts
        rx_rate = rx_bytes * per_int / interval_us
        tx_rate = tx_bytes * per_int / interval_us
        # Two interrupts are enough to walk from any class to any other.
        for _ in range(min(2, int(interrupts))):
            self.rx_class = next_class(self.rx_class, rx_rate)
            self.tx_class = next_class(self.tx_class, tx_rate)
        target = CLASS_RATES[max(self.rx_class, self.tx_class)]
        keep = 0.9 ** min(interrupts, 10_000.0)
        self.rate = target + (self.rate - target) * keep
        # The driver stops moving once integer arithmetic rounds to the same register value.
        if abs(self.rate - target) < 0.005 * target:
            self.rate = float(target)
