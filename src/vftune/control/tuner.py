"""SearchTuner: the per-VF policy the agent runs by default. It drives the small parts:

    window.py   cuts the sample stream into measurement windows at counter refreshes
    change.py   tells whether the held load is still the one its setting was chosen for
    memory.py   classifies windows and remembers the best setting per class, per VF and host
    port.py     judges a window on a saturated port (the VF's share, not the port's total)
    restart.py  the periodic restart clock
    itr_search  the golden-section search (one SearchConfig, from the VF's objective)

Per VF:

    idle --(traffic)--> recall (a remembered class) | probing (an unseen class)
    holding --(no traffic for a window)--> idle: the held setting stays
    probing --(search converged)--> holding; the class's best is remembered
    probing --(the class changed)--> the search is suspended for its class (resumed when the
        class returns) and the new class is recalled, resumed or searched; seen in a probe's
        window, or in any window-long slice of the adaptive ITR's longer one
    holding --(N interrupts | M seconds)--> warm restart (bracket around the held rate)
    recall of a setting M seconds old --> warm restart around it (a hold in short visits)
    holding --(another class for a window | the rate moved for long)--> recall or search

Every search measures the guest's adaptive ITR first when it starts from it (cold): the result
must beat it (do no harm) and, under the throughput objective, must not cost more CPU per Gb
unless its gain pays for it (objective.py documents the rule).

Decisions carry a Cause and structured fields (causes.py); their text is rendered from them.
Pure logic: the agent supplies samples and applies decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import NamedTuple

from vftune.control.causes import Cause, TunerEvent
from vftune.control.change import Change, ChangeDetector, same_shape
from vftune.control.itr_search import KNEE_Z, ItrSearch, SearchConfig, bracket_from_capabilities
from vftune.control.memory import ClassMemory, HostProfiles, Profile, WorkloadClass, classify, shape_of
from vftune.control.objective import Goal
from vftune.control.policy import VfPolicy
from vftune.control.port import PortJudge
from vftune.control.restart import RestartClock
from vftune.control.window import EPS, AppReference, Window, WindowMeter, app_share, joined, starved
from vftune.itr import quantize_itr, same_itr
from vftune.model import Capabilities, ItrDecision, VfSample

__all__ = ["Convergence", "Phase", "SearchTuner", "TunerOptions", "Window", "WindowMeter"]


@dataclass(frozen=True)
class TunerOptions:
    # After an ITR change, before a window may start. The interval in which the VF took the
    # change is never counted (WindowMeter), so this covers only what follows it: on the 82599
    # a new EITR holds from the next interrupt (on veth, `vftune testbed` saw NAPI's deferral
    # knob act within the first 100-ms slice after a switch). One tick.
    settle_s: float = 0.25
    window_s: float = 0.5  # raised to the counters' refresh period when that is longer
    tolerance: float = 200.0  # accept interval, interrupts/s
    rel_tolerance: float = 0.2  # ... or a bracket within 20% (high/low)
    margin: float = 0.02  # noise margin: smaller differences are re-measured, not followed
    plateau_margin: float = 0.005  # plateau: lowest rate within 0.5% of the best (throughput first)
    harm_margin: float = 0.005  # keep the incumbent if the result measures >0.5% worse
    max_repeats: int = 3  # re-measurements per search
    max_probes: int = 12  # measurements per search, the incumbent's included (~2 s each on the patched pair)
    adaptive_windows: int = 4  # the adaptive ITR, which moves window to window, is measured over this many
    restart_interrupts: int = 30_000_000
    restart_s: float = 600.0
    restart_jitter: float = 0.25  # each hold lasts x(1 +- jitter) of the above, per VF and search
    load_change: float = 0.3  # relative change of packet or bit rate that restarts ...
    load_change_s: float = 30.0  # ... once it has lasted this long (bursts are not a new load)
    change_windows: int = 2  # windows of an unseen class (or idle) before acting on it
    recall_windows: int = 1  # windows of a remembered class before its setting is recalled
    reference_windows: int = 3  # the held load's reference: median of this many windows
    min_throughput_bps: float = 1e6  # below this a VF is idle: nothing to tune
    warm_span: float = 2.0  # periodic restarts search [best/span, best*span]
    quantize: bool = True  # probe only rates the host's NIC can deliver (whole interval units)
    max_apply_misses: int = 3  # samples showing another ITR than the probe before giving up
    host_memory: bool = True  # a VF's unseen class starts from another VF's setting for it
    shared_check: bool = True  # ... measured against the adaptive ITR before it is held
    span_recall: bool = True  # a remembered class of another shape is recalled from one counter span
    knee_noise: bool = True  # a rate short of the plateau margin by less than its noise is on it (knee_z)
    low_edge: bool = True  # a plateau's walk down starts at the range's lowest rate (low_edge)
    guest_share: bool = True  # on a full guest, a window's merit counts its processes' share (app_share)
    port_saturation: float = 0.98  # a port loaded to this share of its line rate is saturated ...
    port_memory_s: float = 60.0  # ... and stays so this long after a window found it so
    port_gain: float = 0.01  # a VF taking its share must raise the port's total by this much
    # Host CPU per forwarded interrupt (VM exit, vfio's handler, injection: a few microseconds
    # without posted interrupts), added to the guest's CPU when a setting's cost is judged.
    # An estimate, not a measurement of this host.
    host_irq_cost_s: float = 2e-6
    # A bound on the coalescing delay (us) for VFs whose goal gives none (the goal's wins).
    max_interval_us: float | None = None

    def __post_init__(self) -> None:
        positive = ("window_s", "adaptive_windows", "tolerance", "warm_span", "restart_s", "max_interval_us")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or value is None:
                continue
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"tuner option {f.name} must be a finite number >= 0, got {value!r}")
            if f.name in positive and value == 0:
                raise ValueError(f"tuner option {f.name} must be > 0, got {value!r}")
        for name in ("restart_interrupts", "change_windows", "recall_windows", "max_apply_misses",
                     "max_probes", "reference_windows"):
            if getattr(self, name) < 1:
                raise ValueError(f"tuner option {name} must be >= 1, got {getattr(self, name)!r}")
        if self.warm_span <= 1:
            raise ValueError(f"tuner option warm_span must be > 1, got {self.warm_span!r}")

    @classmethod
    def from_mapping(cls, values: dict[str, object] | None) -> TunerOptions:
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown tuner option {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return cls(**values)  # type: ignore[arg-type]

    def search_config(self, caps: Capabilities | None = None) -> SearchConfig:
        """The search's budget and stop rules; rates quantized to the NIC of `caps` (default: the 82599)."""
        quantize = (caps.quantize if caps is not None else quantize_itr) if self.quantize else None
        return SearchConfig(
            tolerance=self.tolerance, rel_tolerance=self.rel_tolerance, margin=self.margin,
            plateau_margin=self.plateau_margin, harm_margin=self.harm_margin, max_repeats=self.max_repeats,
            max_probes=max(3, self.max_probes), quantize=quantize, knee_z=KNEE_Z if self.knee_noise else 0.0,
            low_edge=self.low_edge,
        )


