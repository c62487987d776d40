"""What the set rates bought: each VF's merit and CPU per Gb at its set rate against its own
adaptive ITR, from the windows its tuner measured (SearchTuner.measured_window).

Per VF and load shape (kind, size, mix: not the rate's decade, which the rate set moves), the
windows measured under the adaptive ITR are kept as a running mean (SMOOTHING) and those under
each set rate as they came; a rate is judged on its windows from around the adaptive ITR's
(PAIR_S), so neither one noisy window nor a load that drifted since moves the figure. The merit is
the throughput that reached applications, or for a request/response load its packet rate (a
transaction rate: its inverse is the response time at a fixed number of requests in flight).
Pure logic: no clock, no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from vftune.control.memory import classify
from vftune.control.tuner import TunerOptions
from vftune.control.window import Window
from vftune.model import HostVsAdaptive, MeritKind, VfView, VsAdaptive

SMOOTHING = 0.25  # a new window's weight in the running adaptive figure
# Windows at a set rate needed before it is compared (the adaptive ITR's side needs one: the
# tuner measures it over a window of several, adaptive_windows).
MIN_WINDOWS = 2
# A set rate's windows are compared with the adaptive ITR's only when measured within this long
# of them (before or after): the load then was the same load, not one that drifted since. The
# tuner measures the adaptive ITR when a cold search starts, so a comparison lasts until the
# next one and its age says how old it is.
PAIR_S = 120.0
KEPT_WINDOWS = 48  # per set rate and shape
SAME_MERIT = 0.01  # merit changes within this fraction read "at the same throughput"
HOST_IRQ_COST_S = TunerOptions().host_irq_cost_s  # the tuner's price of a host-forwarded interrupt

Shape = tuple[str, str, str]


@runtime_checkable
class MeasuresWindows(Protocol):
    """A VF policy that measures windows (SearchTuner): the others give nothing to compare."""

    def measured_window(self) -> Window | None: ...


@dataclass
class _Figure:
    """The adaptive ITR's running figures for one load shape."""

    merit: float
    cpu_per_bit: float
    t: float  # end of the latest window, host time
    windows: int = 1

    def add(self, merit: float, cpu_per_bit: float, t: float) -> None:
        self.merit += SMOOTHING * (merit - self.merit)
        self.cpu_per_bit += SMOOTHING * (cpu_per_bit - self.cpu_per_bit)
        self.t = t
        self.windows += 1


@dataclass(frozen=True)
class _Measured:
    """One window at a set rate."""

    t: float
    merit: float
    cpu_per_bit: float
    bps: float


