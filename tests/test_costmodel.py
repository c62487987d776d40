"""Cost model: recovery of known coefficients from noisy rows, one per-packet cost per guest, and clear failures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vftune.agent.costmodel import cliff_inputs, fit, row
from vftune.control.hybrid import cliff_rate


def synthetic_rows(n: int, seed: int, noise: float, coeffs=(0.13, 0.37, 1.43)):
    rng = np.random.default_rng(seed)
    a, b, c = coeffs
    rows = []
    for _ in range(n):
        n_mb = rng.uniform(20, 1200)
        n_kp = n_mb * 1e3 / rng.uniform(64, 9000)  # varied packet sizes
        n_ki = n_kp * rng.uniform(0.02, 1.0)  # varied packets per interrupt (ITR probes)
        cpu = a * n_mb + b * n_kp + c * n_ki
        jitter = rng.normal(0, noise, 4)
        rows.append((cpu * (1 + jitter[0]), n_mb * (1 + jitter[1]), n_kp * (1 + jitter[2]), n_ki * (1 + jitter[3])))
    return rows


def test_recovers_geist_coefficients_from_noisy_rows():
    f = fit(synthetic_rows(80, seed=11, noise=0.01))
    assert f.alpha == pytest.approx(0.13, rel=0.08)
    assert f.beta == pytest.approx(0.37, rel=0.08)
    assert f.gamma == pytest.approx(1.43, rel=0.08)
    assert f.rms_relative < 0.05
    assert f.per_1000_interrupts == pytest.approx(1.43, rel=0.08)  # CPU per 1000 interrupts, as fitted


def test_exact_rows_give_exact_coefficients():
    f = fit(synthetic_rows(10, seed=1, noise=0.0, coeffs=(0.2, 0.5, 2.0)))
    assert (f.alpha, f.beta, f.gamma) == pytest.approx((0.2, 0.5, 2.0), rel=1e-9)


def test_savings_and_cliff_inputs():
    f = fit(synthetic_rows(10, seed=1, noise=0.0, coeffs=(0.002, 0.004, 0.006)))
    # 0.006 s per 1000 interrupts: from 100K/s to 20K/s saves 0.48 CPU-s per second.
    assert f.interrupt_savings(100_000, 20_000) == pytest.approx(0.48)
    r, mu = cliff_inputs(f, mean_packet_bytes=1000)
    assert 1 / r == pytest.approx(6e-6) and 1 / mu == pytest.approx(4e-6 + 2e-6)
    # r == mu: the cliff is r/2 * (sqrt(5) - 1), the golden ratio of the interrupt rate limit.
    assert cliff_rate(r, mu) == pytest.approx(0.618034 / 6e-6, rel=1e-5)


def test_row_converts_raw_counts():
    assert row(1.5, 2e6, 3000, 4000) == (1.5, 2.0, 3.0, 4.0)


def test_rows_that_cannot_separate_the_costs_are_refused():
    # Fixed packet size and fixed packets per interrupt: every row on one line.
    rows = [(1.0 * k, 1.0 * k, 2.0 * k, 0.5 * k) for k in range(1, 20)]
    with pytest.raises(ValueError, match="do not vary independently"):
        fit(rows)
    with pytest.raises(ValueError, match="row 1: cpu must be > 0"):
        fit([(1, 1, 1, 1), (0, 1, 1, 1), (1, 2, 1, 1), (1, 1, 2, 1)])
    with pytest.raises(ValueError, match="at least 4 rows"):
        fit([(1, 1, 1, 1)])


SIZES = (100, 1500, 600, 1200, 300, 900)  # bytes per packet, not in the order of the guests' work


def guest_rows(seed: int, alpha: float, gamma: float, app_per_kp: dict[str, float], n: int = 60):
    """Rows of guests that each run their own application (its CPU per packet) at their own
    packet size. A request/response guest's transactions rise with its interrupt rate, so its
    interrupts per packet are highest where its application's work is too: pooled, that work
    reads as interrupt cost."""
    rng = np.random.default_rng(seed)
    rows, guests = [], []
    for g, (name, app) in enumerate(app_per_kp.items()):
        size = SIZES[g]
        for _ in range(n):
            n_kp = rng.uniform(50, 500)
            n_mb = n_kp * size / 1e3
            n_ki = n_kp * (0.05 + 0.1 * g + rng.uniform(0, 0.3))  # the tuner's probes
            rows.append((alpha * n_mb + (0.37 + app) * n_kp + gamma * n_ki, n_mb, n_kp, n_ki))
            guests.append(name)
    return rows, guests


def test_a_guests_own_work_is_not_taken_for_interrupt_cost():
    rows, guests = guest_rows(3, 0.13, 1.43, {"bulk": 0.0, "web": 2.0, "cache": 4.0, "db": 6.0})
    f = fit(rows, guests)
    assert f.gamma == pytest.approx(1.43, rel=1e-6)
    assert f.rms_relative < 1e-9
    # beta: the guests' per-packet costs, weighted by their packets (alpha is in alpha, not here).
    assert 0.37 < f.beta < 0.37 + 6.0
    # One guest for all rows (Geist's single machine) cannot tell the applications apart.
    assert abs(fit(rows).gamma - 1.43) > 0.5


def test_noisy_guest_rows_give_the_interrupt_cost_within_a_few_percent():
    rows, guests = guest_rows(5, 0.13, 1.43, {"bulk": 0.0, "web": 2.0, "db": 6.0}, n=200)
    rng = np.random.default_rng(6)
    noisy = [(r[0] * (1 + rng.normal(0, 0.01)), *r[1:]) for r in rows]
    assert fit(noisy, guests).gamma == pytest.approx(1.43, rel=0.05)


@settings(max_examples=60, deadline=None)
@given(alpha=st.floats(0.0, 1.0), gamma=st.floats(0.01, 10.0),
       apps=st.lists(st.floats(0.0, 20.0), min_size=1, max_size=6), seed=st.integers(0, 2**32 - 1))
def test_exact_rows_give_gamma_and_each_guests_cost(alpha, gamma, apps, seed):
    rows, guests = guest_rows(seed, alpha, gamma, {f"g{i}": a for i, a in enumerate(apps)}, n=12)
    f = fit(rows, guests)
    assert f.gamma == pytest.approx(gamma, rel=1e-6, abs=1e-9)
    assert f.rms_relative < 1e-6
    packets = {}
    for g, r in zip(guests, rows):
        packets[g] = packets.get(g, 0.0) + r[2]
    # Each guest's packet size is its own here, so alpha folds into its beta and the total is exact.
    expected = sum((0.37 + apps[int(g[1:])] + alpha * SIZES[int(g[1:])] / 1e3) * p
                   for g, p in packets.items()) / sum(packets.values())
    assert f.alpha == 0.0
    assert f.beta == pytest.approx(expected, rel=1e-6)


def test_guest_labels_must_match_the_rows():
    rows, guests = guest_rows(1, 0.1, 1.0, {"a": 0.0})
    with pytest.raises(ValueError, match="load labels"):
        fit(rows, guests[:-1])
