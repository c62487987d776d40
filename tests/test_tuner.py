"""SearchTuner's state machine on a synthetic VfSample stream (not the simulator).

The synthetic VF delivers curve(itr) bits/s, exposes its byte counters only every
``refresh`` ticks like unpatched ixgbe, and counts one interrupt per packet up to the ITR.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from vftune.control.objective import LATENCY_MAX_INTERVAL_US, Goal, Objective
from vftune.control.tuner import Phase, SearchTuner, TunerOptions, WindowMeter
from vftune.itr import quantize_itr
from vftune.model import Capabilities, ItrDecision, VfSample

PCI = "0000:03:10.0"
ADAPTIVE_RATE = 20_000  # what the VF's own adaptive ITR runs at in this synthetic VF


def curve(peak: float, top: float = 5e9) -> Callable[[float], float]:
    return lambda r: top * math.exp(-((math.log(r / peak) / 1.5) ** 2))


@dataclass
class SyntheticVf:
    f: Callable[[float], float]
    refresh: int = 1
    noise: float = 0.0
    seed: int = 0
    irq_visible: bool = True
    packet_bytes: float = 1500.0
    dropped: Callable[[int], float] | None = None  # share its guest's sockets drop at a setting
    drops_shared: bool = False  # the guest owns other VFs: its drops come as this VF's share
    livelock_above: float | None = None  # above this rate the guest takes nothing off its ring
    quantize: Callable[[float], int] = quantize_itr  # the rates its NIC delivers
    itr: int = 0
    t: int = 0
    decisions: list[tuple[int, ItrDecision]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.true_bits = 0.0
        self.shown_bits = 0.0
        self.last_shown = 0.0

    def rate(self) -> float:
        return self.itr or ADAPTIVE_RATE

    def sample(self) -> VfSample:
        self.t += 1
        bps = self.f(self.rate()) * (1 + self.rng.gauss(0, self.noise))
        self.true_bits += bps
        fresh = self.t % self.refresh == 0
        if fresh:
            self.shown_bits = self.true_bits
        delta, self.last_shown = self.shown_bits - self.last_shown, self.shown_bits
        pps = delta / 8 / self.packet_bytes
        irqs = int(min(self.rate(), bps / 8 / self.packet_bytes)) if self.irq_visible else None
        if self.livelock_above is not None and self.rate() > self.livelock_above:
            # Receive livelock: interrupts at the full rate, nothing taken off the ring.
            self.shown_bits = self.last_shown = self.true_bits = self.true_bits - bps
            pps, delta = 0.0, 0.0
            irqs = int(self.rate()) if self.irq_visible else None
        return VfSample(
            pci=PCI, pf="enp3s0f0", t=float(self.t), dt=1.0, rx_pps=pps, rx_bps=delta,
            tx_pps=0.0, tx_bps=0.0,
            interrupts_per_s=None if irqs is None else float(irqs), interrupts=irqs,
            itr=self.itr, guest_cpu=None, fresh=fresh,
            rx_dropped_pps=None if self.dropped is None or self.drops_shared else pps * self.dropped(self.itr),
            rx_dropped_share_pps=pps * self.dropped(self.itr) if self.dropped and self.drops_shared else None,
        )

    def run(self, tuner: SearchTuner, ticks: int) -> None:
        for _ in range(ticks):
            d = tuner.step(self.sample())
            if d is not None:
                self.decisions.append((self.t, d))
                self.itr = self.quantize(d.itr) if d.itr else 0


def at_the_knee(f: Callable[[float], float], held: float, peak: float) -> bool:
    """Where balanced (the default) holds: the fewest interrupts within 3% of the peak's merit."""
    return f(held) >= 0.97 * f(peak) * 0.995 and held <= peak * 1.05


def caps(refresh: float = 2.0) -> Capabilities:
    return Capabilities(backend="synthetic", vf_itr=True, counter_refresh_s=refresh)


def test_cold_search_converges_near_the_peak_and_then_holds_still():
    vf = SyntheticVf(curve(48_000))
    tuner = SearchTuner(PCI, caps())
    vf.run(tuner, 120)
    st = tuner.state()
    assert st["phase"] == "holding"
    # Balanced (the default) holds the knee: the fewest interrupts within 3% of the peak's merit.
    assert at_the_knee(vf.f, st["held_itr"], 48_000)
    assert st["probes"] <= 15
    # The VF runs its adaptive ITR: the first probe measures it, and writes it anyway (the
    # patched PF makes a VF it was just written to fetch the next probe's rate sooner).
    first = tuner.events[0]
    assert first.cause == "start" and first.text().startswith("start: traffic seen") and "probe: 1 of" in first.text()
    assert "adaptive (incumbent)" in first.text()
    assert (vf.decisions[0][1].cause, vf.decisions[0][1].itr) == ("start", 0)
    assert vf.decisions[1][1].cause == "probe" and vf.decisions[1][1].itr > 0
    converged = [d.reason for _, d in vf.decisions if d.cause == "converged"]
    assert len(converged) <= 1 and "vs incumbent" in (converged or [tuner.state()["last_event"]])[0]
    # Steady state: nothing changes for the next 5 minutes.
    before = len(vf.decisions)
    vf.run(tuner, 300)
    assert len(vf.decisions) == before


def test_each_probe_settles_and_measures_at_least_the_counter_period():
    vf = SyntheticVf(curve(20_000))
    tuner = SearchTuner(PCI, caps(2.0), {"settle_s": 1.0, "window_s": 1.0})
    vf.run(tuner, 60)
    times = [t for t, _ in vf.decisions]
    # Window >= 2 s (the refresh period, not the 1-s option) plus the settle tick: >= 3 ticks apart.
    assert all(b - a >= 3 for a, b in zip(times, times[1:]))


