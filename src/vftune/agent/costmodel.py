"""CPU cost model T = alpha*N_MB + beta*N_KP + gamma*N_KI (Geist et al.), one beta per load.

T is CPU time; N_MB millions of bytes, N_KP thousands of packets, N_KI thousands of interrupts.
Geist et al. fitted one machine's costs by total least squares over all its runs. On a KVM host
each row is one guest's, and every guest runs its own application: a request/response guest
spends its service time per transaction, which a pooled fit cannot put anywhere but on the
interrupts (they rise with the transactions when the tuner raises a rate), and finds up to twice
the interrupt's own cost (bench/cost_fit_truth.py). Here each load (the caller's label: a guest
at a packet size) has its own per-packet cost, its stack's and its application's, while the
per-byte and per-interrupt costs are the host's. Divided by its packets a row reads
T/P = beta_g + alpha*B/P + gamma*I/P, and alpha and gamma come from how T/P moves within each
load as the tuner's probes (or the load's own swings under a fixed rate) move I/P: ordinary
least squares, since the counts are exact and the CPU time is the noisy one. beta is the loads'
per-packet costs weighted by their packets. Pure logic, no dependencies.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

Row = tuple[float, float, float, float]  # (cpu, n_mb, n_kp, n_ki)


@dataclass(frozen=True)
class CostFit:
    alpha: float  # CPU per million bytes
    beta: float  # CPU per thousand packets: the loads', weighted by their packets
    gamma: float  # CPU per thousand interrupts
    rows: int
    rms_relative: float  # rms of (predicted - measured) / measured over the rows used
    condition: float  # within loads, bytes and interrupts per packet correlated (r^2): near 1, not identifiable

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


def fit(rows: Iterable[Sequence[float]], loads: Sequence[Hashable] | None = None,
        min_spread: float = 1e-6) -> CostFit:
    """Fit alpha, gamma and each load's beta to rows of (cpu, n_mb, n_kp, n_ki).

    ``loads`` labels each row's load (None: all one load). Raises ValueError with a one-line
    reason when a row is invalid or no load's interrupts per packet moved (neither the ITR
    nor the load did), which leaves gamma unknown.
    """
    data: list[tuple[float, float, float, float]] = []
    for i, r in enumerate(rows):
        if len(r) != 4:
            raise ValueError(f"row {i}: expected (cpu, n_mb, n_kp, n_ki), got {len(r)} values")
        cpu, n_mb, n_kp, n_ki = (float(v) for v in r)
        if not all(math.isfinite(v) for v in (cpu, n_mb, n_kp, n_ki)):
            raise ValueError(f"row {i}: values must be finite, got {tuple(r)!r}")
        if cpu <= 0:
            raise ValueError(f"row {i}: cpu must be > 0, got {cpu!r}")
        if min(n_mb, n_ki) < 0 or n_kp <= 0:
            raise ValueError(f"row {i}: counts must be >= 0 and packets > 0, got {tuple(r)!r}")
        data.append((cpu, n_mb, n_kp, n_ki))
    labels: Sequence[Hashable] = loads if loads is not None else [None] * len(data)
    if len(labels) != len(data):
        raise ValueError(f"{len(labels)} load labels for {len(data)} rows")
    if len(data) < 4:
        raise ValueError(f"need at least 4 rows to fit 3 costs, got {len(data)}")

    # Per row: y = T/P, x1 = B/P, x2 = I/P; each load's means, so the fit sees only within-load moves.
    per_load: dict[Hashable, list[tuple[float, float, float]]] = {}
    for label, (cpu, n_mb, n_kp, n_ki) in zip(labels, data):
        per_load.setdefault(label, []).append((cpu / n_kp, n_mb / n_kp, n_ki / n_kp))
    means = {g: tuple(sum(p[j] for p in pts) / len(pts) for j in range(3)) for g, pts in per_load.items()}
    s11 = s12 = s22 = s1y = s2y = 0.0
    for g, pts in per_load.items():
        my, m1, m2 = means[g]
        for y, x1, x2 in pts:
            d1, d2, dy = x1 - m1, x2 - m2, y - my
            s11, s12, s22 = s11 + d1 * d1, s12 + d1 * d2, s22 + d2 * d2
            s1y, s2y = s1y + d1 * dy, s2y + d2 * dy
    scale1, scale2 = (sum(m[j] ** 2 for m in means.values()) / len(means) for j in (1, 2))
    if s22 <= min_spread * len(data) * max(scale2, 1e-300):
        raise ValueError(
            "rows do not vary independently enough to separate bytes, packets and interrupts "
            "(no load's interrupts per packet moved); sample more ITRs or loads"
        )
    # Bytes per packet hardly move within a load (its packet sizes are its own) and, where they
    # do, mostly with its mix of data and ACKs, which its load moves too. So alpha is kept only
    # where it leaves every cost at zero or more; else alpha is 0 and each beta_g holds the bytes.
    det = s11 * s22 - s12 * s12
    bytes_moved = s11 > min_spread * len(data) * max(scale1, 1e-300)
    condition = s12 * s12 / (s11 * s22) if bytes_moved else 0.0

    def betas(alpha: float, gamma: float) -> dict[Hashable, float]:
        return {g: m[0] - alpha * m[1] - gamma * m[2] for g, m in means.items()}

    alpha, gamma = 0.0, s2y / s22
    if bytes_moved and det > min_spread * s11 * s22:
        a, c = (s22 * s1y - s12 * s2y) / det, (s11 * s2y - s12 * s1y) / det
        if a >= 0 and min(betas(a, c).values()) >= 0:
            alpha, gamma = a, c
    beta_of = betas(alpha, gamma)
    packets = {g: 0.0 for g in per_load}
    for label, r in zip(labels, data):
        packets[label] += r[2]
    beta = sum(beta_of[g] * packets[g] for g in per_load) / sum(packets.values())
    rms = math.sqrt(sum(
        ((alpha * r[1] + beta_of[label] * r[2] + gamma * r[3] - r[0]) / r[0]) ** 2 for label, r in zip(labels, data)
    ) / len(data))
    return CostFit(alpha=alpha, beta=beta, gamma=gamma, rows=len(data), rms_relative=rms, condition=condition)


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
