"""Change detection: whether the load a VF holds a setting for is still the load it was chosen for.

While holding, the reference is the hold's level: the median of its windows, all of them but a
running shift, so a burst when the hold began is outvoted within seconds instead of being the
reference for the whole hold. A window of another class is a new load once `windows_for(class)`
windows in a row show it (the caller asks for one window when it remembers that class, two
otherwise, because a search costs tens of seconds). A class that differs only in the decade of
its rate is a move of rate, which noise makes too: it counts once the rate moved decade_jump
times against the level, beyond three of the VF's own measured window noise (a robust standard
deviation, kept across holds). A change of rate alone must last rate_change_s in one direction
(bursts of a few seconds are not a new load), and the level it moved from must have held at
least as long: a shorter reference is no better evidence than the shift (it was most likely a
burst), so the shift becomes the reference ("reference") and nothing restarts. Two idle windows
in a row: the VF went idle, or, when the host counted more interrupts than packets over them,
starved (receive livelock: window.starved). Pure logic.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from vftune.control.memory import WorkloadClass, classify
from vftune.control.window import EPS, MedianPool, Window, median_window, starved

ChangeKind = Literal["idle", "starved", "class", "rate", "reference"]
POOL_WINDOWS = 512  # the hold's level: the median of at most this many of its latest windows
NOISE_WINDOWS = 240  # the VF's noise: measured over this many of its latest held windows ...
NOISE_MIN_WINDOWS = 20  # ... once it has this many
NOISE_SDS = 3.0  # a decade-only jump must clear decade_jump by this many noise deviations
MAD_TO_SD = 1.4826  # median absolute deviation to standard deviation (normal noise)


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    klass: WorkloadClass | None  # the new load's class (None when idle)
    baseline: Window  # a typical window of the new load
    rate_change: float  # relative change of the bit or packet rate against the reference
    lasted_s: float  # how long the new load has been seen
    held_s: float = 0.0  # how long the level it moved from had held (rate and reference)


def rel_change(now: float, ref: float) -> float:
    return abs(now - ref) / max(abs(ref), 1e-9)


class ChangeDetector:
    def __init__(self, min_bps: float = 1e6, rate_change: float = 0.3, rate_change_s: float = 30.0,
                 idle_windows: int = 2, reference_windows: int = 3, decade_jump: float = 3.0) -> None:
        self.min_bps = min_bps
        self.decade_jump = decade_jump
        self.rate_change = rate_change
        self.rate_change_s = rate_change_s
        self.idle_windows = idle_windows
        self.reference_windows = reference_windows
        # The VF's own window-to-window noise (log of packet rate against the hold's level),
        # kept across holds: it is the tenant's, not the setting's.
        self._noise: deque[float] = deque(maxlen=NOISE_WINDOWS)
        self.reset()

    def reset(self, klass: WorkloadClass | None = None) -> None:
        """A new hold (or search) begins, for a load of class `klass` when known."""
        self.reference: Window | None = None
        self.klass = klass
        self._pool = MedianPool(POOL_WINDOWS)  # the hold's windows but the running shift
        self._since: float | None = None  # when the hold's first window began
        self._other: list[Window] = []  # consecutive windows of one other class
        self._other_class: WorkloadClass | None = None
        self._idle = 0
        self._shifted: list[Window] = []  # windows since the rate moved beyond rate_change, one way

    def current_class(self, w: Window) -> WorkloadClass | None:
        return classify(w, self._other_class or self.klass)

    def noise(self) -> float | None:
        """The VF's measured window noise: a robust standard deviation of log packet rate
        (None until enough held windows measured it)."""
        if len(self._noise) < NOISE_MIN_WINDOWS:
            return None
        mid = statistics.median(self._noise)
        return MAD_TO_SD * statistics.median(abs(x - mid) for x in self._noise)

    def observe(self, w: Window, windows_for: Callable[[WorkloadClass], int]) -> Change | None:
        """One held window; a Change once the load is no longer the reference's."""
        if w.bps < self.min_bps:
            self._idle += 1
            self._other, self._other_class = [], None
            if self._idle >= self.idle_windows:
                # Interrupted without traffic is not idle: the setting starves the guest.
                return Change("starved" if starved(w) else "idle", None, w,
                              rel_change(w.bps, self.reference.bps) if self.reference else 1.0, 0.0)
            return None
        self._idle = 0
        klass = classify(w, self._other_class or self.klass)
        if self.klass is None:
            self.klass = klass
        if klass is not None and self.klass is not None and same_shape(klass, self.klass) and klass != self.klass:
            # Only the rate's decade differs. The rate is partly the setting's doing (a request/
            # response VF's transactions follow its interrupt rate) and noise moves it too, so
            # a decade counts only once the rate moved decade_jump times against the hold's
            # level, beyond three of the VF's measured noise (until that is measured, a jump
            # cannot be told from a burst); a smaller move is left to the lasting-rate rule.
            ref_pps = self._level_pps(w)
            jump = abs(math.log(max(w.pps, 1.0) / max(ref_pps, 1.0)))
            noise = self.noise()
            if noise is None or jump < math.log(self.decade_jump) + NOISE_SDS * noise:
                klass = self.klass
        if klass is not None and klass != self.klass:
            if klass != self._other_class:
                self._other, self._other_class = [], klass
            self._other.append(w)
            if len(self._other) >= windows_for(klass):
                return Change("class", klass, median_window(self._other),
                              rel_change(w.bps, self._ref_bps(w)), w.end - self._other[0].start)
            return None
        self._other, self._other_class = [], None
        if self._since is None:
            self._since = w.start
        if self.reference is None:
            self._pool.append(w)
            if len(self._pool) >= self.reference_windows:
                self.reference = self._pool.median()
            return None
        ref = self.reference
        level_pps = self._level_pps(w)
        if level_pps > 0 and w.pps > 0:
            self._noise.append(math.log(w.pps / level_pps))
        rate = max(rel_change(w.pps, ref.pps), rel_change(w.bps, ref.bps))
        direction = (1 if w.bps > ref.bps else -1) if rate > self.rate_change else 0
        if direction == 0 or (self._shifted and (self._shifted[-1].bps > ref.bps) != (direction > 0)):
            self._settle_shift()
        if direction:
            self._shifted.append(w)
        else:
            self._pool.append(w)
            self.reference = self._pool.median()
        if self._shifted and w.end - self._shifted[0].start >= self.rate_change_s - EPS:
            lasted = w.end - self._shifted[0].start
            held = self._shifted[0].start - self._since
            baseline = median_window(self._shifted)
            if held < self.rate_change_s - EPS:
                # The reference held for less time than a change must last: it is no better
                # evidence of the load than the shift is, and more likely a burst. The shift's
                # level becomes the reference; nothing is restarted.
                self._pool.clear()
                self._pool.extend(self._shifted)
                self._shifted = []
                self._since = self._pool.first().start
                self.reference = baseline
                now = classify(baseline)
                if now is not None and self.klass is not None and same_shape(now, self.klass):
                    self.klass = now  # the level's decade, not the burst's
                return Change("reference", self.klass, baseline, rate, lasted, held)
            return Change("rate", klass, baseline, rate, lasted, held)
        return None

    def _settle_shift(self) -> None:
        """A shift that ended before it lasted was the load's own variation: back into the level."""
        if self._shifted:
            self._pool.extend(self._shifted)
            self._shifted = []
            self.reference = self._pool.median()

    def _level_pps(self, w: Window) -> float:
        """The hold's packet rate: the median of all its windows, a running shift's too (a
        reference taken in a burst that the load left is not the hold's level)."""
        if not self._pool and not self._shifted:
            return w.pps
        if not self._pool:
            return median_window(self._shifted).pps
        return self._pool.median(self._shifted).pps

    def _ref_bps(self, w: Window) -> float:
        if self.reference is not None:
            return self.reference.bps
        return self._pool.first().bps if self._pool else w.bps


def same_shape(a: WorkloadClass, b: WorkloadClass) -> bool:
    """Kind, size and mix alike: what a search compares (its probes move the rate)."""
    return a.shape == b.shape