def test_two_second_stale_counters_measure_like_fresh_ones():
    fresh = SyntheticVf(curve(30_000), refresh=1)
    stale = SyntheticVf(curve(30_000), refresh=2)
    t_fresh, t_stale = SearchTuner(PCI, caps(2.0)), SearchTuner(PCI, caps(2.0))
    fresh.run(t_fresh, 150)
    stale.run(t_stale, 150)
    # The zero / doubled 1-s deltas never reach the search: every told value is the true rate.
    f = curve(30_000)
    for probe in t_stale.search.history:
        if probe.itr == 0:
            continue  # the adaptive ITR, measured first: not on the curve
        assert probe.throughput == pytest.approx(f(probe.itr), rel=1e-6)
    assert t_stale.state()["held_itr"] == t_fresh.state()["held_itr"]


def test_restart_after_n_interrupts_is_warm():
    vf = SyntheticVf(curve(10_000))
    tuner = SearchTuner(PCI, caps(), {"restart_interrupts": 200_000, "restart_s": 10_000})
    vf.run(tuner, 200)
    assert tuner.searches >= 2
    reason = tuner.state()["last_restart_reason"]
    assert reason.startswith("restart-periodic:") and "interrupts since convergence" in reason
    # Warm: the second search brackets the rate held before it (a x4 span around it), not the
    # whole 956..488281 range.
    reasons = [d.reason for _, d in vf.decisions]
    first_restart = next(i for i, r in enumerate(reasons) if "interrupts since convergence" in r)
    held = vf.decisions[first_restart - 1][1].itr  # the rate in force when the restart came
    low, high = (int(x) for x in re.search(r"searching (\d+)\.\.(\d+)/s", reasons[first_restart]).groups())
    assert low < held < high and high / low == pytest.approx(4, rel=0.01)


def test_without_visible_interrupts_only_seconds_restart():
    vf = SyntheticVf(curve(10_000), irq_visible=False)
    tuner = SearchTuner(PCI, caps(), {"restart_interrupts": 1, "restart_s": 40})
    vf.run(tuner, 140)
    assert tuner.searches >= 2
    assert "s since convergence" in tuner.state()["last_restart_reason"]
    assert tuner.state()["held_interrupts"] == 0


def test_load_change_restarts_and_reconverges_within_20_probes():
    phase = {"peak": 48_000, "top": 5e9}
    vf = SyntheticVf(lambda r: curve(phase["peak"], phase["top"])(r), noise=0.005, seed=4)
    tuner = SearchTuner(PCI, caps())
    vf.run(tuner, 150)
    assert tuner.state()["phase"] == "holding"
    phase.update(peak=6_000, top=2.5e9)  # fewer, busier guests: half the load, lower best rate
    vf.run(tuner, 150)
    st = tuner.state()
    assert st["last_restart_reason"].startswith("restart-load:")
    assert st["phase"] == "holding" and st["probes"] <= 20
    assert abs(math.log(st["held_itr"] / 6_000)) < math.log(1.3)


def test_idle_vf_is_left_alone_and_traffic_starts_a_search():
    level = {"bps": 0.0}
    vf = SyntheticVf(lambda r: level["bps"])
    tuner = SearchTuner(PCI, caps())
    vf.run(tuner, 30)
    assert vf.decisions == [] and tuner.state()["phase"] == "idle"
    level["bps"] = 3e9
    vf.run(tuner, 10)
    assert tuner.state()["phase"] == "probing"


def test_a_rate_that_livelocks_the_guest_is_not_held_as_idle():
    """A flood the guest cannot take at the held rate: interrupts at that rate and no traffic
    (receive livelock, as on a NIC without NAPI). Counters alone read it as an idle VF; the
    interrupts say otherwise. The tuner leaves the rate for the guest's adaptive ITR at once,
    forgets it for the class, and searches below the livelock."""
    load = {"f": curve(90_000)}
    vf = SyntheticVf(lambda r: load["f"](r))
    tuner = SearchTuner(PCI, caps(1.0))
    vf.run(tuner, 120)
    held = vf.itr
    assert tuner.state()["phase"] == "holding" and held > 40_000
    load["f"] = curve(9_000, top=1e9)  # small packets: the guest now livelocks above 30000/s
    vf.livelock_above = 30_000
    vf.run(tuner, 6)
    starved = [e for e in tuner.events if e.cause == "restart-starved"]
    assert starved and "receive livelock" in starved[0].text()
    assert vf.itr == 0  # the first probe: the guest's own adaptive ITR, written at once
    vf.run(tuner, 120)
    assert tuner.state()["phase"] == "holding" and 0 < vf.itr <= 30_000
    assert tuner.restarts["starved"] == 1


def test_balanced_walks_a_flat_plateau_below_the_throughput_objectives_delay_bound():
    """Bulk throughput that holds down to 1500 interrupts/s: balanced (the default) takes that
    knee, which costs fewer interrupts than throughput's 250-us bound (4000/s) allows, and the
    merit, not a delay bound, is what stops it."""
    def f(r: float) -> float:
        return 4e9 if r >= 1_500 else 3e9

    held = {}
    for goal in (Goal(Objective.BALANCED), Goal(Objective.THROUGHPUT)):
        vf = SyntheticVf(f)
        tuner = SearchTuner(PCI, caps(), goal=goal)
        vf.run(tuner, 200)
        assert tuner.state()["phase"] == "holding"
        held[goal.objective] = tuner.state()["held_itr"]
    assert 1_500 <= held[Objective.BALANCED] < 2_000
    assert held[Objective.THROUGHPUT] >= 1e6 / 250 * 0.99


def test_a_nic_with_longer_intervals_is_searched_down_to_its_own_lowest_rate():
    """A host whose NIC counts its interval in 1.024-us units down to 305/s (an e1000's delay
    register): an overloaded receiver, whose applications get more the fewer interrupts take
    its guest's CPU, is held at that NIC's lowest rate, not at the 82599's 956/s."""
    nic = Capabilities(backend="synthetic", vf_itr=True, counter_refresh_s=2.0, itr_min=305, itr_max=976_562,
                       itr_unit_us=1.024)
    vf = SyntheticVf(lambda r: 1e9, dropped=lambda itr: min(0.95, (itr or ADAPTIVE_RATE) / 1000), quantize=nic.quantize)
    tuner = SearchTuner(PCI, nic)
    vf.run(tuner, 120)
    assert tuner.state()["phase"] == "holding"
    assert tuner.state()["held_itr"] == 305
    assert all(nic.quantize(d.itr) == d.itr for _, d in vf.decisions if d.itr)  # only rates the NIC delivers


