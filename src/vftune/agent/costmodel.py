"""CPU cost model T = alpha*N_MB + beta*N_KP + gamma*N_KI (Geist et al.), fitted by total least squares.

T is CPU time; N_MB millions of bytes, N_KP thousands of packets, N_KI thousands of interrupts.
Method as in DESIGN-NOTES: scale every observation to a common T = K (so all points lie on the
plane alpha*x + beta*y + gamma*z = K), take their centroid, the plane's normal is the eigenvector
of the smallest eigenvalue of the 3x3 scatter matrix, and (alpha, beta, gamma) = K/(n.c) * n.
Total least squares because bytes, packets and interrupts are all measured with error, not
only the CPU time. Pure logic; numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

Row = tuple[float, float, float, float]  # (cpu, n_mb, n_kp, n_ki)


@dataclass(frozen=True)
class CostFit:
    alpha: float  # CPU per million bytes
    beta: float  # CPU per thousand packets
    gamma: float  # CPU per thousand interrupts
    rows: int
    rms_relative: float  # rms of (predicted - measured) / measured over the rows used
    condition: float  # smallest / second-smallest eigenvalue: near 1 means not identifiable

    def predict(self, n_mb: float, n_kp: float, n_ki: float) -> float:
        return self.alpha * n_mb + self.beta * n_kp + self.gamma * n_ki

    @property
    def per_1000_interrupts(self) -> float:
        """CPU cost of 1000 interrupts, in the unit of the rows' CPU column."""
        return self.gamma

    def interrupt_savings(self, rate_before: float, rate_after: float) -> float:
        """CPU per second saved by going from one interrupt rate (per s) to another."""
        return self.gamma * (rate_before - rate_after) / 1000.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "alpha": self.alpha,
            "beta": self.beta,
            "gamma": self.gamma,
            "rows": self.rows,
            "rms_relative": self.rms_relative,
            "condition": self.condition,
        }


def row(cpu_s: float, nbytes: float, packets: float, interrupts: float) -> Row:
    """One observation in the model's units from raw counts (bytes, packets, interrupts)."""
    return (cpu_s, nbytes / 1e6, packets / 1e3, interrupts / 1e3)


def fit(rows: Iterable[Sequence[float]], min_separation: float = 1e-3) -> CostFit:
    """Fit alpha, beta, gamma to rows of (cpu, n_mb, n_kp, n_ki).

    Raises ValueError with a one-line reason when a row is invalid or the rows do not vary
    independently enough to tell the three costs apart (for example every row with the same
    packets per interrupt, which happens when the ITR never changes).
    """
    data = []
    for i, r in enumerate(rows):
        if len(r) != 4:
            raise ValueError(f"row {i}: expected (cpu, n_mb, n_kp, n_ki), got {len(r)} values")
        cpu, n_mb, n_kp, n_ki = (float(v) for v in r)
        if not all(math.isfinite(v) for v in (cpu, n_mb, n_kp, n_ki)):
            raise ValueError(f"row {i}: values must be finite, got {tuple(r)!r}")
        if cpu <= 0:
            raise ValueError(f"row {i}: cpu must be > 0, got {cpu!r}")
        if min(n_mb, n_kp, n_ki) < 0:
            raise ValueError(f"row {i}: counts must be >= 0, got {tuple(r)!r}")
        data.append((cpu, n_mb, n_kp, n_ki))
    if len(data) < 4:
        raise ValueError(f"need at least 4 rows to fit 3 costs, got {len(data)}")

    arr = np.asarray(data, dtype=float)
    cpu = arr[:, 0]
    counts = arr[:, 1:]
    k = float(cpu.mean())
    points = counts * (k / cpu)[:, None]  # every row scaled to T = K
    centroid = points.mean(axis=0)
    centred = points - centroid
    scatter = centred.T @ centred
    eigenvalues, eigenvectors = np.linalg.eigh(scatter)  # ascending
    if eigenvalues[1] <= 0 or eigenvalues[0] / eigenvalues[1] > 1.0 - min_separation:
        raise ValueError(
            "rows do not vary independently enough to separate bytes, packets and interrupts "
            f"(eigenvalues {eigenvalues[0]:.3g}, {eigenvalues[1]:.3g}); sample more ITRs or loads"
        )
    normal = eigenvectors[:, 0]
    denom = float(normal @ centroid)
    if abs(denom) < 1e-12:
        raise ValueError("the fitted plane passes through the origin; rows are inconsistent")
    alpha, beta, gamma = (k / denom * normal).tolist()
    predicted = counts @ np.array([alpha, beta, gamma])
    rms = float(np.sqrt(np.mean(((predicted - cpu) / cpu) ** 2)))
    return CostFit(
        alpha=alpha,
        beta=beta,
        gamma=gamma,
        rows=len(data),
        rms_relative=rms,
        condition=float(eigenvalues[0] / eigenvalues[1]),
    )


def cliff_inputs(fit_: CostFit, mean_packet_bytes: float, cpu_unit_s: float = 1.0) -> tuple[float, float]:
    """(r, mu) for hybrid.cliff_rate from a fit: 1/r = one interrupt, 1/mu = one packet, seconds.

    ``cpu_unit_s`` converts the rows' CPU unit to seconds (0.01 for jiffies at HZ=100).
    """
    if mean_packet_bytes <= 0:
        raise ValueError(f"mean_packet_bytes must be > 0, got {mean_packet_bytes!r}")
    interrupt_s = fit_.gamma / 1000.0 * cpu_unit_s
    packet_s = (fit_.beta / 1000.0 + fit_.alpha * mean_packet_bytes / 1e6) * cpu_unit_s
    if interrupt_s <= 0 or packet_s <= 0:
        raise ValueError(
            f"the fit gives non-positive costs (interrupt {interrupt_s:.3g} s, packet {packet_s:.3g} s)"
        )
    return 1.0 / interrupt_s, 1.0 / packet_s