class ValueMeter:
    """One VF's figures under its adaptive ITR and under each set rate, per load shape."""

    def __init__(self) -> None:
        self._adaptive: dict[Shape, _Figure] = {}
        # Per shape and set rate: its windows from around the adaptive reference, and its latest bit rate.
        self._set: dict[tuple[Shape, int], deque[_Measured]] = {}
        self._latest_bps: dict[tuple[Shape, int], float] = {}
        self._recent: dict[tuple[Shape, int], deque[_Measured]] = {}  # the latest, paired or not
        self._shape: Shape | None = None  # the load's shape at the latest window
        self._last_end: float | None = None

    def add(self, w: Window | None) -> None:
        """A window the tuner measured (the same one again is ignored)."""
        if w is None or w.end == self._last_end or w.duration <= 0:
            return
        self._last_end = w.end
        klass = classify(w)
        cpu_per_bit = w.cpu_per_bit(HOST_IRQ_COST_S)
        if klass is None or cpu_per_bit is None or w.bits <= 0:
            return
        self._shape = klass.shape
        merit = w.pps if klass.kind == "rr" else w.app_bps
        if w.itr == 0:
            figure = self._adaptive.get(klass.shape)
            if figure is None or w.end - figure.t > PAIR_S:  # a measurement of today's load, not a mean with old ones
                self._adaptive[klass.shape] = _Figure(merit, cpu_per_bit, w.end)
            else:
                figure.add(merit, cpu_per_bit, w.end)
            # A new adaptive reference: the set-rate windows that pair with it are those measured
            # within PAIR_S of it, the ones kept for the last reference or the latest ones.
            reference = self._adaptive[klass.shape].t
            for key in [k for k in self._set if k[0] == klass.shape]:
                seen = {m.t: m for m in (*self._set[key], *self._recent.get(key, ()))}
                near = [m for t, m in sorted(seen.items()) if abs(t - reference) <= PAIR_S]
                self._set[key] = deque(near[-KEPT_WINDOWS:], maxlen=KEPT_WINDOWS)
            return
        key = (klass.shape, w.itr)
        measured = _Measured(w.end, merit, cpu_per_bit, w.bps)
        self._latest_bps[key] = w.bps
        self._recent.setdefault(key, deque(maxlen=KEPT_WINDOWS)).append(measured)
        base = self._adaptive.get(klass.shape)
        paired = self._set.setdefault(key, deque(maxlen=KEPT_WINDOWS))
        if base is None or w.end - base.t <= PAIR_S:  # later ones pair only with a later reference
            paired.append(measured)

    def compare(self, itr: int, now: float) -> VsAdaptive | None:
        """The rate `itr` in force against the adaptive ITR, for the load's current shape, on
        the windows of each measured within PAIR_S of each other."""
        if itr == 0 or self._shape is None:
            return None
        base = self._adaptive.get(self._shape)
        kept = self._set.get((self._shape, itr))
        if base is None or not kept or base.merit <= 0 or base.cpu_per_bit <= 0:
            return None
        paired = [m for m in kept if abs(m.t - base.t) <= PAIR_S]
        if len(paired) < MIN_WINDOWS:
            return None
        merit_held = sum(m.merit for m in paired) / len(paired)
        cpb_held = sum(m.cpu_per_bit for m in paired) / len(paired)
        kind: MeritKind = "response time" if self._shape[0] == "rr" else "throughput"
        return VsAdaptive(
            merit=kind, merit_change=merit_held / base.merit - 1.0,
            cpu_per_gbit_change=cpb_held / base.cpu_per_bit - 1.0,
            # At the VF's throughput now (its latest window at this rate).
            cpu_change_cores=(cpb_held - base.cpu_per_bit) * self._latest_bps.get((self._shape, itr), kept[-1].bps),
            age_s=max(0.0, now - min(base.t, paired[0].t)),
        )


def _percent(change: float) -> str:
    """+12%, or +0.4% below ten (a whole percent would read +0%)."""
    return f"{change * 100:+.0f}%" if abs(change) >= 0.1 else f"{change * 100:+.1f}%"


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.0f} h"


def summarize(vfs: Iterable[VfView]) -> HostVsAdaptive | None:
    """The host line: the VFs' merit changes by kind (throughput-weighted), and the CPU they
    spend or save together."""
    compared = [(vf, vf.vs_adaptive) for vf in vfs if vf.vs_adaptive is not None]
    if not compared:
        return None
    cpu = sum(v.cpu_change_cores for _, v in compared)
    weights = [max((vf.rx_bps or 0.0) + (vf.tx_bps or 0.0), 1.0) for vf, _ in compared]
    merit = sum(w * v.merit_change for w, (_, v) in zip(weights, compared)) / sum(weights)
    parts = []
    for kind in ("throughput", "response time"):
        group = [(w, v) for w, (_, v) in zip(weights, compared) if v.merit == kind]
        if not group:
            continue
        change = sum(w * v.merit_change for w, v in group) / sum(w for w, _ in group)
        shown = change if kind == "throughput" else (1.0 / (1.0 + change) - 1.0 if change > -1.0 else 0.0)
        parts.append(f"{_percent(shown)} {kind} on {len(group)} VF{'s' if len(group) != 1 else ''}")
    ages = sorted(v.age_s for _, v in compared)
    measured = f" (measured {_age(ages[0])}" + (f" to {_age(ages[-1])}" if _age(ages[-1]) != _age(ages[0]) else "") + " ago)"
    if all(abs(v.merit_change) < SAME_MERIT for _, v in compared):
        per_gbit = sum(w * v.cpu_per_gbit_change for w, (_, v) in zip(weights, compared)) / sum(weights)
        text = f"{_percent(per_gbit)} CPU per Gb at the same throughput on {len(compared)} VF" + (
            "s" if len(compared) != 1 else "")
    else:
        text = ", ".join(parts) + (f", for {cpu:.2f} CPU" if cpu >= 0 else f", and {-cpu:.2f} CPU saved")
    text += measured
    return HostVsAdaptive(vfs=len(compared), merit_change=merit, cpu_change_cores=cpu, text=text)