def test_a_quiet_vf_with_a_few_housekeeping_interrupts_is_idle():
    vf = SyntheticVf(curve(90_000))
    tuner = SearchTuner(PCI, caps(1.0))
    vf.run(tuner, 120)
    vf.f = lambda r: 4 * 90 * 8  # ARP and keepalives: a few packets, an interrupt each
    vf.run(tuner, 10)
    assert tuner.state()["phase"] == "idle" and tuner.restarts["starved"] == 0


def test_a_probe_the_host_does_not_apply_is_retried_then_abandoned():
    vf = SyntheticVf(curve(48_000))
    tuner = SearchTuner(PCI, caps(), {"max_apply_misses": 2})
    decisions = []
    for _ in range(40):  # the host ignores every decision: the VF stays adaptive
        d = tuner.step(vf.sample())
        if d:
            decisions.append(d)
        if tuner.state()["last_cause"] == "abort":
            break
    assert any(d.cause == "reapply" for d in decisions)
    assert tuner.state()["phase"] == "idle"
    assert "probe not applied" in tuner.state()["last_event"]


@dataclass
class FetchingVf(SyntheticVf):
    """A patched VF that takes the host's request `delay` ticks after the write: until then it
    runs the old rate, and its samples say a write is pending (as the agent's loop marks them)."""

    delay: int = 2
    pending: tuple[int, int] | None = None  # (rate asked, tick it is taken)

    def sample(self) -> VfSample:
        if self.pending is not None and self.t + 1 >= self.pending[1]:
            self.itr, self.pending = self.pending[0], None  # fetched at the start of this tick
        s = super().sample()
        return s if self.pending is None else replace(s, itr_pending=self.pending[0])

    def run(self, tuner: SearchTuner, ticks: int) -> None:
        for _ in range(ticks):
            d = tuner.step(self.sample())
            if d is not None:
                self.decisions.append((self.t, d))
                asked = quantize_itr(d.itr) if d.itr else 0
                if asked != self.itr:
                    self.pending = (asked, self.t + 1 + self.delay)


def test_a_write_the_vf_takes_later_is_waited_for_not_measured_or_retried():
    peak = 48_000
    vf = FetchingVf(curve(peak), delay=2)
    tuner = SearchTuner(PCI, caps())
    vf.run(tuner, 200)
    st = tuner.state()
    assert st["phase"] == "holding" and at_the_knee(vf.f, st["held_itr"], peak)
    assert not [d for _, d in vf.decisions if d.cause in ("reapply", "abort")]
    # Each probe's window started once its rate was in force: the search saw the curve itself.
    search = tuner.convergences[-1]
    assert search.probes <= 15
    # Without the pending mark the same delays make every window measure the previous probe.
    blind = FetchingVf(curve(peak), delay=2)
    blind_tuner = SearchTuner(PCI, caps())
    for _ in range(200):
        s = blind.sample()
        d = blind_tuner.step(replace(s, itr_pending=None, itr=blind.pending[0] if blind.pending else s.itr))
        if d is not None:
            asked = quantize_itr(d.itr) if d.itr else 0
            if asked != blind.itr:
                blind.pending = (asked, blind.t + 1 + blind.delay)
    blind_held = blind_tuner.state()["held_itr"]
    assert not blind_held or abs(math.log(blind_held / peak)) > abs(math.log(st["held_itr"] / peak))


def test_window_meter_never_counts_across_a_pending_write():
    meter = WindowMeter(1.0)
    meter.start(change_t=10.0, settle_s=0.0)

    def s(t: float, bps: float, pending: int | None = None) -> VfSample:
        return VfSample(PCI, "pf", t, 1.0, bps / 12000, bps, 0, 0, None, None, 5000, None, True,
                        itr_pending=pending)

    assert meter.add(s(11, 1e9)) is None  # opens
    assert meter.add(s(12, 9e9, pending=20_000)) is None  # a write on its way: start again after it
    assert meter.add(s(13, 9e9)) is None  # the VF switched inside this second: it only opens
    w = meter.add(s(14, 2e9))
    assert w is not None and (w.start, w.end) == (13.0, 14.0) and w.bps == pytest.approx(2e9)


def test_window_meter_never_counts_across_ticks_it_was_not_given():
    """A VF missing from two snapshots (its PF's netlink read failed) comes back with a sample
    over one tick: the window that was open must not read the missing half second as silence."""
    meter = WindowMeter(1.0)
    meter.start(change_t=10.0, settle_s=0.0)

    def s(t: float) -> VfSample:
        return VfSample(PCI, "pf", t, 0.25, 1e5, 1e9, 0, 0, None, None, 5000, None, True)

    windows = [w for t in (10.25, 10.5, 10.75, 11.0, 11.25, 11.5, 12.25, 12.5, 12.75, 13.0, 13.25, 13.5)
               if (w := meter.add(s(t))) is not None]
    assert [(w.start, w.end) for w in windows] == [(10.25, 11.25), (12.25, 13.25)]
    assert all(w.bps == pytest.approx(1e9) for w in windows)


def test_state_reports_what_the_tuner_does():
    tuner = SearchTuner(PCI, caps())
    st = tuner.state()
    assert (st["phase"], st["probes"], st["best"], st["searches"]) == ("idle", 0, None, 0)
    assert st["bracket"] == [956, 488281]
    vf = SyntheticVf(curve(10_000))
    vf.run(tuner, 60)
    st = tuner.state()
    assert st["phase"] == "holding" and st["searches"] == 1 and st["last_restart_reason"] is None
    assert st["held_itr"] == st["best"] == st["itr"] == vf.itr  # what the VF runs now
    assert st["incumbent"] == 0  # the VF's own adaptive ITR, measured first
    low, high = st["bracket"]
    assert high / low < 1.5  # narrowed from 956..488281
    assert st["last_event"].startswith("converged") and f"{vf.itr}/s" in st["last_event"]


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="settle_s"):
        TunerOptions(settle_s=-1)
    with pytest.raises(ValueError, match="unknown tuner option 'windw_s'"):
        SearchTuner(PCI, caps(), {"windw_s": 2})
    with pytest.raises(ValueError, match="warm_span"):
        TunerOptions(warm_span=1.0)


