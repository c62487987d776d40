"""What the set rates bought: each VF's merit and CPU per Gb at its set rate against its own
adaptive ITR, from the windows its tuner measured (SearchTuner.measured_window).

Per VF and load shape (kind, size, mix: not the rate's decade, which the rate set moves), the
windows measured under the adaptive ITR and those under each set rate are kept as running
means (SMOOTHING), so the comparison moves with the load, not with one noisy window. The merit is
the throughput that reached applications, or for a request/response load its packet rate (a
transaction rate: its inverse is the response time at a fixed number of requests in flight).
Pure logic: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from vftune.agent.memory import classify
from vftune.agent.tuner import TunerOptions
from vftune.agent.window import Window
from vftune.model import HostVsAdaptive, MeritKind, VfView, VsAdaptive

SMOOTHING = 0.25  # a new window's weight in a running figure
MIN_WINDOWS = 2  # windows each side needs before they are compared
MAX_AGE_S = 3600.0  # an adaptive reference older than this is no reference for today's load
SAME_MERIT = 0.01  # merit changes within this fraction read "at the same throughput"
HOST_IRQ_COST_S = TunerOptions().host_irq_cost_s  # the tuner's price of a host-forwarded interrupt

Shape = tuple[str, str, str]


@runtime_checkable
class MeasuresWindows(Protocol):
    """A VF policy that measures windows (SearchTuner): the others give nothing to compare."""

    def measured_window(self) -> Window | None: ...


@dataclass
class _Figure:
    merit: float
    cpu_per_bit: float
    bps: float
    t: float  # end of the latest window, host time
    windows: int = 1

    def add(self, merit: float, cpu_per_bit: float, bps: float, t: float) -> None:
        a = SMOOTHING
        self.merit += a * (merit - self.merit)
        self.cpu_per_bit += a * (cpu_per_bit - self.cpu_per_bit)
        self.bps += a * (bps - self.bps)
        self.t = t
        self.windows += 1


class ValueMeter:
    """One VF's running figures under its adaptive ITR and under each set rate, per load shape."""

    def __init__(self) -> None:
        self._adaptive: dict[Shape, _Figure] = {}
        self._set: dict[tuple[Shape, int], _Figure] = {}
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
        figure = self._adaptive.get(klass.shape) if w.itr == 0 else self._set.get((klass.shape, w.itr))
        if figure is not None:
            figure.add(merit, cpu_per_bit, w.bps, w.end)
        elif w.itr == 0:
            self._adaptive[klass.shape] = _Figure(merit, cpu_per_bit, w.bps, w.end)
        else:
            self._set[(klass.shape, w.itr)] = _Figure(merit, cpu_per_bit, w.bps, w.end)

    def compare(self, itr: int, now: float) -> VsAdaptive | None:
        """The rate `itr` in force against the adaptive ITR, for the load's current shape."""
        if itr == 0 or self._shape is None:
            return None
        base = self._adaptive.get(self._shape)
        held = self._set.get((self._shape, itr))
        if base is None or held is None or min(base.windows, held.windows) < MIN_WINDOWS:
            return None
        if base.merit <= 0 or base.cpu_per_bit <= 0 or now - base.t > MAX_AGE_S:
            return None
        merit: MeritKind = "response time" if self._shape[0] == "rr" else "throughput"
        return VsAdaptive(
            merit=merit, merit_change=held.merit / base.merit - 1.0,
            cpu_per_gbit_change=held.cpu_per_bit / base.cpu_per_bit - 1.0,
            cpu_change_cores=(held.cpu_per_bit - base.cpu_per_bit) * held.bps,
            age_s=max(0.0, now - min(base.t, held.t)),
        )


def _percent(change: float) -> str:
    """+12%, or +0.4% below ten (a whole percent would read +0%)."""
    return f"{change * 100:+.0f}%" if abs(change) >= 0.1 else f"{change * 100:+.1f}%"


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
    if all(abs(v.merit_change) < SAME_MERIT for _, v in compared):
        per_gbit = sum(w * v.cpu_per_gbit_change for w, (_, v) in zip(weights, compared)) / sum(weights)
        text = f"{_percent(per_gbit)} CPU per Gb at the same throughput on {len(compared)} VF" + (
            "s" if len(compared) != 1 else "")
    else:
        text = ", ".join(parts) + (f", for {cpu:.2f} CPU" if cpu >= 0 else f", and {-cpu:.2f} CPU saved")
    return HostVsAdaptive(vfs=len(compared), merit_change=merit, cpu_change_cores=cpu, text=text)
