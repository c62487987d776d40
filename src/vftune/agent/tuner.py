"""SearchTuner: the per-VF policy the agent runs by default: golden-section search, restarted.

Per VF, over the agent's VfSamples:

    idle --(traffic)--> probing: set probe ITR -> settle -> measure one window -> tell -> next
                        probing --(search converged)--> holding
    holding --(N interrupts | M intervals)--> warm restart (bracket around the current best)
    holding --(packet size changed, or the rate changed for load_change_s)--> cold restart

Measurement windows: per-VF byte counters on unpatched ixgbe refresh about every 2 s, so a 1-s
sample may show no delta and the next one double. A window therefore starts and ends on samples
whose counters were refreshed (VfSample.fresh), lasts at least max(window_s,
Capabilities.counter_refresh_s), and sums bytes over its samples instead of averaging rates.

Restart defaults, and why not the paper's 1000 interrupts: at 10^4..10^5 interrupts/s, 1000
interrupts is 10-100 ms, shorter than one measurement window, so the search would never hold
an answer and every probe at a poor ITR would cost throughput. A full search here costs at most
15 windows (max_probes; ~50 s at 1-s ticks); holding for 600 intervals (10 min at 1-s ticks) or
30 million interrupts (5 min at 100K/s) keeps probing to a few percent of the time. Periodic
restarts are warm (bracket x/2..2x around the held rate: few, mild probes) and jittered per VF
(restart_jitter), because VFs sharing a port that search at the same time measure each other's
probes.

Change detection while holding (a new load gets a cold search over the full bracket): the
reference is the median of the first windows after convergence. A different mean packet size
is a different workload and restarts after two windows; a change of rate alone must last
load_change_s (30 s) in one direction, because bursts of a few seconds are not a new load and
chasing them costs more probes than it wins. Inside a search only the packet size counts.

Saturated ports (port_saturation): VFs on one PF share its 10 Gb/s. When the port's received
load is at its line rate, one VF's gain at a higher rate is a share taken from its neighbours
(the port's total does not move) and costs interrupts for nothing. There a search credits a
window with the VF's receive rate only up to its fair share of the port
(VfSample.port_rx_share_bps), so the plateau rule picks the lowest rate that still takes the
VF's share; a rate costlier than the incumbent must raise the port's total by port_gain (won
back of the VF's share), not just the VF's throughput by the noise margin; and a search stays
within warm_span of the rate in force, looking only for a cheaper rate when the VF has its
share. The port counts as saturated for port_memory_s after a window found it so: room that
neighbours' probes leave for a few seconds is not this VF's to keep. A port below its line
rate, or unknown, changes nothing.

Pure logic: the agent supplies samples and applies decisions.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, fields

from vftune.agent.itr_search import ItrSearch, bracket_from_capabilities
from vftune.agent.policy import VfPolicy
from vftune.itr import itr_label, quantize_itr, same_itr
from vftune.model import Capabilities, ItrDecision, VfSample

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
    rx_bits: float = 0.0
    # The port over the same window (bits), None when a sample did not show it.
    port_bits: float | None = None
    port_capacity_bits: float | None = None
    share_bits: float | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def port_load(self) -> float | None:
        """The port's received load as a share of its line rate."""
        if self.port_bits is None or not self.port_capacity_bits:
            return None
        return self.port_bits / self.port_capacity_bits

    def credited_bps(self, saturated: bool) -> float:
        """What a search is told: on a saturated port the VF's receive rate counts only up to
        its fair share of the port (the rest is taken from its neighbours); otherwise the rate
        as measured."""
        if not saturated or self.share_bits is None:
            return self.bps
        rx = min(self.rx_bits, self.share_bits)
        return (rx + self.bits - self.rx_bits) / self.duration

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
        self._rx_bits = 0.0
        self._packets = 0.0
        self._interrupts: int | None = 0
        self._port: list[float] | None = [0.0, 0.0, 0.0]  # bits, capacity bits, share bits

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
        self._rx_bits += s.rx_bps * s.dt
        self._packets += (s.rx_pps + s.tx_pps) * s.dt
        if s.port_rx_bps is None or s.port_rx_capacity_bps is None or s.port_rx_share_bps is None:
            self._port = None
        elif self._port is not None:
            self._port[0] += s.port_rx_bps * s.dt
            self._port[1] += s.port_rx_capacity_bps * s.dt
            self._port[2] += s.port_rx_share_bps * s.dt
        if s.interrupts is None or self._interrupts is None:
            self._interrupts = None
        else:
            self._interrupts += s.interrupts
        if s.fresh and s.t - self._origin >= self.window_s - _EPS:
            port: list[float | None] = list(self._port) if self._port else [None, None, None]
            w = Window(self._origin, s.t, self._bits, self._packets, self._interrupts, s.itr,
                       self._rx_bits, port[0], port[1], port[2])
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
    max_probes: int = 15  # measurements per search, the incumbent's included
    max_interval_us: float = 250.0  # plateau choice never goes below 4000/s
    restart_interrupts: int = 30_000_000
    restart_intervals: int = 600
    restart_jitter: float = 0.25  # each hold lasts x(1 +- jitter) of the above, per VF and search
    load_change: float = 0.3  # relative change of packet or bit rate that restarts ...
    load_change_s: float = 30.0  # ... once it has lasted this long (bursts are not a new load)
    size_change: float = 0.25  # relative change of the mean packet size: a different workload
    change_windows: int = 2  # consecutive windows beyond size_change (or idle) before restarting
    reference_windows: int = 3  # the held load's reference: median of this many windows
    min_throughput_bps: float = 1e6  # below this a VF is idle: nothing to tune
    warm_span: float = 2.0  # periodic restarts search [best/span, best*span]
    quantize: bool = True  # probe only rates the 82599 can deliver (2.048-us steps)
    max_apply_misses: int = 3  # samples showing another ITR than the probe before giving up
    # A port loaded to this share of its line rate is saturated, and stays so for port_memory_s
    # (room left by neighbours' probes is not the VF's to keep): there a search credits the VF
    # with at most its fair share (gains beyond it come from the neighbours). Above 1: never.
    port_saturation: float = 0.98
    port_memory_s: float = 60.0
    # On a saturated port the port's total is the objective: a rate costlier than the incumbent
    # must raise it by this share (what the VF can win back of its fair share), as the plateau
    # margin does for one VF.
    port_gain: float = 0.01

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
        for name in ("restart_interrupts", "restart_intervals", "change_windows", "max_apply_misses", "max_probes",
                     "reference_windows"):
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