def test_window_meter_cuts_on_fresh_samples_after_settle():
    meter = WindowMeter(2.0)
    meter.start(change_t=10.0, settle_s=1.0)

    def s(t: float, bps: float, fresh: bool) -> VfSample:
        return VfSample(PCI, "pf", t, 1.0, bps / 12000, bps, 0, 0, None, None, 5000, None, fresh)

    assert meter.add(s(11, 9e9, True)) is None  # opens the window; its bytes are settling
    assert meter.add(s(12, 0.0, False)) is None  # stale: counters did not move
    w = meter.add(s(13, 4e9, True))  # the refresh carries both seconds
    assert w is not None and w.duration == 2.0 and w.bps == pytest.approx(2e9)


def test_a_burst_while_holding_does_not_restart_but_a_lasting_change_does():
    level = {"gain": 1.0}
    vf = SyntheticVf(lambda r: curve(20_000)(r) * level["gain"], noise=0.005, seed=2)
    tuner = SearchTuner(PCI, caps())
    vf.run(tuner, 150)
    assert tuner.state()["phase"] == "holding"
    searches = tuner.searches
    level["gain"] = 1.5  # a 12-second burst of extra load
    vf.run(tuner, 12)
    level["gain"] = 1.0
    vf.run(tuner, 60)
    assert tuner.searches == searches and tuner.restarts["load"] == 0
    level["gain"] = 1.5  # the same step, now for good: restarts once it has lasted load_change_s
    start = vf.t
    vf.run(tuner, 45)
    assert tuner.restarts["load"] == 1
    restart_t = next(t for t, d in vf.decisions if t > start and d.cause == "restart-load")
    assert 30 <= restart_t - start <= 36
    assert "for 3" in tuner.state()["last_restart_reason"]


def test_a_new_packet_size_is_a_new_workload_and_restarts_within_a_few_windows():
    vf = SyntheticVf(curve(10_000), noise=0.005, seed=3)
    tuner = SearchTuner(PCI, caps())
    vf.run(tuner, 150)
    assert tuner.state()["phase"] == "holding"
    vf.packet_bytes = 300.0  # same bits, five times the packets: request/response instead of bulk
    start = vf.t
    vf.run(tuner, 12)
    restart = [(t, d.reason) for t, d in vf.decisions if t > start and d.cause == "restart-load"]
    assert restart and restart[0][0] - start <= 8
    assert "load changed to bulk/small" in restart[0][1] and tuner.restarts["load"] == 1


def test_vfs_that_converged_together_do_not_restart_together():
    options = {"restart_s": 100, "restart_interrupts": 10**12}
    pcis = ["0000:03:10.0", "0000:03:10.2", "0000:03:10.4"]
    first_restart = []
    for pci in pcis:
        vf = SyntheticVf(curve(20_000))
        tuner = SearchTuner(pci, caps(), options)
        for _ in range(400):
            d = tuner.step(replace(vf.sample(), pci=pci))
            if d is not None:
                vf.decisions.append((vf.t, d))
                vf.itr = quantize_itr(d.itr) if d.itr else 0
        first_restart.append(next(t for t, d in vf.decisions if d.cause == "restart-periodic"))
        # Each hold lasts 100 s +- 25%.
        assert tuner.restarts["periodic"] >= 2
    assert len(set(first_restart)) == len(pcis)
    assert max(first_restart) - min(first_restart) >= 5


@dataclass
class SharedPortVf(SyntheticVf):
    """A VF on a port whose other users fill it: the port shows `load` of its line rate and the
    VF's fair share is `share` bits/s; what the VF takes above that comes from its neighbours."""

    load: float = 1.0
    share: float = 1e9

    def sample(self) -> VfSample:
        capacity = 9.87e9
        return replace(super().sample(), port_rx_bps=self.load * capacity, port_rx_capacity_bps=capacity,
                       port_rx_share_bps=self.share)


def rising(r: float) -> float:
    """Throughput that keeps rising with the rate: 1 Gb/s at 10000/s, 1.5 Gb/s from 22500/s."""
    return 1e9 * min(1.5, math.sqrt(r / 10_000))


def test_on_a_saturated_port_a_vf_takes_its_share_at_the_lowest_rate():
    alone = SyntheticVf(rising)
    t_alone = SearchTuner(PCI, caps())
    alone.run(t_alone, 120)
    # Judged on its own throughput, the VF buys the neighbours' share with interrupts.
    assert t_alone.state()["held_itr"] > 20_000
    shared = SharedPortVf(rising, share=1e9)
    t_shared = SearchTuner(PCI, caps())
    shared.run(t_shared, 120)
    st = t_shared.state()
    # Judged on its share of the saturated port: the lowest rate that still takes 1 Gb/s.
    assert st["phase"] == "holding" and 9_000 <= st["held_itr"] <= 12_000
    assert st["port"]["saturated"] and st["port"]["share_bps"] == 1e9
    first = t_shared.events[0].text()  # measures the adaptive ITR in force first: no write
    assert first.startswith("start:") and "port saturated: judged on the VF's share of the port" in first
    # It already had its share under the adaptive rate (20000/s): it only looked below that, down
    # to the range's end (balanced, the default, gives up a margin for fewer interrupts).
    assert f"searching {t_shared.full_bracket[0]}..20000/s" in first


