"""Cost model: recovery of known coefficients from noisy rows, and clear failures."""

from __future__ import annotations

import numpy as np
import pytest

from vftune.agent.costmodel import cliff_inputs, fit, row
from vftune.agent.hybrid import cliff_rate


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


def test_eigh3_agrees_with_numpy_on_random_symmetric_matrices():
    import numpy as np

    from vftune.agent.costmodel import eigh3

    rng = np.random.default_rng(11)
    for _ in range(200):
        b = rng.normal(size=(3, 3)) * rng.choice([1e-3, 1.0, 1e4])
        m = b @ b.T
        values, vectors = eigh3(m.tolist())
        ref_values, ref_vectors = np.linalg.eigh(m)
        assert np.allclose(values, ref_values, rtol=1e-9, atol=1e-12 * abs(ref_values).max())
        for i in range(3):
            # An eigenvector up to sign: M v = lambda v.
            v = np.array(vectors[i])
            assert np.allclose(m @ v, values[i] * v, atol=1e-8 * abs(ref_values).max())
            assert abs(np.linalg.norm(v) - 1) < 1e-12
