"""The guest's other VFs: whether their load moved while this VF holds a setting.

A VF's best rate depends on the CPU its guest has left for it, and a guest that owns several
VFs spends its vCPUs on all of them. When its other VFs go idle or get busy, the rate this VF
searched for may now hold it down (or cost more than it gains), though nothing in its own load
changed. Its windows show the guest's bits over all its VFs (Window.guest_bits, None when the
VF is the guest's only one); the others' rate is that less the VF's own. The level it is
compared with is the median of the hold's first windows; a move of at least `factor` times,
either way, in every window for `lasting_s`, is a move of the guest's load (shorter ones are
bursts, as a change of the VF's own rate must last too). Rates below
`floor_bps` count as the floor, so an idle neighbour's housekeeping does not read as a change.
Pure logic.
"""

from __future__ import annotations

import math
import statistics

from vftune.agent.window import Window


class SiblingWatch:
    def __init__(self, factor: float = 2.0, lasting_s: float = 10.0, floor_bps: float = 1e7,
                 reference_windows: int = 3) -> None:
        if not factor > 1.0 or not lasting_s > 0 or not floor_bps > 0 or reference_windows < 1:
            raise ValueError(f"SiblingWatch: factor {factor!r} must be > 1, lasting_s {lasting_s!r} and "
                             f"floor_bps {floor_bps!r} > 0, reference_windows {reference_windows!r} >= 1")
        self.factor = factor
        self.lasting_s = lasting_s
        self.floor_bps = floor_bps
        self.reference_windows = reference_windows
        self.reset()

    def reset(self) -> None:
        """A new hold begins: its first windows are the level."""
        self.level_bps: float | None = None
        self._first: list[float] = []
        self._moved_s = 0.0

    @staticmethod
    def others_bps(w: Window) -> float | None:
        """The guest's other VFs' bits per second over the window (None: the VF is its only one)."""
        if w.guest_bits is None or w.duration <= 0:
            return None
        return max(0.0, w.guest_bits - w.bits) / w.duration

    def observe(self, w: Window) -> bool:
        """One held window; True once the others' load has been away from its level for lasting_s."""
        others = self.others_bps(w)
        if others is None:
            return False
        if self.level_bps is None:
            self._first.append(others)
            if len(self._first) >= self.reference_windows:
                self.level_bps = statistics.median(self._first)
            return False
        moved = abs(math.log(max(others, self.floor_bps) / max(self.level_bps, self.floor_bps)))
        self._moved_s = self._moved_s + w.duration if moved >= math.log(self.factor) else 0.0
        return self._moved_s >= self.lasting_s - 1e-6