def test_on_a_saturated_port_the_efficiency_objective_looks_down_to_the_lowest_rate():
    """Its share holds down to 2500/s. The throughput objective looks only from half the adaptive
    ITR's rate up to it (its gain can only come from the neighbours); efficiency wants the lowest
    rate that holds the share, however far below that it lies."""
    def flat(r: float) -> float:
        return 1e9 * min(1.0, r / 2_500)

    held = {}
    for objective in (Objective.THROUGHPUT, Objective.EFFICIENCY):
        vf = SharedPortVf(flat, share=1e9)
        tuner = SearchTuner(PCI, caps(), goal=Goal(objective))
        vf.run(tuner, 150)
        assert tuner.state()["phase"] == "holding"
        held[objective] = tuner.state()["held_itr"]
        low = tuner.full_bracket[0] if objective is Objective.EFFICIENCY else 10_000
        assert f"searching {low}..20000/s" in tuner.events[0].text()
    assert 10_000 <= held[Objective.THROUGHPUT] <= 12_000
    assert 2_250 <= held[Objective.EFFICIENCY] <= 3_600  # within its 10% of the share: 2250/s


def test_a_port_below_its_line_rate_judges_the_vf_as_before():
    busy = SharedPortVf(rising, load=0.9, share=1e9)
    tuner = SearchTuner(PCI, caps())
    busy.run(tuner, 120)
    assert tuner.state()["held_itr"] > 20_000
    assert not tuner.state()["port"]["saturated"]
    assert not any("port saturated" in d.reason for _, d in busy.decisions)


def test_periodic_searches_on_a_saturated_port_look_only_for_a_cheaper_rate():
    shared = SharedPortVf(rising, share=1e9)
    tuner = SearchTuner(PCI, caps(), {"restart_s": 60, "restart_jitter": 0.0})
    shared.run(tuner, 200)
    restarts = [d.reason for _, d in shared.decisions if d.cause == "restart-periodic"]
    assert restarts
    held = tuner.convergences[0].best
    searched = restarts[0].split("searching ")[1].split("/s")[0]
    low, high = (int(x) for x in searched.split(".."))
    assert low < held and high == pytest.approx(held, rel=0.05)


def two_loads(vf_state: dict[str, float]) -> Callable[[float], float]:
    """Bulk (1500-byte packets) peaks at 48000/s; small packets (300 B) at 8000/s."""
    return lambda r: curve(48_000 if vf_state["bytes"] >= 1000 else 8_000)(r)


def learned_two_loads(tuner: SearchTuner) -> tuple[SyntheticVf, dict[str, float], int, int]:
    """A VF that ran bulk, then small packets, each until held: (vf, its load, bulk's and
    small packets' held rates)."""
    load = {"bytes": 1500.0}
    vf = SyntheticVf(two_loads(load))
    vf.run(tuner, 150)
    bulk_itr = tuner.state()["held_itr"]
    load["bytes"] = vf.packet_bytes = 300.0
    vf.run(tuner, 200)
    small_itr = tuner.state()["held_itr"]
    assert tuner.state()["phase"] == "holding" and small_itr < bulk_itr / 2
    return vf, load, bulk_itr, small_itr


def test_a_class_seen_before_gets_its_setting_back_within_one_window():
    tuner = SearchTuner(PCI, caps())
    vf, load, bulk_itr, _ = learned_two_loads(tuner)
    searches = tuner.searches
    load["bytes"] = vf.packet_bytes = 1500.0
    start = vf.t
    vf.run(tuner, 8)
    recall = [(t, d) for t, d in vf.decisions if t > start]
    assert recall and recall[0][1].cause == "recall" and recall[0][1].itr == bulk_itr
    # One 2-s window of the new load (plus the one it began in), not a search.
    assert recall[0][0] - start <= 4 and tuner.searches == searches
    assert "bulk/large/rx" in recall[0][1].reason


@pytest.mark.parametrize("span_recall", [True, False])
def test_with_counters_fresh_every_sample_a_known_load_is_recalled_at_its_first_sample(span_recall: bool):
    # Counters refresh every 1-s sample; a window is 3 of them. Each change between two loads
    # this VF has measured gets its setting back at the change's first sample (a whole counter
    # span of the new load), not after a window of it; without span recall, after a window.
    tuner = SearchTuner(PCI, caps(refresh=1.0), {"window_s": 3.0, "span_recall": span_recall})
    vf, load, bulk_itr, small_itr = learned_two_loads(tuner)
    searches = tuner.searches
    for packet_bytes, itr in ((1500.0, bulk_itr), (300.0, small_itr), (1500.0, bulk_itr)):
        load["bytes"] = vf.packet_bytes = packet_bytes
        start = vf.t
        vf.run(tuner, 12)
        acted = [(t - start, d) for t, d in vf.decisions if t > start]
        assert [(d.cause, d.itr) for _, d in acted] == [("recall", itr)]
        assert acted[0][0] == 1 if span_recall else acted[0][0] >= 3
    assert tuner.searches == searches


def test_an_idle_vf_whose_load_comes_back_as_it_went_keeps_its_setting():
    load = {"on": 1.0}
    same = curve(8_000)
    vf = SyntheticVf(lambda r: load["on"] * same(r))
    tuner = SearchTuner(PCI, caps())
    vf.run(tuner, 150)
    held, made = vf.itr, len(vf.decisions)
    assert tuner.state()["phase"] == "holding" and held > 0
    for on, ticks in ((0.0, 10), (1.0, 20), (0.0, 10)):
        load["on"] = on
        vf.run(tuner, ticks)
    assert vf.itr == held and all(d.itr == held for _, d in vf.decisions[made:])
    assert [e.cause for e in tuner.events[-3:]] == ["idle", "recall", "idle"]


def test_a_switch_to_jumbo_frames_is_a_new_load_searched_at_once():
    # Bulk in 1500-byte frames peaks at 48000/s; the guest's jumbo load peaks at 8000/s and
    # loses most of its throughput at the held rate. Not a rate change to wait 30 s for.
    load = {"bytes": 1500.0}
    vf = SyntheticVf(lambda r: curve(48_000 if load["bytes"] < 4000 else 8_000)(r))
    tuner = SearchTuner(PCI, caps())
    while tuner.state()["phase"] != "holding" and vf.t < 150:
        vf.run(tuner, 1)
    assert tuner.state()["held_itr"] > 30_000
    # Right after the search: too few held windows to know the VF's noise, so a packet rate
    # falling by a decade alone could still be a burst.
    load["bytes"] = vf.packet_bytes = 9000.0
    start = vf.t
    vf.run(tuner, 8)
    restarts = [(t, d) for t, d in vf.decisions if t > start and d.cause == "restart-load"]
    assert restarts and "load changed to bulk/jumbo/rx" in restarts[0][1].reason
    vf.run(tuner, 150)
    assert tuner.state()["phase"] == "holding" and tuner.state()["held_itr"] < 16_000


