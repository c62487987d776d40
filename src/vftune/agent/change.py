"""Change detection: whether the load a VF holds a setting for is still the load it was chosen for.

While holding, the reference is the median of the first reference_windows windows (one burst
does not become the reference) and its workload class. A window of another class is a new load
once `windows_for(class)` windows in a row show it (a class that differs only in the decade of
its rate counts once the rate moved decade_jump times against the reference) (the caller asks for one window when it
remembers that class: a jump back costs nothing if it was a burst; two otherwise, because a
search costs tens of seconds). A change of rate alone inside the class must last rate_change_s
in one direction, since bursts of a few seconds are not a new load. Two idle windows in a row:
the VF went idle. Inside a search the reference is the search's first window, and only kind,
packet size and mix count: probes differ in rate by design. Pure logic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from vftune.agent.memory import WorkloadClass, classify
from vftune.agent.window import EPS, Window, median_window

ChangeKind = Literal["idle", "class", "rate"]


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    klass: WorkloadClass | None  # the new load's class (None when idle)
    baseline: Window  # a typical window of the new load
    rate_change: float  # relative change of the bit or packet rate against the reference
    lasted_s: float  # how long the new load has been seen


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
        self.reset()

    def reset(self, klass: WorkloadClass | None = None) -> None:
        """A new hold (or search) begins, for a load of class `klass` when known."""
        self.reference: Window | None = None
        self.klass = klass
        self._first: list[Window] = []
        self._other: list[Window] = []  # consecutive windows of one other class
        self._other_class: WorkloadClass | None = None
        self._idle = 0
        self._shifted: list[Window] = []  # windows since the rate moved beyond rate_change, one way

    def current_class(self, w: Window) -> WorkloadClass | None:
        return classify(w, self._other_class or self.klass)

    def observe(self, w: Window, windows_for: Callable[[WorkloadClass], int]) -> Change | None:
        """One held window; a Change once the load is no longer the reference's."""
        if w.bps < self.min_bps:
            self._idle += 1
            self._other, self._other_class = [], None
            if self._idle >= self.idle_windows:
                return Change("idle", None, w, rel_change(w.bps, self.reference.bps) if self.reference else 1.0, 0.0)
            return None
        self._idle = 0
        klass = classify(w, self._other_class or self.klass)
        if self.klass is None:
            self.klass = klass
        if klass is not None and self.klass is not None and same_shape(klass, self.klass) and klass != self.klass:
            # Only the rate's decade differs. The rate is partly the setting's doing (a request/
            # response VF's transactions follow its interrupt rate), so a decade counts only once
            # the rate moved decade_jump times against the reference, not on crossing an edge.
            ref_pps = self.reference.pps if self.reference is not None else (
                self._first[0].pps if self._first else w.pps)
            if max(w.pps, 1.0) / max(ref_pps, 1.0) < self.decade_jump and max(ref_pps, 1.0) / max(
                    w.pps, 1.0) < self.decade_jump:
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
        if self.reference is None:
            self._first.append(w)
            if len(self._first) >= self.reference_windows:
                self.reference = median_window(self._first)
            return None
        ref = self.reference
        rate = max(rel_change(w.pps, ref.pps), rel_change(w.bps, ref.bps))
        direction = (1 if w.bps > ref.bps else -1) if rate > self.rate_change else 0
        if direction == 0 or (self._shifted and (self._shifted[-1].bps > ref.bps) != (direction > 0)):
            self._shifted = []
        if direction:
            self._shifted.append(w)
        if self._shifted and w.end - self._shifted[0].start >= self.rate_change_s - EPS:
            return Change("rate", klass, median_window(self._shifted), rate, w.end - self._shifted[0].start)
        return None

    def _ref_bps(self, w: Window) -> float:
        if self.reference is not None:
            return self.reference.bps
        return self._first[0].bps if self._first else w.bps


def same_shape(a: WorkloadClass, b: WorkloadClass) -> bool:
    """Kind, size and mix alike: what a search compares (its probes move the rate)."""
    return (a.kind, a.size, a.mix) == (b.kind, b.size, b.mix)
