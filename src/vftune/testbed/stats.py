"""Percentiles and repeat spread: the small statistics the testbed reports."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of an ascending sequence; NaN when empty.

    Nearest rank, not interpolation: a p99 is a latency some request really saw.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {q!r}")
    n = len(sorted_values)
    if n == 0:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * n))
    return float(sorted_values[rank - 1])


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def rel_spread(values: Sequence[float]) -> float:
    """(max - min) / mean of repeats: the noise a single measurement carries; 0 for one value."""
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return (max(values) - min(values)) / m if m > 0 else 0.0


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation (sample standard deviation / mean); 0 for fewer than 2 values."""
    if len(values) < 2:
        return 0.0
    m = mean(values)
    if m <= 0:
        return 0.0
    var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var) / m


def sign_test_p(wins: int, n: int) -> float:
    """One-sided sign test: the chance of at least ``wins`` of ``n`` paired rounds going one way
    if either way were equally likely (ties dropped before)."""
    if not 0 <= wins <= n:
        raise ValueError(f"need 0 <= wins <= n, got {wins} of {n}")
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2.0**n if n else 1.0


def paired_ratio(treated: Sequence[float], control: Sequence[float], *, seed: int = 0,
                 resamples: int = 2000) -> dict[str, object]:
    """Rounds measured as pairs (treated and control a few seconds apart): the median of the
    per-round ratios, its 95% bootstrap interval (seeded), and the sign test of ratio > 1."""
    if len(treated) != len(control) or not treated:
        raise ValueError(f"need equal, non-empty paired samples, got {len(treated)} and {len(control)}")
    ratios = sorted(t / c for t, c in zip(treated, control) if c > 0)
    if not ratios:
        raise ValueError("every control value is 0: no ratio to take")
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    wins = sum(r > 1.0 for r in ratios)
    untied = sum(r != 1.0 for r in ratios)
    return {"rounds": len(ratios), "median_ratio": statistics.median(ratios),
            "ci95": [meds[int(0.025 * (resamples - 1))], meds[int(0.975 * (resamples - 1))]],
            "min_ratio": ratios[0], "max_ratio": ratios[-1], "wins": wins,
            "sign_test_p": sign_test_p(wins, untied)}