def _second_vf_after_a_first(second_curve: Callable[[float], float]) -> tuple[SearchTuner, SyntheticVf, int]:
    """A VF that meets a class another VF of the host searched: (its tuner, it, the first's rate)."""
    from vftune.control.memory import HostProfiles

    shared = HostProfiles()
    first = SyntheticVf(curve(48_000))
    t1 = SearchTuner(PCI, caps(), profiles=shared)
    first.run(t1, 150)
    second = SyntheticVf(second_curve)
    t2 = SearchTuner("0000:03:10.2", caps(), profiles=shared)
    for _ in range(40):
        d = t2.step(replace(second.sample(), pci="0000:03:10.2"))
        if d is not None:
            second.decisions.append((second.t, d))
            second.itr = quantize_itr(d.itr) if d.itr else 0
    return t2, second, t1.state()["held_itr"]


def test_a_class_another_vf_of_the_host_learned_is_checked_and_held():
    """The same load on a second VF: the first VF's rate is measured once against the adaptive
    ITR (not searched for again) and held."""
    t2, second, learned = _second_vf_after_a_first(curve(48_000))
    start = second.decisions[0][1]
    assert start.cause == "start" and f"checking another VF's {learned}/s against the adaptive ITR" in start.reason
    assert t2.state()["phase"] == "holding" and t2.state()["held_itr"] == learned
    assert sum(d.cause == "probe" for _, d in second.decisions) <= 3 and t2.searches == 1


def test_another_vfs_rate_that_measures_worse_than_the_adaptive_itr_is_not_held():
    """A load of the same class (rate, packet size, direction) that the first VF's rate serves
    30% worse than the guest's own adaptive ITR does: the adaptive ITR stays (do no harm)."""
    t2, second, learned = _second_vf_after_a_first(curve(ADAPTIVE_RATE))
    assert any(d.itr == learned for _, d in second.decisions)  # measured
    assert t2.state()["phase"] == "holding" and t2.state()["held_itr"] == 0 and second.itr == 0


def test_the_adaptive_itr_is_measured_over_several_windows():
    # It moves with its own state from one window to the next; a fixed rate needs one window.
    vf = SyntheticVf(curve(48_000))
    tuner = SearchTuner(PCI, caps(1.0), {"window_s": 1.0, "adaptive_windows": 4})
    vf.run(tuner, 30)
    assert vf.decisions[0][1].cause == "start"  # the adaptive incumbent, written as it runs
    first_probe = next(t for t, d in vf.decisions if d.cause == "probe")
    assert first_probe >= 1 + 4  # the first tick shows traffic, then four 1-s windows of adaptive
    times = [t for t, d in vf.decisions if d.cause == "probe"]
    assert all(b - a <= 3 for a, b in zip(times, times[1:]))  # fixed rates: settle + one window


def test_a_long_window_of_the_adaptive_itr_shows_its_slices_as_they_end():
    meter = WindowMeter(1.0)
    meter.start(change_t=10.0, settle_s=0.0, window_s=3.0)

    def s(t: float, bps: float) -> VfSample:
        return VfSample(PCI, "pf", t, 1.0, bps / 12000, bps, 0, 0, None, None, 0, None, True)

    assert meter.add(s(11, 1e9)) is None and meter.slice is None  # opens
    assert meter.add(s(12, 1e9)) is None and meter.slice is not None and meter.slice.bps == pytest.approx(1e9)
    assert meter.add(s(13, 3e9)) is None and meter.slice is not None and meter.slice.bps == pytest.approx(3e9)
    w = meter.add(s(14, 2e9))
    assert w is not None and (w.start, w.end) == (11.0, 14.0) and w.bps == pytest.approx(2e9)
    assert meter.slice is None  # the window itself ends here
    meter.start(change_t=20.0, settle_s=0.0)  # windows of the meter's own length have no slices
    assert all(meter.add(s(t, 1e9)) is None or meter.slice is None for t in range(21, 25))


def test_a_new_load_inside_the_adaptive_itrs_window_is_acted_on_within_one_short_window():
    # The adaptive ITR is measured over four 1-s windows; a new packet size after the first
    # one is a new load at the next window's end, not when the four have ended.
    load = {"bytes": 1500.0}
    vf = SyntheticVf(two_loads(load))
    tuner = SearchTuner(PCI, caps(1.0), {"window_s": 1.0, "adaptive_windows": 4})
    vf.run(tuner, 3)
    assert [d.cause for _, d in vf.decisions] == ["start"] and tuner.state()["probe_itr"] == 0
    switch = vf.t
    load["bytes"] = vf.packet_bytes = 300.0
    vf.run(tuner, 3)
    acted = [(t, d) for t, d in vf.decisions if t > switch]
    assert acted and acted[0][1].cause == "restart-in-search" and acted[0][0] <= switch + 1
    assert "load changed to bulk/small/rx" in acted[0][1].reason


