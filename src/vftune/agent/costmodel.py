"""CPU cost model T = alpha*N_MB + beta*N_KP + gamma*N_KI (Geist et al.), fitted by total least squares.

T is CPU time; N_MB millions of bytes, N_KP thousands of packets, N_KI thousands of interrupts.
Method (Geist et al., "Performance tuning of gigabit network interfaces"): scale every
observation to a common T = K (so all points lie on the plane alpha*x + beta*y + gamma*z = K),
take their centroid, the plane's normal is the eigenvector of the smallest eigenvalue of the
3x3 scatter matrix, and (alpha, beta, gamma) = K/(n.c) * n.
Total least squares because bytes, packets and interrupts are all measured with error, not
only the CPU time. Pure logic, no dependencies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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


def eigh3(m: Sequence[Sequence[float]], sweeps: int = 50) -> tuple[list[float], list[list[float]]]:
    """Eigenvalues (ascending) and unit eigenvectors of a symmetric 3x3 matrix, by cyclic Jacobi.

    Written out rather than taken from numpy so that the agent does not carry numpy's ~16 MB
    for one 3x3 problem a minute (the agent's memory budget is 80 MB); tests hold it to
    numpy.linalg.eigh.
    """
    a = [list(map(float, r)) for r in m]
    v = [[1.0 if i == j else 0.0 for j in range(3)] for i in range(3)]
    for _ in range(sweeps):
        off = a[0][1] ** 2 + a[0][2] ** 2 + a[1][2] ** 2
        if off <= 1e-30 * max(1e-300, sum(a[i][i] ** 2 for i in range(3))):
            break
        for p, q in ((0, 1), (0, 2), (1, 2)):
            if a[p][q] == 0.0:
                continue
            theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q])
            t = math.copysign(1.0, theta) / (abs(theta) + math.sqrt(theta * theta + 1.0))
            c = 1.0 / math.sqrt(t * t + 1.0)
            sn = t * c
            for k in range(3):  # A <- A J
                akp, akq = a[k][p], a[k][q]
                a[k][p], a[k][q] = c * akp - sn * akq, sn * akp + c * akq
            for k in range(3):  # A <- J^T A
                apk, aqk = a[p][k], a[q][k]
                a[p][k], a[q][k] = c * apk - sn * aqk, sn * apk + c * aqk
            for k in range(3):  # V <- V J
                vkp, vkq = v[k][p], v[k][q]
                v[k][p], v[k][q] = c * vkp - sn * vkq, sn * vkp + c * vkq
    order = sorted(range(3), key=lambda i: a[i][i])
    return [a[i][i] for i in order], [[v[k][i] for k in range(3)] for i in order]


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

    k = sum(r[0] for r in data) / len(data)
    # Every row scaled to T = K: the points then lie on alpha*x + beta*y + gamma*z = K.
    points = [tuple(c * (k / r[0]) for c in r[1:]) for r in data]
    centroid = [sum(p[j] for p in points) / len(points) for j in range(3)]
    scatter = [[0.0] * 3 for _ in range(3)]
    for p in points:
        d = [p[j] - centroid[j] for j in range(3)]
        for a in range(3):
            for b in range(3):
                scatter[a][b] += d[a] * d[b]
    eigenvalues, eigenvectors = eigh3(scatter)  # ascending
    if eigenvalues[1] <= 0 or eigenvalues[0] / eigenvalues[1] > 1.0 - min_separation:
        raise ValueError(
            "rows do not vary independently enough to separate bytes, packets and interrupts "
            f"(eigenvalues {eigenvalues[0]:.3g}, {eigenvalues[1]:.3g}); sample more ITRs or loads"
        )
    normal = eigenvectors[0]
    denom = sum(n * c for n, c in zip(normal, centroid))
    if abs(denom) < 1e-12:
        raise ValueError("the fitted plane passes through the origin; rows are inconsistent")
    alpha, beta, gamma = (k / denom * n for n in normal)
    rms = math.sqrt(
        sum(((alpha * r[1] + beta * r[2] + gamma * r[3] - r[0]) / r[0]) ** 2 for r in data) / len(data)
    )
    return CostFit(
        alpha=alpha,
        beta=beta,
        gamma=gamma,
        rows=len(data),
        rms_relative=rms,
        condition=eigenvalues[0] / eigenvalues[1],
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
