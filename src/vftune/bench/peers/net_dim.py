"""Peer policies vftune is benchmarked against, all behind the VfPolicy interface.

* ``paper``: Wu & Wang's search as printed, two fresh measurements per step in linear rate
  space and their wrong-end bug kept (LABELLED: it keeps High=TestHigh when the high point is
  better, so it walks away from a maximum), restarted every 1000 interrupts.
* ``net_dim``: Linux DIM, a port of lib/dim/net_dim.c and lib/dim/dim.c (6.1): a decision
  every 64 events, 10% significance, bytes/ms then packets/ms then events/ms, the
  PARKING_ON_TOP / PARKING_TIRED / GOING_LEFT / GOING_RIGHT tuner with a tired counter of 10,
  its five rx profiles mapped to 82599 rates (1e6/usec; the profiles' packet counts have no
  82599 equivalent and are dropped).
* ``ixgbe``: the PF driver's adaptive ITR (ixgbe_update_itr / ixgbe_set_itr) applied to a VF.
* ``default`` (the VF's own adaptive ITR, i.e. change nothing) and fixed rates from policy.py.

Counters: these algorithms run per interrupt in a driver with exact counters; here they see
one VfSample per tick. They are fed only on samples whose counters were refreshed, with the
counts accumulated since the previous refresh, so stale per-VF counters do not fool them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from vftune.agent.policy import FixedItr, Observe, VfPolicy
from vftune.agent.tuner import SearchTuner, WindowMeter
from vftune.itr import quantize_itr, same_itr
from vftune.model import Capabilities, ItrDecision, VfSample

# ---- the paper, literally ---------------------------------------------------------------

CUT_RATE = 0.618


class PaperSearch:
    """Wu & Wang's HEURISTIC INTERRUPT COALESCING ALGORITHM line by line, as ask/tell.

    PAPER BUG KEPT ON PURPOSE: ``if ThptLow < ThptHigh then High = TestHigh`` discards the
    better (upper) side, so on a unimodal curve it converges away from the maximum. This
    class exists only as a labelled baseline; vftune's search is itr_search.ItrSearch.
    """

    literal_bug = "keeps High=TestHigh when ThptLow < ThptHigh (wrong end for a maximisation)"

    def __init__(self, low: float, high: float, accept_interval: float) -> None:
        if not 0 < low < high:
            raise ValueError(f"need 0 < low < high, got low={low!r}, high={high!r}")
        if not accept_interval > 0:
            raise ValueError(f"accept_interval must be > 0, got {accept_interval!r}")
        self.low, self.high, self.accept = float(low), float(high), float(accept_interval)
        self.probes = 0
        self._results: dict[str, float] = {}
        self._tests: tuple[int, int] | None = None
        self.best: int | None = None
        self._plan()

    def _plan(self) -> None:
        interval = self.high - self.low
        if interval > self.accept:
            test_low = self.low + (1 - CUT_RATE) * interval
            test_high = self.low + CUT_RATE * interval
            self._tests = (int(round(test_low)), int(round(test_high)))
            self._results = {}
        else:
            self._tests = None
            self.best = int(round((self.low + self.high) / 2))

    def ask(self) -> int | None:
        if self._tests is None:
            return None
        return self._tests[0] if "low" not in self._results else self._tests[1]

    def tell(self, itr: float, throughput: float) -> None:
        asked = self.ask()
        if asked is None or int(round(itr)) != asked:
            raise ValueError(f"tell({itr!r}) does not match the rate asked, {asked}")
        self.probes += 1
        self._results["low" if "low" not in self._results else "high"] = throughput
        if len(self._results) < 2:
            return
        assert self._tests is not None
        if self._results["low"] < self._results["high"]:
            self.high = self._tests[1]  # the paper's line, wrong end kept (see class doc)
        else:
            self.low = self._tests[0]
        self._plan()

    @property
    def converged(self) -> bool:
        return self._tests is None


class PaperPolicy:
    """The paper's search on a VF, restarted every ``restart_interrupts`` interrupts."""

    name = "paper"

    def __init__(
        self,
        pci: str,
        caps: Capabilities,
        accept_interval: float = 1000.0,
        restart_interrupts: int = 1000,
        restart_intervals: int = 600,
        settle_s: float = 1.0,
        window_s: float = 2.0,
    ) -> None:
        self.pci = pci
        self.low, self.high = caps.itr_min, caps.itr_max
        self.accept = accept_interval
        self.restart_interrupts = restart_interrupts
        self.restart_intervals = restart_intervals
        self.settle_s = settle_s
        self.meter = WindowMeter(max(window_s, caps.counter_refresh_s))
        self.search: PaperSearch | None = None
        self.probe: int | None = None
        self.held = 0
        self.held_intervals = 0
        self.searches = 0

    def step(self, s: VfSample) -> ItrDecision | None:
        if self.search is None:
            return self._start(s)
        if self.search.converged:
            self.held_intervals += 1
            self.held += s.interrupts or 0
            if (s.interrupts is not None and self.held >= self.restart_interrupts) or (
                self.held_intervals >= self.restart_intervals
            ):
                return self._start(s)
            return None
        assert self.probe is not None
        w = self.meter.add(s)
        if w is None:
            return None
        self.search.tell(self.probe, w.bps)
        return self._next(s)

    def _start(self, s: VfSample) -> ItrDecision | None:
        self.search = PaperSearch(self.low, self.high, self.accept)
        self.searches += 1
        return self._next(s)

    def _next(self, s: VfSample) -> ItrDecision | None:
        assert self.search is not None
        itr = self.search.ask()
        if itr is None:
            best = self.search.best
            assert best is not None
            self.held, self.held_intervals = 0, 0
            if same_itr(best, s.itr):
                return None
            return ItrDecision(best, f"paper-literal converged: {best}/s after {self.search.probes} probes")
        # Tell the search the rate it asked for; the hardware runs the nearest step.
        self.probe = itr
        moved = not same_itr(quantize_itr(itr), s.itr)
        self.meter.start(s.t, self.settle_s if moved else 0.0)
        if moved:
            return ItrDecision(itr, f"paper-literal probe {self.search.probes + 1}: {itr}/s")
        return None