def test_a_load_change_under_a_search_recalls_a_known_class_and_resumes_a_suspended_search():
    # Bulk is searched and held; small packets start a search; bulk returns in the middle of
    # it (recalled, the small search kept), and when small packets come back their search
    # goes on from the probes it had, not from its start.
    load = {"bytes": 1500.0}
    vf = SyntheticVf(two_loads(load))
    tuner = SearchTuner(PCI, caps())
    vf.run(tuner, 150)
    bulk_itr = tuner.state()["held_itr"]

    def switch(packet_bytes: float, ticks: int) -> list[ItrDecision]:
        load["bytes"] = vf.packet_bytes = packet_bytes
        start = vf.t
        vf.run(tuner, ticks)
        return [d for t, d in vf.decisions if t > start]

    first = switch(300.0, 30)
    assert first[0].cause == "restart-load" and tuner.state()["phase"] == "probing"
    probes_before = tuner.state()["probes"]
    assert probes_before >= 3
    back = [d for d in switch(1500.0, 12) if d.cause != "probe"]  # a probe due before the change showed
    assert back[0].cause == "recall" and back[0].itr == bulk_itr
    assert tuner.state()["suspended_searches"] == 1 and tuner.searches == 2
    again = switch(300.0, 6)
    assert again[0].cause == "restart-load" and "search resumed" in again[0].reason
    assert tuner.searches == 2 and tuner.state()["probes"] >= probes_before


def test_a_burst_that_becomes_the_reference_does_not_restart_the_search():
    # The load bursts (x1.5) right as the search converges, so the held load's reference windows
    # are the burst's. When the load is back for good at the level the search measured, that is
    # the load the setting was chosen for: the reference is taken again, nothing is searched.
    level = {"gain": 1.0}
    vf = SyntheticVf(lambda r: curve(20_000)(r) * level["gain"], noise=0.005, seed=4)
    tuner = SearchTuner(PCI, caps())
    while tuner.state()["phase"] != "holding":
        vf.run(tuner, 1)
    searches = tuner.searches
    level["gain"] = 1.5
    vf.run(tuner, 8)
    level["gain"] = 1.0
    vf.run(tuner, 60)
    assert tuner.searches == searches and tuner.restarts["load"] == 0
    assert any(e.cause == "reference" for e in tuner.events)
    # The new reference holds: a lasting change of load still restarts.
    level["gain"] = 1.5
    vf.run(tuner, 45)
    assert tuner.restarts["load"] == 1


def test_a_vf_of_a_guest_with_several_vfs_does_not_buy_ring_throughput_with_its_guests_datagrams():
    """The ring counts more up to 50000/s, but above 30000/s the guest's sockets drop what its
    application cannot take (3 Gbit/s). Told of the drops as its share of a multi-VF guest's,
    the search settles near 30000/s, as it does when the drops are the VF's own; without them
    it chases the ring's count."""
    def at(shared: bool | None) -> int:
        dropped = None if shared is None else (lambda itr: max(0.0, 1.0 - 30_000 / itr) if itr else 0.0)
        vf = SyntheticVf(lambda r: min(5e9, 1e5 * r), dropped=dropped, drops_shared=bool(shared))
        tuner = SearchTuner(PCI, caps())
        vf.run(tuner, 150)
        assert tuner.phase is Phase.HOLDING
        return vf.itr

    assert at(shared=None) > 45_000
    assert 27_000 <= at(shared=True) <= 36_000
    assert 27_000 <= at(shared=False) <= 36_000


@dataclass
class FullGuestVf(SyntheticVf):
    """A VF on a guest of two vCPUs running an application that wants 1.6 of them: the ring
    gives more bits up to 60000/s, but the interrupts' own time comes first, and above 20000/s
    it leaves the application less than it wants (the guest's agent reports user and idle):
    bits x the application's share peaks near 25000/s."""

    def sample(self) -> VfSample:
        s = super().sample()
        irq = 0.4 * (self.rate() / 20_000) ** 2  # vCPU seconds per second the interrupts take
        user = max(0.0, min(1.6, 2.0 - irq))
        return replace(s, guest_user_cpu=user, guest_idle_cpu=max(0.0, 2.0 - irq - user),
                       guest_irq_cpu=irq)


def test_on_a_full_guest_a_rate_that_buys_bits_with_its_applications_time_is_not_held():
    """Ring bits alone pick the top of the range; counted with the application's share of the
    guest (bits x share, as the operator counts it) the best is just past where the guest fills
    up (within 3% from 22000/s to 28500/s). Without the guest's accounting, or with guest_share
    off, it chases the bits."""
    def bits(r: float) -> float:
        return 1e9 * min(1.0, r / 60_000)

    def held(vf: SyntheticVf, **options: object) -> int:
        tuner = SearchTuner(PCI, caps(), TunerOptions(**options))  # type: ignore[arg-type]
        vf.run(tuner, 150)
        assert tuner.phase is Phase.HOLDING
        return vf.itr

    assert 18_000 <= held(FullGuestVf(bits)) <= 32_000
    assert held(SyntheticVf(bits)) > 45_000
    assert held(FullGuestVf(bits), guest_share=False) > 45_000


def test_a_new_load_under_a_search_on_a_saturated_port_is_not_boxed_around_the_old_loads_probe():
    """A search confined to rates below the one in force (a VF taking its share of a saturated
    port) centres on the adaptive ITR it starts from. When the load changes class mid-search, the
    rate in force is a probe of the other load's search: no centre for the new one."""
    vf = SharedPortVf(rising, share=1e9)
    tuner = SearchTuner(PCI, caps())
    for _ in range(120):
        d = tuner.step(vf.sample())
        if d is not None:
            vf.decisions.append((vf.t, d))
            vf.itr = quantize_itr(d.itr) if d.itr else 0
        if tuner.phase is Phase.PROBING and vf.itr > 0 and vf.packet_bytes == 1500.0:
            in_force = vf.itr
            vf.packet_bytes = 300.0  # small packets: another class
        if any(d.cause == "restart-in-search" for _, d in vf.decisions):
            break
    (restart,) = [d.reason for _, d in vf.decisions if d.cause == "restart-in-search"]
    low, high = (int(x) for x in restart.split("searching ")[1].split("/s")[0].split(".."))
    assert (low, high) == tuner.full_bracket and high != in_force


@dataclass
class AnsweringVf(SyntheticVf):
    """A request/response VF: small packets both ways, as many out as in."""

    packet_bytes: float = 200.0

    def sample(self) -> VfSample:
        s = super().sample()
        return replace(s, tx_pps=s.rx_pps, tx_bps=s.rx_bps)


