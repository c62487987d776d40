"""The host's own CPU cost model, fitted from the agent's samples (Geist et al.'s T = aMB + bkP + ckI).

Each interval gives one row per guest (its CPU covers all its VFs), labelled with its load
(the guest and its packets' size), which has its own per-packet cost (costmodel). The tuner's
probes move the interrupt rate while the load stays put, which is what makes the interrupt cost
separable from the per-packet and per-byte costs. Pure: samples in, a fit and a report out.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vftune.agent import costmodel
from vftune.model import VfSample


@dataclass
class CostTracker:
    max_rows: int = 4000
    min_rows: int = 30
    min_row_bps: float = 10e6
    max_rms_relative: float = 0.3
    rows: deque[tuple[str, costmodel.Row]] = field(default_factory=deque)  # (guest/size, row)
    fit: costmodel.CostFit | None = None
    last_error: str | None = None
    # Interrupt rate each VF had under its own adaptive ITR, before the agent set anything.
    baseline_ints: dict[str, float] = field(default_factory=dict)
    current_ints: dict[str, float] = field(default_factory=dict)
    tick_s: float = 0.25  # the agent's interval: a sample over several ticks weighs as several

    def __post_init__(self) -> None:
        self.rows = deque(self.rows, maxlen=self.max_rows)

    def add(self, samples: Sequence[VfSample], guest_of: Mapping[str, str],
            quiet: Sequence[VfSample] = ()) -> None:
        """One row per guest per interval: guest CPU covers all of a guest's VFs together. `quiet`:
        spans of VFs at rest (no traffic), which count in the interrupt rates, not in rows."""
        for s in quiet:
            self._rates(s)
        per_guest: dict[str, list[VfSample]] = {}
        for s in samples:
            if not self._rates(s):
                continue
            guest = guest_of.get(s.pci)
            if guest is not None:
                per_guest.setdefault(guest, []).append(s)
        for guest, group in per_guest.items():
            cpu = group[0].guest_cpu
            if cpu is None or any(not s.fresh for s in group):
                continue
            nbytes = sum((s.rx_bps + s.tx_bps) / 8 * s.dt for s in group)
            # An idle guest's CPU is its own background work, not network cost: no row.
            if nbytes * 8 / group[0].dt < self.min_row_bps:
                continue
            packets = sum((s.rx_pps + s.tx_pps) * s.dt for s in group)
            interrupts = sum(s.interrupts or 0 for s in group)
            if packets <= 0:
                continue
            # A guest's work per packet is its application's, which changes with its load: rows
            # are told apart by guest and by their packets' size (to a factor of two).
            load = f"{guest}/{round(math.log2(max(nbytes / packets, 1.0)))}"
            self.rows.append((load, costmodel.row(cpu * group[0].dt, nbytes, packets, interrupts)))

    def _rates(self, s: VfSample) -> bool:
        """Note a sample's interrupt rate (and, under the adaptive ITR, the baseline's); False
        when the host cannot see its interrupts."""
        rate = s.interrupts_per_s
        if rate is None:
            return False
        self.current_ints[s.pci] = rate
        if s.itr == 0 and s.fresh:
            # Smooth, a fifth a tick: adaptive ITR hops between classes from sample to sample.
            baseline = self.baseline_ints.get(s.pci)
            if baseline is None:
                baseline = rate
            else:
                for _ in range(max(1, round(s.dt / self.tick_s))):
                    baseline = 0.8 * baseline + 0.2 * rate
            self.baseline_ints[s.pci] = baseline
        return True

    def refit(self) -> costmodel.CostFit | None:
        """Fit over the rows held; keeps the previous fit when the rows cannot separate the costs."""
        if len(self.rows) < self.min_rows:
            self.last_error = f"{len(self.rows)} rows so far, {self.min_rows} needed"
            return None
        try:
            fit = costmodel.fit([r for _, r in self.rows], [g for g, _ in self.rows])
        except ValueError as exc:
            self.last_error = str(exc)
            return None
        if min(fit.alpha, fit.beta, fit.gamma) < 0 or fit.rms_relative > self.max_rms_relative:
            # A cost below zero (the interrupts per packet hardly moved, and noise decided) or
            # rows the model does not explain: keep the last usable fit.
            self.last_error = (
                f"fit not usable: alpha {fit.alpha:.3g}, beta {fit.beta:.3g}, gamma {fit.gamma:.3g}, "
                f"rms error {fit.rms_relative:.0%} over {fit.rows} rows"
            )
            return None
        self.fit, self.last_error = fit, None
        return fit

    def savings_cpu(self) -> float | None:
        """CPU seconds per second the set ITRs save against each VF's own adaptive ITR."""
        if self.fit is None:
            return None
        return sum(
            self.fit.interrupt_savings(before, self.current_ints[pci])
            for pci, before in self.baseline_ints.items()
            if pci in self.current_ints
        )

    def report(self) -> dict[str, Any]:
        fit = self.fit
        return {
            "fit": fit.as_dict() if fit else None,
            "cpu_per_1000_interrupts_s": fit.per_1000_interrupts if fit else None,
            "saved_cpu_s_per_s": self.savings_cpu(),
            "rows": len(self.rows),
            "note": self.last_error,
        }