# ---- Linux net_dim ---------------------------------------------------------------------

DIM_NEVENTS = 64
NET_DIM_PARAMS_NUM_PROFILES = 5
NET_DIM_DEF_PROFILE = 1  # NET_DIM_DEF_PROFILE_CQE == NET_DIM_DEF_PROFILE_EQE == 1
RX_PROFILE_USECS = {"eqe": (1, 8, 64, 128, 256), "cqe": (2, 8, 16, 32, 64)}

# enum dim_state, dim_tune_state, dim_stats_state, dim_step_result
DIM_START_MEASURE, DIM_MEASURE_IN_PROGRESS, DIM_APPLY_NEW_PROFILE = 0, 1, 2
DIM_PARKING_ON_TOP, DIM_PARKING_TIRED, DIM_GOING_RIGHT, DIM_GOING_LEFT = 0, 1, 2, 3
DIM_STATS_WORSE, DIM_STATS_SAME, DIM_STATS_BETTER = 0, 1, 2
DIM_STEPPED, DIM_TOO_TIRED, DIM_ON_EDGE = 0, 1, 2
TUNE_STATE_NAMES = {0: "PARKING_ON_TOP", 1: "PARKING_TIRED", 2: "GOING_RIGHT", 3: "GOING_LEFT"}


def _bit_gap(bits: int, end: int, start: int) -> int:
    return ((end - start) + (1 << bits)) & ((1 << bits) - 1)


def _significant(val: int, ref: int) -> bool:
    """IS_SIGNIFICANT_DIFF: more than 10% apart, integer arithmetic as in dim.h."""
    return bool(ref) and (100 * abs(val - ref)) // ref > 10


