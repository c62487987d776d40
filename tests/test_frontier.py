"""The frontier: the cheapest fixed plan that meets the bench's score floors."""

from __future__ import annotations

import math

import pytest

from vftune.bench.frontier import GEOMEAN_SCORE, MIN_SCORE, frontier
from vftune.bench.oracle import candidates, oracle_plan, vf_merit
from vftune.sim.engine import HostSim
from vftune.sim.layout import vf_pci
from vftune.sim.scenarios import build
from vftune.sim.sweep import tunable_vfs

SCENARIO, SEED = "rr-mix", 0  # four tenants, request/response and bulk: the floors bind


def _steady(itrs_by_pci: dict[str, int]) -> tuple[dict[str, float], float]:
    """Each busy VF's score against the oracle and the host's network CPU per delivered bit,
    at these rates, in the joint steady state."""
    spec = build(SCENARIO, SEED)
    sim = HostSim(spec, SEED, noise=False)
    oracle = oracle_plan(SCENARIO, SEED).phases[0]
    tunable = tunable_vfs(spec)
    pcis = {i: vf_pci(spec.vfs[i].pf, spec.vfs[i].index) for i in tunable}
    itrs = [sim.vfs[i].itr for i in range(len(spec.vfs))]
    for i, pci in pcis.items():
        itrs[i] = itrs_by_pci[pci]
    rates = sim.steady_state(0.0, itrs)
    scores = {pci: vf_merit(rates.vfs[i], oracle.vfs[pci].kind) / oracle.vfs[pci].merit for i, pci in pcis.items()}
    cpu = sum(r.guest_cpu for vf, r in zip(spec.vfs, rates.vfs) if vf.guest is not None) + rates.host_kernel_cpu
    return scores, cpu / sum(rates.vfs[i].delivered_bps for i in tunable)


def test_the_frontier_meets_the_score_floors_for_less_cpu_per_bit_than_the_oracle():
    front = frontier(oracle_plan(SCENARIO, SEED))
    assert front.met
    plan = front.plan.phases[0].itrs
    scores, cpu_per_bit = _steady(plan)
    assert math.exp(sum(map(math.log, scores.values())) / len(scores)) >= GEOMEAN_SCORE - 1e-9
    assert min(scores.values()) >= MIN_SCORE - 1e-9
    oracle_scores, oracle_cpu_per_bit = _steady(oracle_plan(SCENARIO, SEED).phases[0].itrs)
    assert min(oracle_scores.values()) == pytest.approx(1.0)
    assert cpu_per_bit < oracle_cpu_per_bit * 0.99  # the 3% the floors leave is spent on CPU
    assert front.cpu_per_gbit == pytest.approx(cpu_per_bit * 1e9, rel=1e-6)
    assert front.oracle_cpu_per_gbit == pytest.approx(oracle_cpu_per_bit * 1e9, rel=1e-6)
    assert front.bound_cpu_per_gbit <= front.cpu_per_gbit * (1 + 1e-9)


def test_no_single_vf_can_move_to_a_cheaper_rate_and_keep_the_floors():
    plan = frontier(oracle_plan(SCENARIO, SEED)).plan.phases[0].itrs
    _, cpu_per_bit = _steady(plan)
    for pci in plan:
        for itr in candidates()[::4]:
            scores, moved = _steady({**plan, pci: itr})
            floors = (math.exp(sum(map(math.log, scores.values())) / len(scores)) >= GEOMEAN_SCORE
                      and min(scores.values()) >= MIN_SCORE)
            assert not (floors and moved < cpu_per_bit * (1 - 1e-3)), (pci, itr, moved / cpu_per_bit)