@dataclass
class Convergence:
    """One search that ended: when, when it started, how many measurements, and the rate kept."""

    t: float
    started: float | None
    probes: int
    best: int


class Tuning(NamedTuple):
    """How a load is searched: the goal it is tuned for, its search rules and its full bracket."""

    goal: Goal
    config: SearchConfig
    bracket: tuple[float, float]


class Remembered(NamedTuple):
    """A class's remembered setting: this VF's own measurement, or another VF's (the host's)."""

    klass: WorkloadClass
    profile: Profile
    own: bool

    @property
    def source(self) -> str:
        return "this VF" if self.own else "host"


class Phase(StrEnum):
    IDLE = "idle"
    PROBING = "probing"
    HOLDING = "holding"


@dataclass
class _Search:
    """A search and what it is for; suspended while its class is away."""

    search: ItrSearch
    klass: WorkloadClass | None
    started: float
    capped: int = 0  # windows credited with the VF's port share only
    judged: int = 0
    # Each probed rate's class as last measured: the load's class at the chosen rate is what
    # the result is remembered for (probes move the packet rate, and so its decade).
    classes: dict[int, WorkloadClass] = field(default_factory=dict)
    # The guest's processes in the search's first window: what app_share measures against.
    app_ref: AppReference | None = None


# Restart causes as the benchmark counts them.
_RESTART_KEYS = {Cause.RESTART_PERIODIC: "periodic", Cause.RESTART_LOAD: "load",
                 Cause.RESTART_IN_SEARCH: "in_search",
                 Cause.RESTART_STARVED: "starved"}


