"""Peer policies: the paper-literal search, net_dim's port, ixgbe's adaptive ITR, registry."""

from __future__ import annotations

import math

import pytest

from vftune.agent.itr_search import ItrSearch
from vftune.agent.policy import FixedItr, Observe
from vftune.bench import run
from vftune.bench.peers.ixgbe import IxgbeAdaptive, _RingContainer, ixgbe_update_itr
from vftune.bench.peers.net_dim import (
    DIM_GOING_LEFT,
    DIM_GOING_RIGHT,
    DIM_PARKING_ON_TOP,
    DIM_PARKING_TIRED,
    DimStats,
    NetDim,
    NetDimPolicy,
    _significant,
)
from vftune.bench.peers.paper import PaperSearch
from vftune.bench.registry import FACTORIES, ORACLE, POLICIES
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


def test_net_dim_policy_maps_profiles_and_needs_64_events():
    pol = NetDimPolicy("0000:03:10.0", CAPS)
    assert pol.itrs == (ITR_MAX_RATE, 125_000, 15_625, 7_812, 3_906)
    first = pol.step(vf_sample(1, 1e9, 0, 10))
    assert first is not None and first.itr == 125_000  # the default profile at open
    # Fewer than 64 events since the start sample: no decision however the bytes move.
    assert pol.step(vf_sample(2, 1e9, 125_000, 10)) is None
    assert pol.step(vf_sample(3, 5e9, 125_000, 10)) is None
    d = pol.step(vf_sample(4, 5e9, 125_000, 100))
    assert d is not None and "net_dim: profile" in d.reason


def test_net_dim_policy_ignores_stale_counter_samples():
    pol = NetDimPolicy("0000:03:10.0", CAPS)
    pol.step(vf_sample(1, 1e9, 0, 1000))
    assert pol.step(vf_sample(2, 0.0, 125_000, 1000, fresh=False)) is None
    assert pol.dim.start_sample.time_us == 0  # the stale sample did not start a measurement
    assert pol.step(vf_sample(3, 2e9, 125_000, 1000)) is None
    assert pol.dim.start_sample.time_us == 3_000_000


# ---- ixgbe ------------------------------------------------------------------------------


def test_ixgbe_update_itr_branches():
    ring = _RingContainer(0)
    q_itr = 50 << 2
    ixgbe_update_itr(ring, q_itr, 0, 0, stale=False)
    assert ring.itr == 52  # no packets: +2 us
    ixgbe_update_itr(ring, q_itr, 20, 30_000, stale=False)
    assert ring.itr == 52  # 4..47 packets: +2 us
    ixgbe_update_itr(ring, q_itr, 60, 90_000, stale=False)
    assert ring.itr == 50  # 48..95: hold
    ixgbe_update_itr(ring, q_itr, 120, 180_000, stale=False)
    assert ring.itr == 25  # 96..255: halve
    ixgbe_update_itr(ring, q_itr, 300, 300 * 1500, stale=False)
    assert ring.itr == 118  # bulk, 1500-byte frames: (1500*5 + 22420) rounded up to 512s, x2 us
    ixgbe_update_itr(ring, q_itr, 2, 120, stale=False)
    assert ring.itr == 0x80 + 10  # latency mode, <= 60-byte frames: 5120 >> 1 -> 10 us
    ixgbe_update_itr(ring, q_itr, 2, 128, stale=False)
    assert ring.itr == 0x80 + 12  # 64-byte frames: (64*40 + 2720) >> 1 -> 12 us
    ixgbe_update_itr(ring, q_itr, 300, 300 * 1500, stale=True)
    assert ring.itr == 0x80 + 10  # no update within a jiffy


def test_ixgbe_adaptive_settles_to_latency_at_low_rate_and_moderates_bulk():
    light = IxgbeAdaptive("0000:03:10.0", CAPS)
    light._replay(1_000, 60_000, 0, 0)
    assert light.usecs == 10 and light.itr == 100_000
    bulk = IxgbeAdaptive("0000:03:10.0", CAPS)
    bulk._replay(800_000, 800_000 * 1500, 0, 0)
    assert 20 <= bulk.usecs <= 126 and bulk.itr < 50_000
    d = bulk.step(vf_sample(1, 800_000 * 1500 * 8, 0, 10_000))
    assert d is not None and d.itr == int(1e6 / bulk.usecs) and "pkts/irq" in d.reason


# ---- registry -------------------------------------------------------------------------


def test_registry_builds_every_policy_and_names_unknown_ones():
    assert (*FACTORIES, ORACLE) == POLICIES
    for factory in FACTORIES.values():
        pol = factory("0000:03:10.0", CAPS)
        assert hasattr(pol, "step")
    assert isinstance(FACTORIES["default"]("x", CAPS), Observe)
    fixed = FACTORIES["fixed-8000"]("x", CAPS)
    assert isinstance(fixed, FixedItr) and fixed.itr == 8000
    with pytest.raises(ValueError, match="unknown policy 'dim'"):
        run(["paper-1vm"], ["dim"])
