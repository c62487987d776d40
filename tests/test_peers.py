"""Peer policies on synthetic inputs: the paper-literal search, net_dim in a guest, bayesopt, registry."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest

from vftune.bench import run
from vftune.bench.peers.bayesopt import BayesOptPolicy, BayesSearch, GaussianProcess
from vftune.bench.peers.net_dim import (
    DIM_GOING_LEFT,
    DIM_GOING_RIGHT,
    DIM_PARKING_ON_TOP,
    DIM_PARKING_TIRED,
    DimStats,
    GuestNetDim,
    NetDim,
    _significant,
)
from vftune.bench.peers.paper import PaperSearch
from vftune.bench.registry import FRONTIER, GUEST, HOST, ORACLE, POLICIES, TUNERS, host_factory
from vftune.control.itr_search import ItrSearch
from vftune.control.policy import FixedItr, Observe
from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE
from vftune.model import Capabilities, VfSample

CAPS = Capabilities(backend="synthetic", vf_itr=True, counter_refresh_s=1.0)


def peak(r: float) -> float:
    return math.exp(-(math.log(r / 48_000) ** 2))


def drive(search, f):
    while (r := search.ask()) is not None:
        search.tell(r, f(r))
    return search


def test_paper_literal_walks_to_the_wrong_end_and_costs_two_probes_per_step():
    paper = drive(PaperSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000), peak)
    assert paper.best > 400_000  # away from the 48000/s maximum, as its pseudo-code does
    assert paper.probes % 2 == 0 and paper.probes >= 24
    ours = drive(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000), peak)
    assert peak(ours.best) > 0.95 > peak(paper.best)
    assert ours.probes < paper.probes / 2
    assert "wrong end" in PaperSearch.literal_bug


# ---- net_dim ------------------------------------------------------------------------


def test_significance_is_integer_percent_above_ten():
    assert not _significant(110, 100)  # exactly 10%: not significant
    assert _significant(111, 100)
    assert not _significant(5, 0)  # no reference, never significant


def test_net_dim_leaves_parking_then_walks_left_until_the_edge():
    dim = NetDim()
    assert (dim.tune_state, dim.profile_ix) == (DIM_PARKING_ON_TOP, 1)
    # First stats: prev is zero, so BETTER: exit parking leftwards (profile 1 -> 0).
    assert dim.decision(DimStats(bpms=1000, ppms=10, epms=1))
    assert (dim.tune_state, dim.profile_ix) == (DIM_GOING_LEFT, 0)
    # Better again at the left edge: ON_EDGE parks on top.
    assert not dim.decision(DimStats(bpms=1200, ppms=12, epms=1))
    assert dim.tune_state == DIM_PARKING_ON_TOP
    # A significant drop in bytes leaves parking (rightwards from profile 0).
    assert dim.decision(DimStats(bpms=500, ppms=5, epms=1))
    assert (dim.tune_state, dim.profile_ix) == (DIM_GOING_RIGHT, 1)


def test_net_dim_finds_the_top_after_a_turn():
    dim = NetDim()
    dim.tune_state, dim.profile_ix, dim.prev_stats = DIM_GOING_RIGHT, 1, DimStats(bpms=1000)
    assert dim.decision(DimStats(bpms=1500))  # better: step right to 2
    assert dim.decision(DimStats(bpms=2000))  # better: step right to 3 (steps_right 2)
    assert dim.decision(DimStats(bpms=1500))  # worse: turn, step left to 2
    assert (dim.tune_state, dim.profile_ix) == (DIM_GOING_LEFT, 2)
    assert not dim.decision(DimStats(bpms=2000))  # better after one step back: on top
    assert (dim.tune_state, dim.profile_ix) == (DIM_PARKING_ON_TOP, 2)
    # Parked on top, an insignificant change (<= 10%) keeps it parked.
    assert not dim.decision(DimStats(bpms=2150))
    assert dim.tune_state == DIM_PARKING_ON_TOP


def test_net_dim_tired_counter_parks_for_ten_decisions():
    dim = NetDim()
    dim.tune_state, dim.profile_ix, dim.tired, dim.prev_stats = DIM_GOING_RIGHT, 1, 9, DimStats(bpms=1000)
    assert dim.decision(DimStats(bpms=2000))  # tenth step
    assert dim.tired == 10
    assert not dim.decision(DimStats(bpms=4000))  # too tired: park
    assert dim.tune_state == DIM_PARKING_TIRED
    for _ in range(9):
        dim.decision(DimStats(bpms=4000))
        assert dim.tune_state == DIM_PARKING_TIRED
    dim.decision(DimStats(bpms=4000))  # the tenth tired decision exits parking
    assert dim.tune_state == DIM_GOING_LEFT and dim.profile_ix == 1


def vf_sample(t: float, bps: float, itr: int, interrupts: int | None, fresh: bool = True) -> VfSample:
    return VfSample("0000:03:10.0", "pf", t, 1.0, bps / 12000, bps, 0, 0,
                    None if interrupts is None else float(interrupts), interrupts, itr, None, fresh)


class Rates(NamedTuple):
    """What a simulator step shows a guest driver: the VfRates fields DIM reads."""

    rx_pps: float
    rx_Bps: float
    tx_pps: float
    tx_Bps: float
    interrupts_per_s: float


def bulk_at(itr: int) -> Rates:
    """A synthetic bulk receiver whose throughput peaks at 62,500 interrupts/s (profile 2)."""
    gbps = 9.0 * math.exp(-(math.log(itr / 62_500) ** 2) / 2.0)
    return Rates(gbps * 1e9 / 8 / 1500, gbps * 1e9 / 8, 0.0, 0.0, min(itr, gbps * 1e9 / 8 / 1500))


def test_guest_net_dim_maps_the_ice_and_cqe_tables_to_82599_rates():
    ice, cqe = GuestNetDim("ice"), GuestNetDim("cqe")
    assert ice.rates == (ITR_MAX_RATE, 125_000, 62_500, 16_129, 7_936)
    assert cqe.rates == (ITR_MAX_RATE, 125_000, 62_500, 31_250, 15_625)
    assert ice.itr == 122_070  # profile 1 at open: 8 us, four 2.048-us steps
    with pytest.raises(ValueError, match="eqe"):
        GuestNetDim("eqe")


def test_guest_net_dim_needs_64_events_per_decision():
    dim = GuestNetDim("ice")
    quiet = Rates(100.0, 1e5, 0.0, 0.0, 100.0)  # 100 interrupts/s: 64 events take 0.64 s
    for _ in range(6):
        dim.observe(quiet, 0.1)
    assert dim.decisions == 0
    dim.observe(quiet, 0.1)
    assert dim.decisions == 1


def test_guest_net_dim_climbs_to_the_best_profile_and_parks_there():
    dim = GuestNetDim("ice")
    seen = []
    for _ in range(40):  # 4 s of 0.1-s steps, each at the rates its profile gives
        dim.observe(bulk_at(dim.itr), 0.1)
        seen.append(dim.itr)
    assert dim.rates[dim.dim.profile_ix] == 62_500
    assert dim.dim.tune_state in (DIM_PARKING_ON_TOP, DIM_PARKING_TIRED)
    assert len(set(seen[-10:])) == 1  # parked: no more changes at a steady load


def test_gaussian_process_interpolates_and_is_unsure_far_from_data():
    gp = GaussianProcess([0.0, 1.0, 2.0, 3.0], [0.2, 0.8, 1.0, 0.6])
    mu, sd = gp.predict([2.0, 10.0])
    assert abs(mu[0] - 1.0) < 0.05 and sd[0] < sd[1]


def test_bayes_search_finds_the_peak_in_a_few_probes():
    search = BayesSearch(ITR_MIN_RATE, ITR_MAX_RATE, incumbent=12_000)
    drive(search, peak)
    assert search.probes <= 10
    assert peak(search.best) >= 0.97  # within 3% of the peak at 48,000/s


def test_bayesopt_policy_probes_on_fresh_windows_then_holds_and_restarts_on_a_load_change():
    pol = BayesOptPolicy("0000:03:10.0", CAPS)
    itr, t, changes = 12_000, 0.0, []

    def load(itr: int, t: float) -> float:
        return 9e9 * peak(itr) * (0.5 if t > 200 else 1.0)

    while t < 400:
        t += 1.0
        d = pol.step(vf_sample(t, load(itr, t), itr, int(itr)))
        if d is not None:
            itr = d.itr
            changes.append((t, d.reason))
    holds = [c for c in changes if "holds" in c[1]]
    assert holds and holds[0][0] < 60  # a few 2-s windows per probe
    assert pol.searches >= 2 and any(200 < c[0] < 215 for c in changes)  # the drop restarted it


# ---- registry -------------------------------------------------------------------------


def test_registry_builds_every_policy_and_names_unknown_ones():
    assert set(HOST) | set(GUEST) | set(TUNERS) | {FRONTIER, ORACLE} == set(POLICIES) and POLICIES[-1] == ORACLE
    assert "ixgbe" not in POLICIES  # the PF's algorithm: no VF runs it
    for name in (*HOST, *TUNERS):
        assert hasattr(host_factory(name)("0000:03:10.0", CAPS), "step")
    # vftune under each objective; each run gets a factory of its own (no memory shared across runs)
    assert host_factory("vftune-latency")("x", CAPS).state()["objective"] == "latency"
    assert host_factory("vftune") is not host_factory("vftune")
    for name in GUEST:  # guest-run: the host agent only observes
        assert isinstance(host_factory(name)("x", CAPS), Observe)
    fixed = host_factory("fixed-8000")("x", CAPS)
    assert isinstance(fixed, FixedItr) and fixed.itr == 8000
    with pytest.raises(ValueError, match="unknown policy 'dim'"):
        run(["paper-1vm"], ["dim"])