@dataclass
class DimSample:
    time_us: int
    pkt_ctr: int  # u32
    byte_ctr: int  # u32
    event_ctr: int  # u16


@dataclass
class DimStats:
    ppms: int = 0
    bpms: int = 0
    epms: int = 0


class NetDim:
    """struct dim and net_dim() for one rx queue: feed samples, get profile changes."""

    def __init__(self, profile_ix: int = NET_DIM_DEF_PROFILE) -> None:
        self.state = DIM_START_MEASURE
        self.tune_state = DIM_PARKING_ON_TOP  # the struct is zeroed at allocation
        self.profile_ix = profile_ix
        self.steps_right = 0
        self.steps_left = 0
        self.tired = 0
        self.prev_stats = DimStats()
        self.start_sample = DimSample(0, 0, 0, 0)

    # dim.c
    def on_top(self) -> bool:
        if self.tune_state in (DIM_PARKING_ON_TOP, DIM_PARKING_TIRED):
            return True
        if self.tune_state == DIM_GOING_RIGHT:
            return self.steps_left > 1 and self.steps_right == 1
        return self.steps_right > 1 and self.steps_left == 1

    def turn(self) -> None:
        if self.tune_state == DIM_GOING_RIGHT:
            self.tune_state = DIM_GOING_LEFT
            self.steps_left = 0
        elif self.tune_state == DIM_GOING_LEFT:
            self.tune_state = DIM_GOING_RIGHT
            self.steps_right = 0

    def park_on_top(self) -> None:
        self.steps_right = self.steps_left = self.tired = 0
        self.tune_state = DIM_PARKING_ON_TOP

    def park_tired(self) -> None:
        self.steps_right = self.steps_left = 0
        self.tune_state = DIM_PARKING_TIRED

    @staticmethod
    def calc_stats(start: DimSample, end: DimSample) -> DimStats | None:
        delta_us = (end.time_us - start.time_us) & 0xFFFFFFFF
        if not delta_us:
            return None
        npkts = _bit_gap(32, end.pkt_ctr, start.pkt_ctr)
        nbytes = _bit_gap(32, end.byte_ctr, start.byte_ctr)
        ceil = lambda n, d: -(-n // d)  # noqa: E731  DIV_ROUND_UP
        return DimStats(
            ppms=ceil(npkts * 1000, delta_us),
            bpms=ceil(nbytes * 1000, delta_us),
            epms=ceil(DIM_NEVENTS * 1000, delta_us),  # sic: DIM_NEVENTS, not the events seen
        )

    # net_dim.c
    def step(self) -> int:
        if self.tired == NET_DIM_PARAMS_NUM_PROFILES * 2:
            return DIM_TOO_TIRED
        if self.tune_state == DIM_GOING_RIGHT:
            if self.profile_ix == NET_DIM_PARAMS_NUM_PROFILES - 1:
                return DIM_ON_EDGE
            self.profile_ix += 1
            self.steps_right += 1
        elif self.tune_state == DIM_GOING_LEFT:
            if self.profile_ix == 0:
                return DIM_ON_EDGE
            self.profile_ix -= 1
            self.steps_left += 1
        self.tired += 1
        return DIM_STEPPED

    def exit_parking(self) -> None:
        self.tune_state = DIM_GOING_LEFT if self.profile_ix else DIM_GOING_RIGHT
        self.step()

    def stats_compare(self, curr: DimStats, prev: DimStats) -> int:
        if not prev.bpms:
            return DIM_STATS_BETTER if curr.bpms else DIM_STATS_SAME
        if _significant(curr.bpms, prev.bpms):
            return DIM_STATS_BETTER if curr.bpms > prev.bpms else DIM_STATS_WORSE
        if not prev.ppms:
            return DIM_STATS_BETTER if curr.ppms else DIM_STATS_SAME
        if _significant(curr.ppms, prev.ppms):
            return DIM_STATS_BETTER if curr.ppms > prev.ppms else DIM_STATS_WORSE
        if not prev.epms:
            return DIM_STATS_SAME
        if _significant(curr.epms, prev.epms):
            return DIM_STATS_BETTER if curr.epms < prev.epms else DIM_STATS_WORSE
        return DIM_STATS_SAME

    def decision(self, curr: DimStats) -> bool:
        prev_state, prev_ix = self.tune_state, self.profile_ix
        if self.tune_state == DIM_PARKING_ON_TOP:
            if self.stats_compare(curr, self.prev_stats) != DIM_STATS_SAME:
                self.exit_parking()
        elif self.tune_state == DIM_PARKING_TIRED:
            self.tired -= 1
            if not self.tired:
                self.exit_parking()
        else:
            if self.stats_compare(curr, self.prev_stats) != DIM_STATS_BETTER:
                self.turn()
            if self.on_top():
                self.park_on_top()
            else:
                result = self.step()
                if result == DIM_ON_EDGE:
                    self.park_on_top()
                elif result == DIM_TOO_TIRED:
                    self.park_tired()
        if prev_state != DIM_PARKING_ON_TOP or self.tune_state != DIM_PARKING_ON_TOP:
            self.prev_stats = curr
        return self.profile_ix != prev_ix

    def net_dim(self, end: DimSample) -> bool:
        """One call of net_dim(); True when a new profile must be applied."""
        if self.state == DIM_MEASURE_IN_PROGRESS:
            nevents = _bit_gap(16, end.event_ctr, self.start_sample.event_ctr)
            if nevents < DIM_NEVENTS:
                return False
            curr = self.calc_stats(self.start_sample, end)
            if curr is None:
                return False
            if self.decision(curr):
                self.state = DIM_APPLY_NEW_PROFILE
                return True
            # fallthrough to DIM_START_MEASURE
        if self.state in (DIM_START_MEASURE, DIM_MEASURE_IN_PROGRESS):
            self.start_sample = end
            self.state = DIM_MEASURE_IN_PROGRESS
        return False

    def profile_applied(self) -> None:
        """What the driver's work item does after setting the moderation."""
        self.state = DIM_START_MEASURE


class NetDimPolicy:
    """net_dim driving a VF's ITR."""

    name = "net_dim"

    def __init__(self, pci: str, caps: Capabilities, cq_period_mode: str = "eqe") -> None:
        if cq_period_mode not in RX_PROFILE_USECS:
            raise ValueError(f"cq_period_mode must be eqe or cqe, got {cq_period_mode!r}")
        self.pci = pci
        self.itrs = tuple(
            int(min(caps.itr_max, max(caps.itr_min, 1e6 / u))) for u in RX_PROFILE_USECS[cq_period_mode]
        )
        self.dim = NetDim()
        self._packets = 0.0
        self._bytes = 0.0
        self._events = 0.0
        self._applied = False

    @property
    def itr(self) -> int:
        return self.itrs[self.dim.profile_ix]

    def step(self, s: VfSample) -> ItrDecision | None:
        self._packets += (s.rx_pps + s.tx_pps) * s.dt
        self._bytes += s.throughput_bps * s.dt / 8.0
        if s.interrupts is not None:
            self._events += s.interrupts
        else:  # posted interrupts: at most one per packet, at most the ITR
            self._events += min(s.rx_pps + s.tx_pps, s.itr or self.itr) * s.dt
        if not self._applied:  # the driver applies the default profile at open
            self._applied = True
            self.dim.profile_applied()
            if not same_itr(s.itr, self.itr):
                return ItrDecision(self.itr, f"net_dim: default profile {self.dim.profile_ix} ({self.itr}/s)")
        if not s.fresh:
            return None
        if self.dim.state == DIM_APPLY_NEW_PROFILE:
            self.dim.profile_applied()
        end = DimSample(
            time_us=int(round(s.t * 1e6)) & 0xFFFFFFFF,
            pkt_ctr=int(self._packets) & 0xFFFFFFFF,
            byte_ctr=int(self._bytes) & 0xFFFFFFFF,
            event_ctr=int(self._events) & 0xFFFF,
        )
        if self.dim.net_dim(end):
            state = TUNE_STATE_NAMES[self.dim.tune_state]
            return ItrDecision(self.itr, f"net_dim: profile {self.dim.profile_ix} ({self.itr}/s), {state}")
        return None


# ---- ixgbe's adaptive ITR on a VF --------------------------------------------------------

IXGBE_ITR_ADAPTIVE_MIN_INC = 2
IXGBE_ITR_ADAPTIVE_MIN_USECS = 10
IXGBE_ITR_ADAPTIVE_MAX_USECS = 126
IXGBE_ITR_ADAPTIVE_LATENCY = 0x80
IXGBE_ITR_ADAPTIVE_BULK = 0x00
IXGBE_20K_ITR = 200  # q_vector->itr at open with rx-usecs adaptive (usecs << 2)


@dataclass
class _RingContainer:
    itr: int = 0


def ixgbe_update_itr(ring: _RingContainer, q_itr: int, packets: int, nbytes: int, stale: bool) -> None:
    """ixgbe_update_itr() for one ring container; q_itr is q_vector->itr (usecs << 2)."""
    itr = IXGBE_ITR_ADAPTIVE_MIN_USECS | IXGBE_ITR_ADAPTIVE_LATENCY
    if stale:  # no update within a jiffy: go back to the latency default
        ring.itr = itr
        return
    if not packets:
        itr = min((q_itr >> 2) + IXGBE_ITR_ADAPTIVE_MIN_INC, IXGBE_ITR_ADAPTIVE_MAX_USECS)
        ring.itr = itr + (ring.itr & IXGBE_ITR_ADAPTIVE_LATENCY)
        return
    if packets < 4 and nbytes < 9000:
        itr = IXGBE_ITR_ADAPTIVE_LATENCY
    elif packets < 48:
        ring.itr = min((q_itr >> 2) + IXGBE_ITR_ADAPTIVE_MIN_INC, IXGBE_ITR_ADAPTIVE_MAX_USECS)
        return
    elif packets < 96:
        ring.itr = q_itr >> 2
        return
    elif packets < 256:
        ring.itr = max(q_itr >> 3, IXGBE_ITR_ADAPTIVE_MIN_USECS)
        return
    else:
        itr = IXGBE_ITR_ADAPTIVE_BULK
    # adjust_by_size
    avg = nbytes // packets
    if avg <= 60:
        avg = 5120
    elif avg <= 316:
        avg = avg * 40 + 2720
    elif avg <= 1084:
        avg = avg * 15 + 11452
    elif avg < 1968:
        avg = avg * 5 + 22420
    else:
        avg = 32256
    if itr & IXGBE_ITR_ADAPTIVE_LATENCY:
        avg >>= 1
    # 10 GbE link: DIV_ROUND_UP(avg, MIN_INC * 256) * MIN_INC
    itr += -(-avg // (IXGBE_ITR_ADAPTIVE_MIN_INC * 256)) * IXGBE_ITR_ADAPTIVE_MIN_INC
    ring.itr = itr


class IxgbeAdaptive:
    """ixgbe_set_itr() run per interrupt on the VF's single rx/tx vector.

    Per tick the policy replays the driver's per-interrupt updates with the average packets
    and bytes per interrupt that the offered load gives at the current delay, until the delay
    stops moving (or a bounded number of interrupts), then sets the VF's rate to 1e6/usecs.
    """

    name = "ixgbe"
    hz = 250  # jiffies per second for the "no update within a jiffy" rule
    max_replay = 2000

    def __init__(self, pci: str, caps: Capabilities) -> None:
        self.pci = pci
        self.caps = caps
        self.q_itr = IXGBE_20K_ITR
        self.rx = _RingContainer(IXGBE_ITR_ADAPTIVE_MIN_USECS | IXGBE_ITR_ADAPTIVE_LATENCY)
        self.tx = _RingContainer(IXGBE_ITR_ADAPTIVE_MIN_USECS | IXGBE_ITR_ADAPTIVE_LATENCY)
        self._acc = [0.0, 0.0, 0.0, 0.0, 0.0]  # rx pkts, rx bytes, tx pkts, tx bytes, seconds
        self._started = False

    @property
    def usecs(self) -> int:
        return self.q_itr >> 2

    @property
    def itr(self) -> int:
        return int(min(self.caps.itr_max, max(self.caps.itr_min, 1e6 / max(self.usecs, 1))))

    def step(self, s: VfSample) -> ItrDecision | None:
        acc = self._acc
        acc[0] += s.rx_pps * s.dt
        acc[1] += s.rx_bps * s.dt / 8.0
        acc[2] += s.tx_pps * s.dt
        acc[3] += s.tx_bps * s.dt / 8.0
        acc[4] += s.dt
        first = not self._started and not same_itr(s.itr, self.itr)
        self._started = True
        if not s.fresh or acc[4] <= 0:
            return ItrDecision(self.itr, f"ixgbe adaptive: start at {self.usecs} us") if first else None
        rx_pps, rx_Bps, tx_pps, tx_Bps = (v / acc[4] for v in acc[:4])
        self._acc = [0.0] * 5
        before = self.usecs
        self._replay(rx_pps, rx_Bps, tx_pps, tx_Bps)
        if self.usecs != before or not same_itr(s.itr, self.itr):
            per_irq = (rx_pps + tx_pps) * self._spacing_us(rx_pps + tx_pps) / 1e6
            return ItrDecision(self.itr, f"ixgbe adaptive: {per_irq:.0f} pkts/irq -> {self.usecs} us")
        return None

    def _spacing_us(self, pps: float) -> float:
        """Time between interrupts: the throttle delay, or the packet gap when longer."""
        gap = 1e6 / pps if pps > 0 else math.inf
        return max(float(self.usecs), gap)

    def _replay(self, rx_pps: float, rx_Bps: float, tx_pps: float, tx_Bps: float) -> None:
        seen: set[tuple[int, int, int]] = set()
        for _ in range(self.max_replay):
            spacing = self._spacing_us(rx_pps + tx_pps)
            stale = spacing > 1e6 / self.hz
            for ring, pps, Bps in ((self.tx, tx_pps, tx_Bps), (self.rx, rx_pps, rx_Bps)):
                packets = int(round(pps * spacing / 1e6)) if math.isfinite(spacing) else 0
                nbytes = int(round(Bps * spacing / 1e6)) if math.isfinite(spacing) else 0
                ixgbe_update_itr(ring, self.q_itr, packets, nbytes, stale)
            new_itr = (min(self.rx.itr, self.tx.itr) & ~IXGBE_ITR_ADAPTIVE_LATENCY) << 2
            self.q_itr = new_itr
            key = (self.q_itr, self.rx.itr, self.tx.itr)
            if key in seen:  # a fixed point or a cycle: the driver would sit here
                return
            seen.add(key)


# ---- registry ---------------------------------------------------------------------------

PolicyFactory = Callable[[str, Capabilities], VfPolicy]


def _fixed(itr: int) -> PolicyFactory:
    return lambda pci, caps: FixedItr(itr)


PEERS: dict[str, PolicyFactory] = {
    "vftune": lambda pci, caps: SearchTuner(pci, caps),
    "default": lambda pci, caps: Observe(),
    "fixed-8000": _fixed(8000),
    "fixed-20000": _fixed(20000),
    "fixed-100000": _fixed(100000),
    "paper": lambda pci, caps: PaperPolicy(pci, caps),
    "net_dim": lambda pci, caps: NetDimPolicy(pci, caps),
    "ixgbe": lambda pci, caps: IxgbeAdaptive(pci, caps),
}


def make_policy(name: str, pci: str, caps: Capabilities) -> VfPolicy:
    try:
        factory = PEERS[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(PEERS)}") from None
    return factory(pci, caps)
