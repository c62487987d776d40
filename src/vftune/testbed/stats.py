"""Percentiles and repeat spread: the small statistics the testbed reports."""

from __future__ import annotations

import math
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
