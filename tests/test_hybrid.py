"""Hybrid DE/NAPI: cliff formula, hysteresis on a hovering trace, estimator, PF controller."""

from __future__ import annotations

import math
import random

import pytest

from vftune.control.hybrid import HybridSwitch, PacketRateEstimator, cliff_rate
from vftune.control.mode import HybridModeController, ModeOptions
from vftune.model import Capabilities, PfSample


def test_cliff_rate_solves_the_saturation_equation():
    r, mu = 1 / 5e-6, 1 / 8e-6  # 5 us per interrupt, 8 us per packet
    lam = cliff_rate(r, mu)
    # lambda^2 / r + lambda = mu: packet work plus interrupt work fill the CPU.
    assert lam**2 / r + lam == pytest.approx(mu, rel=1e-9)
    # Cheap interrupts: the cliff tends to mu itself.
    assert cliff_rate(1e12, mu) == pytest.approx(mu, rel=1e-3)
    with pytest.raises(ValueError, match="mu"):
        cliff_rate(r, 0)


def hovering_trace(cliff: float, n: int, spread: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [cliff * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def switches(sw: HybridSwitch, trace: list[float]) -> int:
    for rate in trace:
        sw.update(rate)
    return sw.switches


def test_hysteresis_does_not_flap_around_the_cliff():
    trace = hovering_trace(100_000, 2_000, spread=0.12, seed=3)  # inside +-15%
    assert switches(HybridSwitch(100_000), trace) == 0
    # Without hysteresis the same trace flips hundreds of times.
    assert switches(HybridSwitch(100_000, epsilon=0.0), trace) > 500
    # A load that swings +-30% around the cliff (10 slow periods) with +-10% noise on top:
    # one switch per crossing of the whole band, i.e. two per period, instead of flapping.
    rng = random.Random(5)
    swing = [
        100_000 * (1 + 0.3 * math.sin(2 * math.pi * i / 200) + rng.uniform(-0.1, 0.1)) for i in range(2_000)
    ]
    assert switches(HybridSwitch(100_000), swing) == 20
    assert switches(HybridSwitch(100_000, epsilon=0.0), swing) > 60


def test_switch_thresholds_are_exact():
    sw = HybridSwitch(100_000, epsilon=0.15)
    assert sw.update(114_999) == "de"
    assert sw.update(115_001) == "napi"
    assert sw.update(85_001) == "napi"
    assert sw.update(84_999) == "de"
    assert sw.switches == 2


def test_estimator_smooths_with_shifts_and_survives_a_counter_reset():
    est = PacketRateEstimator(window_s=0.008, shift=1)
    assert est.update(0) is None
    total = 0
    for _ in range(20):
        total += 800  # 100 kpps in 8 ms windows
        rate = est.update(total)
    assert rate == pytest.approx(100_000, rel=0.01)
    total += 1600  # a doubled window moves the estimate half way
    assert est.update(total) == pytest.approx(150_000, rel=0.01)
    assert est.update(10) == pytest.approx(150_000, rel=0.01)  # reset: re-seed, keep estimate


CAPS = Capabilities(backend="sim", rx_modes=("napi", "de", "hybrid"), napi_budget=True)
USER_SPACE_CAPS = Capabilities(backend="linux", rx_modes=("napi", "de"), napi_budget=True)


def pf_samples(rates: list[float], mode: str = "de"):
    for i, rate in enumerate(rates):
        yield PfSample(pf="enp3s0f0", t=float(i + 1), dt=1.0, rx_pps=rate, rx_bps=rate * 8000, mode=mode)


def test_controller_switches_to_napi_with_small_budget_and_back():
    # A driver without the in-driver hybrid: the agent switches on its own estimate.
    ctl = HybridModeController("enp3s0f0", USER_SPACE_CAPS, ModeOptions(cliff_pps=100_000))
    mode = "de"
    log = []
    for s in pf_samples([50_000] * 5 + [150_000] * 10 + [50_000] * 10):
        d = ctl.step(PfSample(s.pf, s.t, s.dt, s.rx_pps, s.rx_bps, mode))
        if d:
            mode = d.mode
            log.append(d)
    assert [d.mode for d in log] == ["napi", "de"]
    assert log[0].napi_budget == 2 and "cliff2" in log[0].reason
    assert ctl.state()["switches"] == 2


def test_controller_without_cliff_or_modes_leaves_the_pf_alone():
    no_cliff = HybridModeController("enp3s0f0", CAPS)
    assert all(no_cliff.step(s) is None for s in pf_samples([500_000] * 5))
    assert "no cliff" in no_cliff.state()["disabled"]
    stock = HybridModeController("enp3s0f0", Capabilities(backend="linux"), ModeOptions(cliff_pps=1000))
    assert all(stock.step(s) is None for s in pf_samples([500_000] * 5, mode="napi"))
    assert "cannot switch" in stock.state()["disabled"]


def test_controller_cliff_from_measured_costs():
    ctl = HybridModeController("enp3s0f0", CAPS, ModeOptions(interrupt_cost_s=5e-6, packet_cost_s=8e-6))
    assert ctl.state()["cliff"] == pytest.approx(cliff_rate(1 / 5e-6, 1 / 8e-6))
    with pytest.raises(ValueError, match="go together"):
        ModeOptions(interrupt_cost_s=5e-6)
    assert math.isfinite(ctl.state()["cliff2"])


def test_a_driver_with_hybrid_gets_the_thresholds_once_and_switches_itself():
    ctl = HybridModeController("enp3s0f0", CAPS, ModeOptions(cliff_pps=100_000))
    decisions = [d for s in pf_samples([50_000] * 5 + [150_000] * 10 + [50_000] * 10) if (d := ctl.step(s))]
    assert [(d.mode, d.cliff_pps, d.epsilon, d.napi_budget) for d in decisions] == [("hybrid", 100_000, 0.15, 2)]
    assert "DE below 85000, NAPI above 115000" in decisions[0].reason
    ctl.set_cliff(105_000, "cost model")  # within 10%: the driver keeps what it has
    assert ctl.step(next(pf_samples([50_000]))) is None
    ctl.set_cliff(130_000, "cost model")
    again = ctl.step(next(pf_samples([50_000])))
    assert again is not None and again.cliff_pps == 130_000 and ctl.state()["switching"] == "driver"
