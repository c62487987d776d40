"""SearchTuner: the per-VF policy the agent runs by default (issue 3, sections 1 and 2).

Per VF, over the agent's VfSamples:

    idle --(traffic)--> probing: set probe ITR -> settle -> measure one window -> tell -> next
                        probing --(search converged)--> holding
    holding --(N interrupts | M intervals)--> warm restart (bracket around the current best)
    holding --(offered load changed beyond the threshold)--> cold restart (full bracket)

Measurement windows: per-VF byte counters on unpatched ixgbe refresh about every 2 s, so a 1-s
sample may show no delta and the next one double. A window therefore starts and ends on samples
whose counters were refreshed (VfSample.fresh), lasts at least max(window_s,
Capabilities.counter_refresh_s), and sums bytes over its samples instead of averaging rates.

Restart defaults, and why not the paper's 1000 interrupts: at 10^4..10^5 interrupts/s, 1000
interrupts is 10-100 ms, shorter than one measurement window, so the search would never hold
an answer and every probe at a poor ITR would cost throughput. A full search here costs about
12 windows (~40 s at 1-s ticks); holding for 600 intervals (10 min at 1-s ticks) or 30 million
interrupts (5 min at 100K/s) keeps probing under ~7% of the time, and a real change of load is
caught much sooner by change detection (two windows beyond 30%). Periodic restarts are
warm (bracket of x/4..4x around the held rate) so they cost fewer and milder probes.

Pure logic: the agent supplies samples and applies decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from vftune.agent.itr_search import ItrSearch, bracket_from_capabilities
from vftune.agent.policy import ItrDecision, VfSample
from vftune.hostdriver.base import Capabilities, quantize_itr

_EPS = 1e-6


@dataclass(frozen=True)
class Window:
    """One measurement window between two counter refreshes."""

    start: float
    end: float
    bits: float
    packets: float
    interrupts: int | None
    itr: int

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def bps(self) -> float:
        return self.bits / self.duration

    @property
    def pps(self) -> float:
        return self.packets / self.duration

    @property
    def packet_bytes(self) -> float:
        return self.bits / 8.0 / self.packets if self.packets > 0 else 0.0


class WindowMeter:
    """Cuts a VfSample stream into windows bounded by fresh counters, after a settle time."""

    def __init__(self, window_s: float) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        self.window_s = window_s
        self._change_t = -math.inf
        self._settle_s = 0.0
        self._origin: float | None = None
        self._reset_sums()

    def _reset_sums(self) -> None:
        self._bits = 0.0
        self._packets = 0.0
        self._interrupts: int | None = 0

    def start(self, change_t: float, settle_s: float) -> None:
        """Forget the running window: a setting changed at change_t (sample time)."""
        self._change_t = change_t
        self._settle_s = settle_s
        self._origin = None
        self._reset_sums()

    @property
    def settling(self) -> bool:
        return self._origin is None

    def add(self, s: VfSample) -> Window | None:
        if self._origin is None:
            # The counters of a fresh sample were copied somewhere in (t - dt, t]: only a sample
            # that begins after the change and ends after the settle time opens a window.
            if s.fresh and s.t - s.dt >= self._change_t - _EPS and s.t >= self._change_t + self._settle_s - _EPS:
                self._origin = s.t
                self._reset_sums()
            return None
        if s.t <= self._origin:
            return None
        self._bits += s.throughput_bps * s.dt
        self._packets += (s.rx_pps + s.tx_pps) * s.dt
        if s.interrupts is None or self._interrupts is None:
            self._interrupts = None
        else:
            self._interrupts += s.interrupts
        if s.fresh and s.t - self._origin >= self.window_s - _EPS:
            w = Window(self._origin, s.t, self._bits, self._packets, self._interrupts, s.itr)
            self._origin = s.t
            self._reset_sums()
            return w
        return None


@dataclass(frozen=True)
class TunerOptions:
    settle_s: float = 1.0  # after an ITR change, before a window may start
    window_s: float = 2.0  # raised to the counters' refresh period when that is longer
    tolerance: float = 200.0  # accept interval, interrupts/s (absolute, bites below ~1000/s)
    rel_tolerance: float = 0.2  # ... or a bracket within 20% (high/low)
    margin: float = 0.02  # noise margin: smaller differences are re-measured, not followed
    plateau_margin: float = 0.01  # plateau: lowest rate within 1% of the best
    harm_margin: float = 0.005  # keep the incumbent if the result measures >0.5% worse
    max_repeats: int = 3  # re-measurements per search
    max_interval_us: float = 250.0  # plateau choice never goes below 4000/s
    restart_interrupts: int = 30_000_000
    restart_intervals: int = 600
    load_change: float = 0.3  # relative change of packet or bit rate that restarts
    change_windows: int = 2  # consecutive windows beyond load_change before restarting
    min_throughput_bps: float = 1e6  # below this a VF is idle: nothing to tune
    warm_span: float = 4.0  # periodic restarts search [best/span, best*span]
    quantize: bool = True  # probe only rates the 82599 can deliver (2.048-us steps)
    max_apply_misses: int = 3  # samples showing another ITR than the probe before giving up

    def __post_init__(self) -> None:
        positive = ("window_s", "tolerance", "max_interval_us", "warm_span")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                continue
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"tuner option {f.name} must be a finite number >= 0, got {value!r}")
            if f.name in positive and value == 0:
                raise ValueError(f"tuner option {f.name} must be > 0, got {value!r}")
        for name in ("restart_interrupts", "restart_intervals", "change_windows", "max_apply_misses"):
            if getattr(self, name) < 1:
                raise ValueError(f"tuner option {name} must be >= 1, got {getattr(self, name)!r}")
        if self.warm_span <= 1:
            raise ValueError(f"tuner option warm_span must be > 1, got {self.warm_span!r}")

    @classmethod
    def from_mapping(cls, values: dict[str, object] | None) -> "TunerOptions":
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown tuner option {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return cls(**values)  # type: ignore[arg-type]


def _same_itr(a: int, b: int) -> bool:
    """Whether the ITR a sample reports is the one asked for (drivers round to 2-us steps)."""
    if a <= 0 or b <= 0:
        return a == b
    return abs(a - b) <= 0.05 * max(a, b)


def _rel_change(now: float, ref: float) -> float:
    return abs(now - ref) / max(abs(ref), 1e-9)


@dataclass
class _Event:
    t: float
    text: str


IDLE, PROBING, HOLDING = "idle", "probing", "holding"


class SearchTuner:
    """Golden-section ITR tuning for one VF, with restarts and change detection."""

    name = "vftune"

    def __init__(self, pci: str, caps: Capabilities, options: TunerOptions | dict | None = None) -> None:
        self.pci = pci
        self.caps = caps
        self.options = options if isinstance(options, TunerOptions) else TunerOptions.from_mapping(options)
        self.full_bracket = bracket_from_capabilities(caps)
        self.window_s = max(self.options.window_s, caps.counter_refresh_s)
        self.meter = WindowMeter(self.window_s)
        self.phase = IDLE
        self.search: ItrSearch | None = None
        self.probe_itr: int | None = None
        self.itr_now: int | None = None
        self.held_itr: int | None = None
        self.searches = 0
        self.last_restart_reason: str | None = None
        self.last_event: str | None = None
        self.events: list[_Event] = []
        self.convergences: list[dict[str, object]] = []
        self._misses = 0
        self._search_windows: dict[int, list[Window]] = {}
        self._baseline: Window | None = None
        self._reference: Window | None = None
        self._last_window: Window | None = None
        self._changed_windows = 0
        self._held_interrupts = 0
        self._held_intervals = 0
        self._search_started_t = 0.0
        self._warm_next = False

    # ---- VfPolicy ---------------------------------------------------------------------

    def step(self, sample: VfSample) -> ItrDecision | None:
        if sample.pci != self.pci:
            raise ValueError(f"sample for {sample.pci} given to the tuner of {self.pci}")
        self.itr_now = sample.itr
        if self.phase == IDLE:
            decision = self._step_idle(sample)
        elif self.phase == PROBING:
            decision = self._step_probing(sample)
        else:
            decision = self._step_holding(sample)
        if decision is not None:
            self._note(sample.t, decision.reason)
        return decision

    def state(self) -> dict[str, object]:
        """Read-only view for the API and the status report."""
        search = self.search
        return {
            "pci": self.pci,
            "phase": self.phase,
            "settling": self.phase == PROBING and self.meter.settling,
            "itr": self.itr_now,
            "probe_itr": self.probe_itr if self.phase == PROBING else None,
            "probes": search.probes if search else 0,
            "expected_probes": search.expected_probes() if search else 0,
            "bracket": [round(v) for v in search.bracket] if search else list(self.full_bracket),
            "best": search.best if search else self.held_itr,
            "held_itr": self.held_itr,
            "incumbent": search.incumbent if search else None,
            "searches": self.searches,
            "last_restart_reason": self.last_restart_reason,
            "last_event": self.last_event,
            "window_s": self.window_s,
            "held_interrupts": self._held_interrupts,
            "held_intervals": self._held_intervals,
        }

    # ---- phases -----------------------------------------------------------------------

    def _step_idle(self, s: VfSample) -> ItrDecision | None:
        w = self.meter.add(s)
        if w is None or w.bps < self.options.min_throughput_bps:
            return None
        return self._begin(s, full=True, baseline=w, reason="start: traffic seen")

    def _step_probing(self, s: VfSample) -> ItrDecision | None:
        assert self.search is not None and self.probe_itr is not None
        if not _same_itr(s.itr, self.probe_itr):
            self._misses += 1
            if self._misses > self.options.max_apply_misses:
                return self._abort(s, f"probe not applied: VF reports {s.itr}/s, asked {self.probe_itr}/s")
            self.meter.start(s.t, self.options.settle_s)
            return ItrDecision(self.probe_itr, f"probe {self.search.probes + 1}: re-apply {self.probe_itr}/s")
        self._misses = 0
        w = self.meter.add(s)
        if w is None:
            return None
        if w.bps < self.options.min_throughput_bps:
            return self._abort(s, f"abort: VF idle during probe ({w.bps / 1e6:.2f} Mbit/s)")
        changed = self._changed_during_search(w)
        if changed is not None:
            return self._begin(s, full=True, baseline=None, reason=f"restart: load changed {changed:.0%} during search")
        self._search_windows.setdefault(self.probe_itr, []).append(w)
        self.search.tell(self.probe_itr, w.bps)
        return self._next_probe(s)

    def _step_holding(self, s: VfSample) -> ItrDecision | None:
        self._held_intervals += 1
        interrupts_visible = s.interrupts is not None and not (s.interrupts == 0 and s.rx_pps + s.tx_pps > 0)
        if interrupts_visible:
            self._held_interrupts += int(s.interrupts or 0)
        w = self.meter.add(s)
        if w is not None:
            self._last_window = w
            if self._reference is None:
                self._reference = w
            else:
                ref = self._reference
                change = max(_rel_change(w.pps, ref.pps), _rel_change(w.bps, ref.bps))
                self._changed_windows = self._changed_windows + 1 if change > self.options.load_change else 0
                if self._changed_windows >= self.options.change_windows:
                    if w.bps < self.options.min_throughput_bps:
                        self._note(s.t, f"idle: load fell {change:.0%}, holding {self._label(s.itr)}")
                        self.phase = IDLE
                        self.meter.start(s.t, 0.0)
                        return None
                    return self._begin(s, full=True, baseline=w, reason=f"restart: load changed {change:.0%}")
        if interrupts_visible and self._held_interrupts >= self.options.restart_interrupts:
            reason = f"restart: {self._held_interrupts} interrupts since convergence"
        elif self._held_intervals >= self.options.restart_intervals:
            reason = f"restart: {self._held_intervals} intervals since convergence"
        else:
            return None
        baseline = self._last_window if self._last_window and _same_itr(self._last_window.itr, s.itr) else None
        return self._begin(s, full=False, baseline=baseline, reason=reason)

    # ---- transitions ------------------------------------------------------------------

    def _begin(self, s: VfSample, full: bool, baseline: Window | None, reason: str) -> ItrDecision | None:
        o = self.options
        low, high = self.full_bracket
        if not full and s.itr > 0:
            low = max(low, int(s.itr / o.warm_span))
            high = min(high, int(s.itr * o.warm_span))
        self.search = ItrSearch(
            low,
            high,
            o.tolerance,
            rel_tolerance=o.rel_tolerance,
            margin=o.margin,
            plateau_margin=o.plateau_margin,
            harm_margin=o.harm_margin,
            max_repeats=o.max_repeats,
            max_interval_us=o.max_interval_us,
            incumbent=s.itr,
            incumbent_throughput=None if baseline is None or baseline.bps <= 0 else baseline.bps,
            quantize=quantize_itr if o.quantize else None,
        )
        self.searches += 1
        self.phase = PROBING
        self._baseline = baseline
        self._search_windows = {}
        self._reference = None
        self._changed_windows = 0
        self._search_started_t = s.t
        if reason.startswith("restart"):
            self.last_restart_reason = reason
        return self._next_probe(s, prefix=f"{reason}; searching {low}..{high}/s")

    def _next_probe(self, s: VfSample, prefix: str | None = None) -> ItrDecision | None:
        assert self.search is not None
        itr = self.search.ask()
        if itr is None:
            return self._converge(s)
        self.probe_itr = itr
        self._misses = 0
        moved = not _same_itr(itr, s.itr)
        self.meter.start(s.t, self.options.settle_s if moved else 0.0)
        what = "incumbent" if itr == self.search.incumbent and self.search.phase == "baseline" else ""
        text = f"probe {self.search.probes + 1}/{self.search.expected_probes()}: {self._label(itr)}"
        if what:
            text += f" ({what})"
        if prefix:
            text = f"{prefix}; {text}"
        if moved:
            return ItrDecision(itr, text)
        self._note(s.t, text)
        return None

    def _converge(self, s: VfSample) -> ItrDecision | None:
        assert self.search is not None
        best = self.search.best
        assert best is not None
        text = f"converged: {self.search.outcome} after {self.search.probes} probes"
        self.convergences.append(
            {"t": s.t, "started": self._search_started_t, "probes": self.search.probes, "best": best}
        )
        self.phase = HOLDING
        self.held_itr = best
        self.probe_itr = None
        self._held_interrupts = 0
        self._held_intervals = 0
        self._reference = None
        self._last_window = None
        self._changed_windows = 0
        moved = not _same_itr(best, s.itr)
        self.meter.start(s.t, self.options.settle_s if moved else 0.0)
        if moved:
            return ItrDecision(best, text)
        self._note(s.t, text)
        return None

    def _abort(self, s: VfSample, why: str) -> ItrDecision | None:
        """Stop searching and go back to the setting the search started from."""
        assert self.search is not None
        back = self.search.incumbent if self.search.incumbent is not None else s.itr
        self.phase = IDLE
        self.search = None
        self.probe_itr = None
        self.meter.start(s.t, self.options.settle_s)
        text = f"{why}; back to {self._label(back)}"
        if not _same_itr(back, s.itr):
            return ItrDecision(back, text)
        self._note(s.t, text)
        return None

    def _changed_during_search(self, w: Window) -> float | None:
        """A load change inside a search: packet size moved, or a re-measured rate disagrees."""
        limit = self.options.load_change
        ref = self._baseline
        if ref is None and self._search_windows:
            ref = next(iter(self._search_windows.values()))[0]
        if ref is not None and ref.packet_bytes > 0 and w.packet_bytes > 0:
            change = _rel_change(w.packet_bytes, ref.packet_bytes)
            if change > limit:
                return change
        earlier = self._search_windows.get(self.probe_itr) if self.probe_itr is not None else None
        if earlier:
            mean = sum(e.bps for e in earlier) / len(earlier)
            change = _rel_change(w.bps, mean)
            if change > limit:
                return change
        return None

    def _note(self, t: float, text: str) -> None:
        self.last_event = text
        self.events.append(_Event(t, text))
        del self.events[:-100]

    @staticmethod
    def _label(itr: int) -> str:
        return "adaptive" if itr == 0 else f"{itr}/s"
