"""Port judgement: how a VF's window counts when its port is at line rate.

VFs on one PF share its 10 Gb/s. When the port's received load is at its line rate, a VF's gain
beyond its fair share (VfSample.port_rx_share_bps) is taken from its neighbours: the port's total
does not move and the interrupts are bought for nothing. So on a saturated port a window is
credited with the VF's receive rate only up to its fair share, a VF that already takes its share
must raise the port's total by port_gain to justify a costlier rate, and its searches stay
around the rate in force (looking only for a cheaper one).

A small VF (a request/response tenant, or any VF well below its share) is judged on its own
throughput: whatever it gains is not taken from anyone's share, so it needs only the noise
margin, and its searches are not confined. The port counts as saturated while a window finds it
so, and after that while it was so for at least half of the last memory_s (its windows'
time): room that neighbours' probes leave for a few seconds is not the VF's to keep, but
neither does a burst that filled the port for a few seconds hold the VF to its share for a
minute after it ended (a window-limited flow's search would read every rate alike). A port
below its line rate, or unknown, changes nothing.
Pure logic.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from vftune.control.window import EPS, Window


@dataclass(frozen=True)
class PortVerdict:
    saturated: bool
    takes_share: bool  # the VF lacks less of its share than port_gain of the port's total
    credited_bps: float
    cost_margin: float  # what a rate costlier than the incumbent must gain


class PortJudge:
    def __init__(self, saturation: float = 0.98, memory_s: float = 60.0, port_gain: float = 0.01,
                 margin: float = 0.02) -> None:
        self.saturation = saturation
        self.memory_s = memory_s
        self.port_gain = port_gain
        self.margin = margin
        self.last: Window | None = None  # the last window that showed the port
        # (end, seconds, saturated) of the windows that showed the port over the last memory_s.
        self._recent: deque[tuple[float, float, bool]] = deque()

    def observe(self, w: Window) -> None:
        """Note the port's load over a window (every window, searching or not)."""
        if w.port_load is None:
            return
        self.last = w
        self._recent.append((w.end, w.duration, w.port_load >= self.saturation))
        while self._recent[0][0] < w.end - self.memory_s - EPS:
            self._recent.popleft()

    def saturated(self, w: Window) -> bool:
        if w.port_load is None:
            return False
        if w.port_load >= self.saturation:
            return True
        seen = [(span, full) for end, span, full in self._recent if w.end - self.memory_s - EPS <= end <= w.end + EPS]
        total = sum(span for span, _ in seen)
        return total > 0 and 2 * sum(span for span, full in seen if full) >= total

    def takes_share(self, w: Window) -> bool:
        if w.share_bits is None or w.port_bits is None:
            return False
        return w.share_bits - w.rx_bits < self.port_gain * w.port_bits

    def judge(self, w: Window) -> PortVerdict:
        """The window's credit: what reached the VF's applications (socket drops, when the guest
        reports them, are not throughput), on a saturated port at most the VF's share."""
        saturated = self.saturated(w)
        if not saturated or w.share_bits is None:
            return PortVerdict(saturated, False, w.app_bps, self.margin)
        takes = self.takes_share(w)
        credited = max(0.0, min(w.rx_bits, w.share_bits) + w.tx_bits - (w.dropped_bits or 0.0)) / w.duration
        if not takes:
            # Below its share: its own gains are its own. The cost margin stays the noise margin.
            return PortVerdict(True, False, credited, self.margin)
        cost = self.margin if w.port_bits is None or w.bits <= 0 else max(
            self.margin, self.port_gain * w.port_bits / w.bits)
        return PortVerdict(True, True, credited, cost)

    def state(self, capped_windows: int) -> dict[str, object] | None:
        w = self.last
        if w is None or w.port_load is None:
            return None
        return {
            "rx_bps": round(w.port_bits / w.duration) if w.port_bits is not None else None,
            "capacity_bps": round(w.port_capacity_bits / w.duration) if w.port_capacity_bits is not None else None,
            "load": round(w.port_load, 4),
            "saturated": self.saturated(w),
            "share_bps": round(w.share_bits / w.duration) if w.share_bits is not None else None,
            "capped_windows": capped_windows,
        }