class SearchTuner(VfPolicy):
    """Golden-section ITR tuning for one VF, with workload memory, restarts and change detection."""

    name = "vftune"

    def __init__(self, pci: str, caps: Capabilities, options: TunerOptions | dict[str, object] | None = None,
                 goal: Goal | None = None, profiles: HostProfiles | None = None) -> None:
        self.pci = pci
        self.caps = caps
        self.options = options if isinstance(options, TunerOptions) else TunerOptions.from_mapping(options)
        o = self.options
        self.goal = goal or Goal()
        if self.goal.max_interval_us is None and o.max_interval_us is not None:
            self.goal = replace(self.goal, max_interval_us=o.max_interval_us)
        self._own = self._tuning(self.goal)
        # Per kind of load (the goal may tune a kind otherwise).
        self._by_kind = {kind: self._tuning(self.goal.for_load(kind)) for kind in ("bulk", "rr")}
        self.window_s = max(o.window_s, caps.counter_refresh_s)
        self.meter = WindowMeter(self.window_s)
        self.changes = ChangeDetector(o.min_throughput_bps, o.load_change, o.load_change_s, o.change_windows,
                                      o.reference_windows)
        self.port = PortJudge(o.port_saturation, o.port_memory_s, o.port_gain, o.margin)
        self.clock = RestartClock(pci, o.restart_interrupts, o.restart_s, o.restart_jitter)
        self.profiles = profiles or HostProfiles()
        self.memory: ClassMemory = self.profiles.for_vf(pci)
        self.phase = Phase.IDLE
        self.active: _Search | None = None
        self.suspended: dict[WorkloadClass, _Search] = {}
        self.probe_itr: int | None = None
        self.itr_now: int | None = None
        self.held_itr: int | None = None
        self.held_class: WorkloadClass | None = None
        self.searches = 0
        self.restarts: dict[str, int] = dict.fromkeys(_RESTART_KEYS.values(), 0)
        self.recalls = 0
        self.last_restart_reason: str | None = None
        self.last_event: TunerEvent | None = None
        self.events: list[TunerEvent] = []
        self.convergences: list[Convergence] = []
        self._misses = 0
        # Per load shape: slices of the adaptive ITR's windows that held the load (_gather).
        self._slices: dict[tuple[str, str, str], list[Window]] = {}
        self._last_window: Window | None = None
        self._last_search: _Search | None = None
        # When this VF last measured each class's setting (a search's end) or first took it
        # from memory: a remembered setting ages like a held one (_recall).
        self._measured_at: dict[WorkloadClass, float] = {}

    def _tuning(self, goal: Goal) -> Tuning:
        """A goal's search rules and full bracket on this VF's NIC."""
        config = goal.search_config(self.options.search_config(self.caps), self.caps.longest_interval_us)
        bracket = bracket_from_capabilities(self.caps)
        if goal.bounds_delay:
            # A bound on the added delay is a hard floor: no probe goes below it either.
            floor = math.ceil(1e6 / config.max_interval_us)
            if bracket[0] < floor < bracket[1]:
                bracket = (floor, bracket[1])
        return Tuning(goal, config, bracket)

    @property
    def search_config(self) -> SearchConfig:
        """The search rules of this VF's own goal (a load's kind may be tuned otherwise)."""
        return self._own.config

    @property
    def full_bracket(self) -> tuple[float, float]:
        """The bracket of this VF's own goal on its NIC."""
        return self._own.bracket

    def _tuning_for(self, klass: WorkloadClass | None) -> Tuning:
        """How a load of this class (None: not known yet) is searched."""
        return self._by_kind[klass.kind] if klass is not None else self._own

    @property
    def search(self) -> ItrSearch | None:
        """The running search, or the last one once it ended."""
        current = self.active or self._last_search
        return current.search if current else None

    # ---- VfPolicy ---------------------------------------------------------------------

    def step(self, sample: VfSample) -> ItrDecision | None:
        if sample.pci != self.pci:
            raise ValueError(f"sample for {sample.pci} given to the tuner of {self.pci}")
        self.itr_now = sample.itr
        if self.phase is Phase.PROBING:
            event = self._step_probing(sample)
        else:
            due = self.clock.tick(sample) if self.phase is Phase.HOLDING else None
            event = self._step_other(sample)
            if event is None and due is not None and self.phase is Phase.HOLDING:
                event = self._begin(sample, Cause.RESTART_PERIODIC, warm=True, baseline=self._last_window,
                                    klass=self.held_class, count=due.count, unit=due.unit)
        if event is None:
            return None
        return self._emit(event)

    def _emit(self, event: TunerEvent) -> ItrDecision | None:
        self.last_event = event
        self.events.append(event)
        del self.events[:-100]
        if event.cause.restart and event.cause is not Cause.START:
            self.last_restart_reason = event.text()
        itr = event.fields.get("set")
        if not isinstance(itr, int):
            return None
        return ItrDecision(itr, event.text(), event.cause.value)

    def _note(self, t: float, cause: Cause, **values: object) -> None:
        """An event that sets nothing (shown in state() and the event list)."""
        self._emit(TunerEvent(t, cause, values))

    def at_rest(self) -> bool:
        # Idle waits for a window with traffic (or a starved one, which needs interrupts);
        # probing and holding count samples and windows.
        return self.phase is Phase.IDLE

    def measured_window(self) -> Window | None:
        """The latest window measured, at the rate in force then (agent/value.py compares them)."""
        return self._last_window

    def state(self) -> dict[str, object]:
        """Read-only view for the API and the status report."""
        search = self.search
        return {
            "pci": self.pci,
            "phase": self.phase.value,
            "objective": self.goal.objective.value,
            "max_interval_us": self._tuning_for(self.held_class).config.max_interval_us,  # for the load held
            "margin": self.goal.margin,
            "settling": self.phase is Phase.PROBING and self.meter.settling,
            "itr": self.itr_now,
            "probe_itr": self.probe_itr if self.phase is Phase.PROBING else None,
            "probes": search.probes if search else 0,
            "expected_probes": search.expected_probes() if search else 0,
            "bracket": [round(v) for v in search.bracket] if search else list(self.full_bracket),
            "best": search.best if self.phase is Phase.PROBING and search else self.held_itr,
            "held_itr": self.held_itr,
            "incumbent": search.incumbent if search else None,
            "workload_class": str(self.held_class) if self.held_class else None,
            "remembered_classes": len(self.memory),
            "suspended_searches": len(self.suspended),
            "searches": self.searches,
            "recalls": self.recalls,
            "last_restart_reason": self.last_restart_reason,
            "last_event": self.last_event.text() if self.last_event else None,
            "last_cause": self.last_event.cause.value if self.last_event else None,
            "window_s": self.window_s,
            "held_interrupts": self.clock.interrupts,
            "held_s": round(self.clock.held_s, 3),
            "port": self.port.state(self.active.capped if self.active else 0),
        }

    # ---- measuring ----------------------------------------------------------------------

    def _measure(self, s: VfSample) -> Window | None:
        w = self.meter.add(s)
        if w is not None:
            self.port.observe(w)
        return w

    def _windows_for(self, klass: WorkloadClass) -> int:
        known = self._profile(klass) is not None or klass in self.suspended
        return self.options.recall_windows if known else self.options.change_windows

    def _profile(self, klass: WorkloadClass | None) -> Remembered | None:
        """The remembered setting for a class (or its nearest decade): this VF's, else the host's."""
        if klass is None:
            return None
        mine = self.memory.nearest(klass)
        if mine is not None:
            return Remembered(*mine, own=True)
        if self.options.host_memory:
            shared = self.profiles.host.nearest(klass)
            if shared is not None:
                return Remembered(*shared, own=False)
        return None

    # ---- idle and holding --------------------------------------------------------------

    def _step_other(self, s: VfSample) -> TunerEvent | None:
        w = self._measure(s)
        if w is not None:
            self._last_window = w
            if self.phase is Phase.IDLE:
                if w.bps >= self.options.min_throughput_bps:
                    return self._new_load(s, w, classify(w), Cause.START)
                if starved(w):
                    return self._starved(s, w)
            else:
                change = self.changes.observe(w, self._windows_for)
                if change is not None:
                    return self._on_change(s, change)
        return self._span_recall(s) if self.options.span_recall else None

    def _on_change(self, s: VfSample, change: Change) -> TunerEvent | None:
        if change.kind == "starved":
            event = self._starved(s, change.baseline)
            if event is not None:
                return event
        if change.kind in ("idle", "starved"):
            self.held_class = None
            self.phase = Phase.IDLE
            self.meter.start(s.t, 0.0)
            self._note(s.t, Cause.IDLE, mbps=round(change.baseline.bps / 1e6, 2), itr=s.itr)
            return None
        if change.kind == "reference":
            self.held_class = change.klass or self.held_class
            self._note(s.t, Cause.REFERENCE, change=change.rate_change, lasted_s=round(change.lasted_s),
                       ref_s=round(change.held_s), mbps=round(change.baseline.bps / 1e6))
            return None
        if change.kind == "rate":
            return self._begin(s, Cause.RESTART_LOAD, warm=False, baseline=change.baseline, klass=change.klass,
                               what=f"rate {change.rate_change:+.0%} for {change.lasted_s:.0f} s")
        return self._new_load(s, change.baseline, change.klass, Cause.RESTART_LOAD)

    def _span_recall(self, s: VfSample) -> TunerEvent | None:
        """A sample that is a whole counter span (the counters refresh every sample) and shows a
        load of another shape whose setting this VF measured: recalled now, not when the window
        ends, since the old setting costs the new load that window at every change. Only shape
        (kind, size, mix) is read from one span: a move of the rate's decade waits for the
        change detector's significance rule, and another VF's setting for its check."""
        if not s.fresh or s.dt < self.caps.counter_refresh_s - EPS or self.meter.settling:
            return None
        if s.rx_bps + s.tx_bps < self.options.min_throughput_bps:
            return None
        dt, held = s.dt, self.held_class
        if held is not None and held.shape == shape_of((s.rx_bps + s.tx_bps) * dt, s.rx_bps * dt,
                                                       (s.rx_pps + s.tx_pps) * dt, s.rx_pps * dt, held):
            return None  # the common case, told without building a window
        span = Window.of(s)
        klass = classify(span, held)
        if klass is None or starved(span):
            return None
        known = self._profile(klass)
        if klass not in self.suspended and (known is None or not known.own):
            return None
        self._last_window = span
        return self._new_load(s, span, klass, Cause.START if self.phase is Phase.IDLE else Cause.RESTART_LOAD)

    def _starved(self, s: VfSample, w: Window) -> TunerEvent | None:
        """Interrupted without traffic under a rate vftune set: that rate livelocks the guest, so
        it is not what its class should recall, and a cold search starts from the guest's own
        adaptive ITR (its first probe), where probes that starve the guest measure nothing, so
        the result must deliver more than the adaptive ITR does. Under the adaptive ITR there is
        nothing of ours to undo: the VF is left idle."""
        if s.itr == 0:
            return None
        self._forget_held_class()
        return self._begin(s, Cause.RESTART_STARVED, warm=False, baseline=w, klass=None,
                           irq_per_s=round(w.interrupt_rate or 0.0), itr=s.itr)

    def _forget_held_class(self) -> None:
        """The held class's setting measured wrong: this VF's memory and the host's drop it."""
        if self.held_class is not None:
            self.memory.forget(self.held_class)
            self.profiles.host.forget(self.held_class)

    def _new_load(self, s: VfSample, w: Window, klass: WorkloadClass | None, cause: Cause) -> TunerEvent | None:
        """The load is of another class, seen in window `w` (while idle or holding, or under a
        search, whose measurements are kept for its class): recall the class's setting, resume
        its search, or search."""
        self._suspend()
        if klass is not None and klass in self.suspended:
            # A search under way for the class (a first one, or a remembered setting's re-check)
            # is newer than anything remembered for it.
            return self._resume(s, self.suspended.pop(klass))
        known = self._profile(klass)
        if known is not None and known.klass != self.held_class:
            if known.own or not self.options.shared_check:
                return self._recall(s, known)
            # Another VF's setting: the class (rate, packet size, direction) does not tell a bulk
            # sender from a request/response peer of the same shape, so the setting is a guess
            # for this VF. It is measured against the guest's adaptive ITR, as any search's
            # result is (do no harm), before it is held.
            return self._begin(s, cause, warm=False, baseline=w, klass=klass, around=known.profile.itr,
                               what=f"load changed to {klass}", mbps=round(w.bps / 1e6), klass_name=str(klass),
                               shared=f"checking another VF's {known.profile.itr}/s against the adaptive ITR")
        return self._begin(s, cause, warm=False, baseline=w, klass=klass,
                           what=f"load changed to {klass}", mbps=round(w.bps / 1e6), klass_name=str(klass))

    def _recall(self, s: VfSample, known: Remembered) -> TunerEvent | None:
        klass, profile = known.klass, known.profile
        self._suspend()
        taken = self._measured_at.setdefault(klass, s.t)
        age = s.t - taken
        if age >= self.options.restart_s * self.clock.factor(self.searches):
            # The periodic restart, for a setting held in visits: a load that changes class
            # every few seconds resets the hold's clock at each recall, so without this a
            # remembered setting (and whatever its one search measured) would never be
            # searched again. The re-check brackets it as a periodic restart does.
            return self._begin(s, Cause.RESTART_PERIODIC, warm=True, baseline=None, klass=klass,
                               centre=profile.itr, count=round(age), unit="s", klass_name=str(klass),
                               itr=profile.itr)
        self.recalls += 1
        profile.uses += 1
        self.phase = Phase.HOLDING
        self.held_itr = profile.itr
        self.held_class = klass
        self.probe_itr = None
        self.changes.reset(klass)
        self.clock.reset(self.searches)
        moved = not same_itr(profile.itr, s.itr)
        self.meter.start(s.t, self.options.settle_s if moved else 0.0)
        return TunerEvent(s.t, Cause.RECALL, {"klass": str(klass), "itr": profile.itr, "source": known.source,
                                                **({"set": profile.itr} if moved else {})})

    # ---- probing ----------------------------------------------------------------------

    def _step_probing(self, s: VfSample) -> TunerEvent | None:
        assert self.active is not None and self.probe_itr is not None
        if not same_itr(s.itr, self.probe_itr):
            if s.itr_pending is not None and same_itr(s.itr_pending, self.probe_itr):
                self.meter.add(s)  # on its way: the window starts once the VF runs it
                return None
            self._misses += 1
            if self._misses > self.options.max_apply_misses:
                return self._abort(s, f"probe not applied: VF reports {s.itr}/s, asked {self.probe_itr}/s")
            self.meter.start(s.t, self.options.settle_s)
            return TunerEvent(s.t, Cause.REAPPLY, {"seen": s.itr, "itr": self.probe_itr, "set": self.probe_itr})
        self._misses = 0
        w = self._measure(s)
        if w is None:
            return self._glance(s, self.meter.slice)
        return self._probe_window(s, w)

    def _probe_window(self, s: VfSample, w: Window) -> TunerEvent | None:
        """A probe's window is in: tell the search what it measured, or say why not."""
        assert self.active is not None and self.probe_itr is not None
        search = self.active.search
        self._last_window = w
        if w.bps < self.options.min_throughput_bps and starved(w):
            # The probed rate livelocks the guest: it delivered nothing, which is its measure.
            search.tell(self.probe_itr, 0.0)
            return self._next_probe(s)
        if w.bps < self.options.min_throughput_bps:
            self._suspend()  # its measurements stay valid when the class comes back
            self.active = self._last_search
            return self._abort(s, f"VF idle during probe ({w.bps / 1e6:.2f} Mbit/s)")
        klass = classify(w, self.active.klass)
        if self.active.klass is None:
            self.active.klass = klass
        elif klass is not None and not same_shape(klass, self.active.klass):
            return self._new_load(s, w, klass, Cause.RESTART_IN_SEARCH)
        if klass is not None:
            self.active.classes[self.probe_itr] = klass
        verdict = self.port.judge(w)
        self.active.judged += 1
        if verdict.credited_bps < w.app_bps * (1.0 - 1e-6):
            self.active.capped += 1
            self._note(w.end, Cause.PORT, load=w.port_load or 0.0, credited_mbps=round(verdict.credited_bps / 1e6),
                       mbps=round(w.bps / 1e6))
        credited = verdict.credited_bps
        if self.options.guest_share:
            if self.active.app_ref is None:
                self.active.app_ref = AppReference.of(w)
            credited *= app_share(w, self.active.app_ref)
        search.tell(self.probe_itr, credited, w.cpu_per_bit(self.options.host_irq_cost_s),
                    scale=w.bps if w.dropped_bits else None, interrupt_rate=w.interrupt_rate)
        if self.probe_itr == 0 and self.active.klass is not None:
            self._slices.pop(self.active.klass.shape, None)  # the adaptive ITR is measured
        return self._next_probe(s)

    def _glance(self, s: VfSample, part: Window | None) -> TunerEvent | None:
        """A slice of a long window (the adaptive ITR's) that shows another load: act on it
        now, as a probe's own window would, instead of when the long window ends. A slice
        that is idle, starved or idle in part says nothing yet; its window will."""
        assert self.active is not None
        if part is None or self.active.klass is None:
            return None
        if part.bps < self.options.min_throughput_bps or starved(part):
            return None
        if part.lowest_part_bps is not None and part.lowest_part_bps < self.options.min_throughput_bps:
            return None
        klass = classify(part, self.active.klass)
        if klass is None:
            return None
        if same_shape(klass, self.active.klass):
            return self._gather(s, part)
        self._last_window = part
        return self._new_load(s, part, klass, Cause.RESTART_IN_SEARCH)

    def _gather(self, s: VfSample, part: Window) -> TunerEvent | None:
        """A slice of the adaptive ITR's window that held the load: kept for the load's shape, so
        that a load which never holds for the whole window (changing class or stopping every few
        seconds) is measured over the slices of several visits. Slices older than a lasting
        change of rate (load_change_s) are dropped: they may have measured another level."""
        assert self.active is not None and self.active.klass is not None
        o = self.options
        shape = self.active.klass.shape
        kept = [x for x in self._slices.get(shape, ()) if part.end - x.end < o.load_change_s] + [part]
        self._slices[shape] = kept[-o.adaptive_windows:]
        if len(kept) < o.adaptive_windows:
            return None  # (a window measured in one piece shows one slice fewer than it holds)
        del self._slices[shape]
        return self._probe_window(s, joined(kept[-o.adaptive_windows:]))

    def _suspend(self) -> None:
        """Keep a running search for its class (its measurements stay valid when it returns)."""
        if self.active is not None and self.active.klass is not None and self.active.search.probes > 0:
            self.suspended[self.active.klass] = self.active
            if len(self.suspended) > 16:
                del self.suspended[next(iter(self.suspended))]
        self.active = None
        self.probe_itr = None

    def _resume(self, s: VfSample, suspended: _Search) -> TunerEvent | None:
        self.active = self._last_search = suspended
        self.phase = Phase.PROBING
        self.held_class = suspended.klass
        return self._next_probe(s, TunerEvent(s.t, Cause.RESTART_LOAD,
                                              {"what": f"load back to {suspended.klass}: search resumed"}))

    def _begin(self, s: VfSample, cause: Cause, warm: bool, baseline: Window | None,
               klass: WorkloadClass | None, centre: int | None = None, around: int | None = None,
               **values: object) -> TunerEvent | None:
        """Start a search; a warm one around `centre` (default: the rate in force). With `around`,
        the search measures that one rate against its incumbent (its bracket is that rate's)."""
        o = self.options
        low: float
        high: float
        goal, config, full = self._tuning_for(klass)
        low, high = full
        if around is not None and low < around < high:
            # Narrower than the search's tolerance: the bracket's one probe is its middle.
            low, high = around / (1.0 + self.search_config.rel_tolerance / 4), around * (
                1.0 + self.search_config.rel_tolerance / 4)
        # A warm restart brackets the rate in force (or a remembered one); under the adaptive
        # ITR (0) that is the interrupt rate the host measured, when it can see one. A cold
        # search's incumbent is the adaptive ITR: a rate in force then is another load's (a
        # probe of the search the load left, or the setting held for it), no centre for this one.
        held = (s.itr if centre is None else centre) if warm else None
        adaptive_rate = baseline.interrupt_rate if baseline is not None and baseline.itr == 0 else None
        incumbent = held if held is not None else 0
        centre_rate = held if held else adaptive_rate
        verdict = self.port.judge(baseline) if baseline is not None else None
        confined = verdict is not None and verdict.takes_share
        if around is None and centre_rate and (confined or warm):
            # A VF that takes its share of a saturated port gains only from its neighbours: its
            # searches stay around the rate in force and look only for a cheaper one. Under
            # efficiency, any cheaper one: the lowest rate that holds the share is the objective.
            if not (confined and goal.trades_merit):
                low = max(low, int(centre_rate / o.warm_span))
            high = min(high, int(centre_rate * (1.0 if confined else o.warm_span)))
            if high <= low:
                low, high = full
        # A cold search measures the guest's own adaptive ITR first (do no harm; a candidate),
        # in a window of its own: the window that showed the new load straddles the change.
        same = warm and baseline is not None and same_itr(baseline.itr, incumbent) and (
            baseline.bps > 0)
        incumbent_bps = verdict.credited_bps if same and verdict is not None else None
        if config.ties_up and (klass is None or klass.mix == "rx"):
            # A tie goes to the shorter delay only where the VF answers: a receive-heavy load at
            # more interrupts than it needs risks livelock its ring counters do not show.
            config = replace(config, ties_up=False)
        search = ItrSearch(
            low, high, config=config, incumbent=incumbent,
            incumbent_throughput=incumbent_bps,
            incumbent_cost=baseline.interrupt_rate if same and baseline is not None else None,
            incumbent_cpu_per_bit=baseline.cpu_per_bit(o.host_irq_cost_s) if same and baseline is not None else None,
            cost_margin=verdict.cost_margin if verdict is not None and verdict.saturated else None,
        )
        self.searches += 1
        self.active = self._last_search = _Search(search, klass, s.t, app_ref=AppReference.of(baseline)
                                                  if same and baseline is not None else None)
        self.phase = Phase.PROBING
        self.held_class = klass
        if cause in _RESTART_KEYS:
            self.restarts[_RESTART_KEYS[cause]] += 1
        values.update(low=int(low), high=int(high))
        if verdict is not None and verdict.saturated:
            values["port"] = "port saturated: judged on the VF's share of the port" + (
                ", looking only for a cheaper rate" if confined and centre_rate and high <= centre_rate * 1.0001 else "")
        if "klass_name" in values:
            values["klass"] = values.pop("klass_name")
        if cause is Cause.START and baseline is not None:
            values.setdefault("mbps", round(baseline.bps / 1e6))
        return self._next_probe(s, TunerEvent(s.t, cause, values))

    def _next_probe(self, s: VfSample, head: TunerEvent | None = None) -> TunerEvent | None:
        assert self.active is not None
        search = self.active.search
        itr = search.ask()
        if itr is None:
            return self._converge(s, head)
        self.probe_itr = itr
        self._misses = 0
        moved = not same_itr(itr, s.itr)
        # The adaptive ITR moves with its own state from one window to the next: it is measured
        # over several windows, so that it is judged on what it delivers over time.
        length = self.window_s * self.options.adaptive_windows if itr == 0 else None
        self.meter.start(s.t, self.options.settle_s if moved else 0.0, length)
        probe: dict[str, object] = {"n": search.probes + 1, "of": search.expected_probes(), "itr": itr}
        if itr == search.incumbent and search.phase == "baseline":
            probe["role"] = "incumbent"
        event = TunerEvent(s.t, Cause.PROBE, probe)
        if head is not None:
            event = replace(head, then=(*head.then, event))
        if moved or head is not None:
            # A search's first probe is written even when it is the rate in force: on the
            # patched pair any host write makes the VF fetch every 250 ms for a while, so the
            # next probe's rate is in force at once, not at the VF's next 2-s fetch.
            event = replace(event, fields={**event.fields, "set": itr})
        return event

    def _converge(self, s: VfSample, head: TunerEvent | None) -> TunerEvent | None:
        assert self.active is not None
        search = self.active.search
        best = search.best
        assert best is not None
        values: dict[str, object] = {"outcome": search.outcome, "probes": search.probes}
        if self.active.capped:
            values["port_note"] = (f"port saturated: judged on the VF's share of the port in "
                                   f"{self.active.capped} of {self.active.judged} windows")
        self.convergences.append(Convergence(s.t, self.active.started, search.probes, best))
        klass = self.active.classes.get(best, self.active.klass)
        self.suspended.pop(self.active.klass, None) if self.active.klass is not None else None
        if klass is not None:
            self._measured_at[klass] = s.t
            if self.active.klass is not None:
                self._measured_at[self.active.klass] = s.t
            measured = search.mean(best) if best in search.scores() else search.incumbent_throughput
            if measured:
                profile = Profile(best, measured, search.cpu_per_bit(best), s.t)
                self.memory.remember(klass, profile)
                if self.options.host_memory:
                    self.profiles.host.remember(klass, replace(profile))
        self.phase = Phase.HOLDING
        self.held_itr = best
        self.held_class = klass
        self.active = None
        self.probe_itr = None
        self.changes.reset(klass)
        self.clock.reset(self.searches)
        moved = not same_itr(best, s.itr)
        self.meter.start(s.t, self.options.settle_s if moved else 0.0)
        if moved:
            values["set"] = best
        event = TunerEvent(s.t, Cause.CONVERGED, values)
        if head is not None:
            event = replace(head, then=(*head.then, event), fields={**head.fields, **(
                {"set": best} if moved else {})})
        return event

    def _abort(self, s: VfSample, why: str) -> TunerEvent | None:
        """Stop searching and go back to the setting the search started from."""
        assert self.active is not None
        search = self.active.search
        back = search.incumbent if search.incumbent is not None else s.itr
        self.phase = Phase.IDLE
        self.active = None
        self.probe_itr = None
        self.held_class = None
        self.meter.start(s.t, self.options.settle_s)
        values: dict[str, object] = {"why": why, "itr": back}
        if not same_itr(back, s.itr):
            values["set"] = back
        return TunerEvent(s.t, Cause.ABORT, values)
