"""Hybrid DE/NAPI switching per PF (K. Salah and A. Qahtan, "Implementation and Experimental
Performance Evaluation of a Hybrid Interrupt-Handling Scheme").

DE (interrupt disable-enable) gives the lowest latency and overhead at light and normal load;
NAPI with a small budget leaves CPU to applications past the saturation ("cliff") rate. Two
thresholds around the cliff keep a load that hovers there from flapping between the two.
Pure logic: no clock, no I/O.
"""

from __future__ import annotations

import math
from typing import Literal

Mode = Literal["de", "napi"]

EPSILON = 0.15  # the paper's hysteresis around the cliff
NAPI_BUDGET = 2  # the paper's NAPI budget in the hybrid (stock NAPI polls 64)


def cliff_rate(r: float, mu: float) -> float:
    """Packet rate (packets/s) where the host saturates: r/2 * (sqrt(1 + 4*mu/r) - 1).

    1/r is the cost of one interrupt and 1/mu the cost of one packet, both in seconds.
    """
    if not (math.isfinite(r) and r > 0):
        raise ValueError(f"r (1 / interrupt cost in s) must be > 0, got {r!r}")
    if not (math.isfinite(mu) and mu > 0):
        raise ValueError(f"mu (1 / per-packet cost in s) must be > 0, got {mu!r}")
    return r / 2.0 * (math.sqrt(1.0 + 4.0 * mu / r) - 1.0)


class HybridSwitch:
    """DE below the cliff, NAPI above it, with hysteresis cliff1 = (1-e)*cliff, cliff2 = (1+e)*cliff."""

    def __init__(self, cliff: float, epsilon: float = EPSILON) -> None:
        if not 0 <= epsilon < 1:
            raise ValueError(f"epsilon must be in [0, 1), got {epsilon!r}")
        self.epsilon = epsilon
        self.set_cliff(cliff)
        self.mode: Mode = "de"
        self.switches = 0

    def set_cliff(self, cliff: float) -> None:
        """Move both thresholds to a new cliff; the mode in force and the switch count stay."""
        if not (math.isfinite(cliff) and cliff > 0):
            raise ValueError(f"cliff must be a packet rate > 0, got {cliff!r}")
        self.cliff = float(cliff)
        self.cliff1 = (1.0 - self.epsilon) * self.cliff
        self.cliff2 = (1.0 + self.epsilon) * self.cliff

    def update(self, rate: float) -> Mode:
        """Feed an estimated packet rate; answer the mode to be in."""
        if not (math.isfinite(rate) and rate >= 0):
            raise ValueError(f"rate must be a packet rate >= 0, got {rate!r}")
        if self.mode == "de" and rate > self.cliff2:
            self.mode = "napi"
            self.switches += 1
        elif self.mode == "napi" and rate < self.cliff1:
            self.mode = "de"
            self.switches += 1
        return self.mode


class PacketRateEstimator:
    """Packet rate from a cumulative packet counter read once per fixed window.

    As in Salah et al.'s estimator: one counter read per window, no per-packet work, and
    exponential smoothing with a power-of-two weight, est += (sample - est) >> shift, so a
    driver could do it with shifts. shift=0 is no smoothing; shift=1 halves each error.
    """

    def __init__(self, window_s: float, shift: int = 1) -> None:
        if not (math.isfinite(window_s) and window_s > 0):
            raise ValueError(f"window_s must be > 0 seconds, got {window_s!r}")
        if not 0 <= shift <= 8:
            raise ValueError(f"shift must be 0..8, got {shift!r}")
        self.window_s = window_s
        self.shift = shift
        self._last: int | None = None
        self._estimate: int | None = None  # packets/s, integer as a driver would keep it

    @property
    def rate(self) -> float | None:
        return None if self._estimate is None else float(self._estimate)

    def update(self, packets_total: int) -> float | None:
        """Read the counter at the end of one window; returns the smoothed rate (None at first read)."""
        if packets_total < 0:
            raise ValueError(f"packet counter must be >= 0, got {packets_total!r}")
        last, self._last = self._last, int(packets_total)
        if last is None or packets_total < last:  # first read, or the counter was reset
            return self.rate
        sample = int((packets_total - last) / self.window_s)
        if self._estimate is None:
            self._estimate = sample
        else:
            self._estimate += (sample - self._estimate) >> self.shift
        return self.rate