def _held_under_latency(f: Callable[[float], float]) -> dict[str, tuple[str, int, float]]:
    """A request/response VF and a bulk receiver on the same curve, each under `latency`: the
    class each holds, its rate and the bound on the delay its status shows."""
    held = {}
    for vf in (AnsweringVf(f), SyntheticVf(f)):
        tuner = SearchTuner(PCI, caps(), goal=Goal(Objective.LATENCY))
        vf.run(tuner, 150)
        state = tuner.state()
        assert state["phase"] == "holding"
        held[type(vf).__name__] = (str(state["workload_class"]), int(state["held_itr"]),
                                   float(state["max_interval_us"]))
    return held


def test_under_latency_a_tie_goes_to_the_shorter_delay_where_the_vf_answers():
    # Throughput cannot tell any rate from 30000/s up apart.
    held = _held_under_latency(lambda r: 1e9 * min(1.0, math.sqrt(r / 30_000)))
    answering, bulk = held["AnsweringVf"], held["SyntheticVf"]
    assert answering[0].startswith("rr/small/both") and answering[1] > 100_000
    # A bulk receive has no response time to guard: tuned as under `balanced`, at the knee, the
    # flat stretch's low edge.
    assert bulk[0].startswith("bulk/large/rx") and 25_000 < bulk[1] < 60_000


def test_under_latency_a_bulk_load_is_not_held_to_the_delay_bound():
    # Every rate from 3000/s up delivers the same.
    held = _held_under_latency(lambda r: 1e9 * min(1.0, math.sqrt(r / 3_000)))
    floor = 1e6 / LATENCY_MAX_INTERVAL_US
    # Responses: the bound on the added delay holds (0: the guest's own adaptive ITR, above it).
    assert held["AnsweringVf"][1] == 0 or held["AnsweringVf"][1] >= floor
    assert held["AnsweringVf"][2] == LATENCY_MAX_INTERVAL_US
    # The bulk receiver at the knee below the bound; its status says no bound but the NIC's holds.
    assert 0 < held["SyntheticVf"][1] < floor and held["SyntheticVf"][2] > LATENCY_MAX_INTERVAL_US


def _alternating(bulk_ticks: int, small_ticks: int, options: dict[str, object] | None = None,
                 ticks: int = 90) -> SearchTuner:
    """Bulk (1500-byte) and small (300-byte) packets in turn, for these many 1-s windows each."""
    load = {"bytes": 1500.0}
    vf = SyntheticVf(two_loads(load))
    tuner = SearchTuner(PCI, caps(1.0), {"window_s": 1.0, **(options or {})})
    for i in range(ticks):
        load["bytes"] = vf.packet_bytes = 1500.0 if i % (bulk_ticks + small_ticks) < bulk_ticks else 300.0
        vf.run(tuner, 1)
    return tuner


def test_a_load_shorter_than_the_adaptive_itrs_window_is_measured_over_several_visits():
    """Three 1-s windows of each load: shorter than the adaptive ITR's 4-s window, each
    search's first probe, which never completes in one piece. Its slices that held the load are kept across visits,
    so the small-packet load's search gets its first measurement and finishes near its peak
    (its low end measured too: 130 windows). Before, the VF reported a search at its first step
    for the whole run."""
    tuner = _alternating(3, 3, ticks=130)
    settled = {k.size: p.itr for k, p in tuner.memory.profiles.items()}
    assert 6_000 < settled["small"] < 10_000  # small packets peak at 8000/s
    assert tuner.state()["phase"] == "holding"


def test_a_setting_recalled_in_short_visits_is_searched_again_once_as_old_as_a_hold_may_last():
    # A load that changes class every 30 s starts a new hold at each recall, so the hold's own
    # clock never reaches restart_s; the remembered setting is checked once it is that old.
    load = {"bytes": 1500.0, "bulk_peak": 48_000.0}
    vf = SyntheticVf(lambda r: curve(load["bulk_peak"] if load["bytes"] >= 1000 else 8_000)(r))
    tuner = SearchTuner(PCI, caps(), TunerOptions(restart_s=400, restart_jitter=0.0))
    vf.run(tuner, 150)
    bulk_itr = tuner.state()["held_itr"]
    assert isinstance(bulk_itr, int) and tuner.state()["phase"] == "holding"
    found = tuner.convergences[-1].t
    load["bytes"] = vf.packet_bytes = 300.0
    vf.run(tuner, 150)
    load["bulk_peak"] = 20_000.0  # the host changed: the bulk load's best moved down
    while vf.t < 1800:
        load["bytes"] = vf.packet_bytes = 1500.0 if load["bytes"] < 1000 else 300.0
        vf.run(tuner, 30)
    rechecks = [(t, d) for t, d in vf.decisions if d.cause == "restart-periodic" and "large" in d.reason]
    assert rechecks and "remembered" in rechecks[0][1].reason
    assert rechecks[0][0] - found >= 400  # not before the setting is as old as a hold may last
    bulk = next(p for k, p in tuner.memory.profiles.items() if k.size == "large")
    assert bulk.itr < bulk_itr and at_the_knee(curve(20_000), bulk.itr, 20_000)


def test_the_knee_noise_switch_reaches_every_objectives_search():
    # The ablation's `knee-noise` switch is this option; each objective's search reads it,
    # except latency's, which gives up no margin to read against the noise.
    on, off = TunerOptions().search_config(), TunerOptions(knee_noise=False).search_config()
    for objective in (Objective.BALANCED, Objective.THROUGHPUT, Objective.EFFICIENCY):
        assert Goal(objective).search_config(on).knee_z > 0
        assert Goal(objective).search_config(off).knee_z == 0
    assert Goal(Objective.LATENCY).search_config(on).plateau_margin == 0


def test_the_low_edge_switch_reaches_every_objectives_search():
    # The ablation's `low-edge` switch is this option; latency's search never walks a plateau
    # (no margin), the others start their walk at the range's low end.
    on, off = TunerOptions().search_config(), TunerOptions(low_edge=False).search_config()
    for objective in Objective:
        assert Goal(objective).search_config(on).low_edge
        assert not Goal(objective).search_config(off).low_edge