def _interrupt_rate(w: Window | None) -> float | None:
    """Interrupts/s over a window, when the host shows them (not with posted interrupts)."""
    if w is None or not w.interrupts or w.duration <= 0:
        return None
    return w.interrupts / w.duration


def _median_window(windows: list[Window]) -> Window:
    """The window with the median bit rate: a typical one, not a burst's."""
    ordered = sorted(windows, key=lambda w: w.bps)
    return ordered[(len(ordered) - 1) // 2]


def _rel_change(now: float, ref: float) -> float:
    return abs(now - ref) / max(abs(ref), 1e-9)


@dataclass
class Convergence:
    """One search that ended: when, when it started, how many measurements, and the rate kept."""

    t: float
    started: float | None
    probes: int
    best: int


@dataclass(frozen=True)
class _Event:
    t: float
    text: str


IDLE, PROBING, HOLDING = "idle", "probing", "holding"


class SearchTuner(VfPolicy):
    """Golden-section ITR tuning for one VF, with restarts and change detection."""

    name = "vftune"

    def __init__(self, pci: str, caps: Capabilities, options: TunerOptions | dict[str, object] | None = None) -> None:
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
        # Restarts by cause: "periodic" (N interrupts / M intervals), "load" (change detected
        # while holding), "in_search" (the load moved under a running search).
        self.restarts: dict[str, int] = {"periodic": 0, "load": 0, "in_search": 0}
        self.last_event: str | None = None
        self.events: list[_Event] = []
        self.convergences: list[Convergence] = []
        self._misses = 0
        self._search_windows: dict[int, list[Window]] = {}
        self._baseline: Window | None = None
        self._reference: Window | None = None
        self._reference_windows: list[Window] = []
        self._last_window: Window | None = None
        self._changed_windows = 0
        self._shifted: list[Window] = []  # windows since the rate moved beyond load_change, one way
        self._held_interrupts = 0
        self._held_intervals = 0
        self._search_started_t = 0.0
        self._port_window: Window | None = None  # the last window that showed the port
        self._port_saturated_t = -math.inf  # end of the last window that found the port saturated
        self._capped_windows = 0  # this search's windows credited with the VF's port share only
        self._judged_windows = 0

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
            "port": self._port_state(),
        }

    def _port_state(self) -> dict[str, object] | None:
        """The VF's port over the last window that showed it: load, saturation, the VF's share."""
        w = self._port_window
        if w is None or w.port_load is None:
            return None
        return {
            "rx_bps": round(w.port_bits / w.duration) if w.port_bits is not None else None,
            "capacity_bps": round(w.port_capacity_bits / w.duration) if w.port_capacity_bits is not None else None,
            "load": round(w.port_load, 4),
            "saturated": self._saturated(w),  # at port_saturation within port_memory_s
            "share_bps": round(w.share_bits / w.duration) if w.share_bits is not None else None,
            "capped_windows": self._capped_windows,
        }

    def _measure(self, s: VfSample) -> Window | None:
        """The meter's next window, noting when it found the port saturated."""
        w = self.meter.add(s)
        if w is not None and w.port_load is not None:
            self._port_window = w
            if w.port_load >= self.options.port_saturation:
                self._port_saturated_t = w.end
        return w

    def _has_share(self, w: Window) -> bool:
        """Whether the VF lacks less of its share of the port than port_gain of the port's total:
        nothing a higher rate could win would count."""
        if w.share_bits is None or w.port_bits is None:
            return False
        return w.share_bits - w.rx_bits < self.options.port_gain * w.port_bits

    def _cost_margin(self, w: Window) -> float:
        """port_gain of the port's total as a share of the VF's throughput (at least the noise
        margin): what a costlier rate must gain on a saturated port."""
        o = self.options
        if w.port_bits is None or w.bits <= 0:
            return o.margin
        return max(o.margin, o.port_gain * w.port_bits / w.bits)

    def _saturated(self, w: Window) -> bool:
        return w.port_load is not None and w.end - self._port_saturated_t <= self.options.port_memory_s + _EPS

    def _credit(self, w: Window) -> float:
        """A window's throughput as a search is told it (see Window.credited_bps)."""
        self._judged_windows += 1
        credited = w.credited_bps(self._saturated(w))
        if credited < w.bps * (1.0 - 1e-6):
            self._capped_windows += 1
            self._note(w.end, f"port saturated ({w.port_load:.0%} of line rate now): judged on the VF's "
                              f"share of the port, {credited / 1e6:.0f} of {w.bps / 1e6:.0f} Mbit/s")
        return credited

    # ---- phases -----------------------------------------------------------------------

    def _step_idle(self, s: VfSample) -> ItrDecision | None:
        w = self._measure(s)
        if w is None or w.bps < self.options.min_throughput_bps:
            return None
        return self._begin(s, full=True, baseline=w, reason="start: traffic seen")

    def _step_probing(self, s: VfSample) -> ItrDecision | None:
        assert self.search is not None and self.probe_itr is not None
        if not same_itr(s.itr, self.probe_itr):
            self._misses += 1
            if self._misses > self.options.max_apply_misses:
                return self._abort(s, f"probe not applied: VF reports {s.itr}/s, asked {self.probe_itr}/s")
            self.meter.start(s.t, self.options.settle_s)
            return ItrDecision(self.probe_itr, f"probe {self.search.probes + 1}: re-apply {self.probe_itr}/s")
        self._misses = 0
        w = self._measure(s)
        if w is None:
            return None
        if w.bps < self.options.min_throughput_bps:
            return self._abort(s, f"abort: VF idle during probe ({w.bps / 1e6:.2f} Mbit/s)")
        changed = self._changed_during_search(w)
        if changed is not None:
            return self._begin(s, full=True, baseline=None, reason=f"restart: load changed {changed:.0%} during search")
        self._search_windows.setdefault(self.probe_itr, []).append(w)
        self.search.tell(self.probe_itr, self._credit(w))
        return self._next_probe(s)

    def _step_holding(self, s: VfSample) -> ItrDecision | None:
        self._held_intervals += 1
        interrupts_visible = s.interrupts is not None and not (s.interrupts == 0 and s.rx_pps + s.tx_pps > 0)
        if interrupts_visible:
            self._held_interrupts += int(s.interrupts or 0)
        w = self._measure(s)
        if w is not None:
            self._last_window = w
            decision = self._detect_change(s, w)
            if decision is not None or self.phase != HOLDING:
                return decision
        spread = self._hold_factor()
        if interrupts_visible and self._held_interrupts >= self.options.restart_interrupts * spread:
            reason = f"restart: {self._held_interrupts} interrupts since convergence"
        elif self._held_intervals >= self.options.restart_intervals * spread:
            reason = f"restart: {self._held_intervals} intervals since convergence"
        else:
            return None
        baseline = self._last_window if self._last_window and same_itr(self._last_window.itr, s.itr) else None
        return self._begin(s, full=False, baseline=baseline, reason=reason)

    def _hold_factor(self) -> float:
        """This hold's share of the periodic restart thresholds, 1 +- restart_jitter.

        VFs that converged together would otherwise restart together, and on a shared port one
        VF's probes move the others' throughput: each would measure its neighbours' probes.
        A hash of the PCI address and the search count spreads them, deterministically.
        """
        jitter = self.options.restart_jitter
        if jitter <= 0:
            return 1.0
        # A cryptographic digest, not CRC32: CRC is linear, so neighbouring PCI addresses would
        # get nearly the same jitter.
        digest = hashlib.blake2b(f"{self.pci}/{self.searches}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / float(1 << 64)
        return 1.0 + jitter * (2.0 * u - 1.0)

    def _detect_change(self, s: VfSample, w: Window) -> ItrDecision | None:
        """Restart when the held load is no longer the one the ITR was chosen for.

        The reference is the median of the first windows after convergence, so one burst does
        not become the reference. A new mean packet size is a different workload: restart after
        change_windows windows. A rate change alone may be a burst: restart only once every
        window for load_change_s has moved beyond load_change the same way (a search costs
        tens of seconds; chasing shorter excursions loses more than it gains).
        """
        o = self.options
        if self._reference is None:
            self._reference_windows.append(w)
            if len(self._reference_windows) >= o.reference_windows:
                self._reference = _median_window(self._reference_windows)
            return None
        ref = self._reference
        size = _rel_change(w.packet_bytes, ref.packet_bytes) if ref.packet_bytes > 0 and w.packets > 0 else 0.0
        rate = max(_rel_change(w.pps, ref.pps), _rel_change(w.bps, ref.bps))
        idle = w.bps < o.min_throughput_bps
        self._changed_windows = self._changed_windows + 1 if (size > o.size_change or idle) else 0
        direction = (1 if w.bps > ref.bps else -1) if rate > o.load_change else 0
        if direction == 0 or (self._shifted and (self._shifted[-1].bps > ref.bps) != (direction > 0)):
            self._shifted = []
        if direction:
            self._shifted.append(w)
        if self._changed_windows >= o.change_windows and idle:
            self._note(s.t, f"idle: load fell {rate:.0%}, holding {itr_label(s.itr)}")
            self.phase = IDLE
            self.meter.start(s.t, 0.0)
            return None
        if self._changed_windows >= o.change_windows:
            recent = self._shifted[-o.change_windows:] if len(self._shifted) >= o.change_windows else [w]
            return self._begin(s, full=True, baseline=_median_window(recent),
                               reason=f"restart: load changed: packet size {size:+.0%} ({ref.packet_bytes:.0f} -> "
                                      f"{w.packet_bytes:.0f} B)")
        if self._shifted and w.end - self._shifted[0].start >= o.load_change_s - _EPS:
            return self._begin(s, full=True, baseline=_median_window(self._shifted),
                               reason=f"restart: load changed {rate:.0%} for {w.end - self._shifted[0].start:.0f} s")
        return None

    # ---- transitions ------------------------------------------------------------------

    def _begin(self, s: VfSample, full: bool, baseline: Window | None, reason: str) -> ItrDecision | None:
        o = self.options
        low, high = self.full_bracket
        # A warm restart brackets the rate in force; under the VF's adaptive ITR (0) that is
        # the interrupt rate the host measured, when it can see one.
        centre = s.itr if s.itr > 0 else _interrupt_rate(baseline)
        saturated = baseline is not None and self._saturated(baseline)
        if centre and (saturated or not full):
            # On a saturated port a higher rate cannot raise the port's total, and rates far
            # above the VF's own only take its neighbours' shares: every search there stays
            # around the rate in force, and looks only for a cheaper one when the VF already
            # takes its share (one that lacks it climbs up to warm_span per search).
            low = max(low, int(centre / o.warm_span))
            has_share = baseline is not None and saturated and self._has_share(baseline)
            high = min(high, int(centre * (1.0 if has_share else o.warm_span)))
            if high <= low:
                low, high = self.full_bracket
        if saturated:
            reason += "; port saturated: judged on the VF's share of the port"
        self._capped_windows = 0
        self._judged_windows = 0
        self.search = ItrSearch(
            low,
            high,
            o.tolerance,
            rel_tolerance=o.rel_tolerance,
            margin=o.margin,
            plateau_margin=o.plateau_margin,
            harm_margin=o.harm_margin,
            max_repeats=o.max_repeats,
            max_probes=max(3, o.max_probes),
            max_interval_us=o.max_interval_us,
            incumbent=s.itr,
            incumbent_throughput=None if baseline is None or baseline.bps <= 0 else self._credit(baseline),
            incumbent_cost=_interrupt_rate(baseline),
            quantize=quantize_itr if o.quantize else None,
            cost_margin=self._cost_margin(baseline) if saturated and baseline is not None else o.margin,
        )
        self.searches += 1
        self.phase = PROBING
        self._baseline = baseline
        self._search_windows = {}
        self._reset_detection()
        self._search_started_t = s.t
        if reason.startswith("restart"):
            self.last_restart_reason = reason
            cause = "in_search" if "during search" in reason else "load" if "load changed" in reason else "periodic"
            self.restarts[cause] += 1
        return self._next_probe(s, prefix=f"{reason}; searching {low}..{high}/s")

    def _next_probe(self, s: VfSample, prefix: str | None = None) -> ItrDecision | None:
        assert self.search is not None
        itr = self.search.ask()
        if itr is None:
            return self._converge(s)
        self.probe_itr = itr
        self._misses = 0
        moved = not same_itr(itr, s.itr)
        self.meter.start(s.t, self.options.settle_s if moved else 0.0)
        what = "incumbent" if itr == self.search.incumbent and self.search.phase == "baseline" else ""
        text = f"probe {self.search.probes + 1}/{self.search.expected_probes()}: {itr_label(itr)}"
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
        if self._capped_windows:
            text += (f"; port saturated: judged on the VF's share of the port in {self._capped_windows} of "
                     f"{self._judged_windows} windows")
        self.convergences.append(Convergence(s.t, self._search_started_t, self.search.probes, best))
        self.phase = HOLDING
        self.held_itr = best
        self.probe_itr = None
        self._held_interrupts = 0
        self._held_intervals = 0
        self._reset_detection()
        self._last_window = None
        moved = not same_itr(best, s.itr)
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
        text = f"{why}; back to {itr_label(back)}"
        if not same_itr(back, s.itr):
            return ItrDecision(back, text)
        self._note(s.t, text)
        return None

    def _reset_detection(self) -> None:
        self._reference = None
        self._reference_windows = []
        self._changed_windows = 0
        self._shifted = []

    def _changed_during_search(self, w: Window) -> float | None:
        """A load change inside a search: the mean packet size moved (a different workload).

        Rates are not compared here: probes differ in rate by design, and a burst in one
        window is noise the search's margin and repeats deal with; a lasting rate change is
        caught once the search holds.
        """
        limit = self.options.size_change
        ref = self._baseline
        if ref is None and self._search_windows:
            ref = next(iter(self._search_windows.values()))[0]
        if ref is not None and ref.packet_bytes > 0 and w.packet_bytes > 0:
            change = _rel_change(w.packet_bytes, ref.packet_bytes)
            if change > limit:
                return change
        return None

    def _note(self, t: float, text: str) -> None:
        self.last_event = text
        self.events.append(_Event(t, text))
        del self.events[:-100]
