"""What the store keeps of the ticks' samples: one row per VF and per PF each record period.

The agent ticks every 0.25 s so that the tuner's windows start soon after a change; history at
that rate would quadruple the store for nothing an operator reads. The ticks' samples are
merged over the period, each weighted by its interval, so a rate in a row is the rate over the
whole row, and a short burst still counts in it. Pure: samples in, merged samples out.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import fields, replace

from vftune.model import PfSample, VfSample, make_vf_sample

__all__ = ["SampleRecorder", "merge_pf_samples", "merge_vf_samples"]

# Per-second rates (or shares of a second) of a VfSample: the row's value is their mean over time.
VF_RATES = ("rx_pps", "rx_bps", "tx_pps", "tx_bps", "interrupts_per_s", "guest_cpu", "port_rx_bps",
            "port_rx_capacity_bps", "port_rx_share_bps", "rx_dropped_pps", "guest_bps", "rx_dropped_share_pps",
            "guest_irq_cpu", "guest_user_cpu", "guest_idle_cpu")
_rates_of = operator.attrgetter(*VF_RATES)  # a sample's VF_RATES as a tuple, in one call
_FIELDS = tuple(f.name for f in fields(VfSample))
_fields_of = operator.attrgetter(*_FIELDS)  # every field, in VfSample's order
_DT, _INTERRUPTS, _FRESH = _FIELDS.index("dt"), _FIELDS.index("interrupts"), _FIELDS.index("fresh")
_RATE_AT = tuple(_FIELDS.index(name) for name in VF_RATES)
_RX_TX_AT = tuple(_FIELDS.index(name) for name in ("rx_pps", "rx_bps", "tx_pps", "tx_bps"))


class _VfRow:
    """One VF's row being collected: running interval-weighted sums, so a tick costs one pass
    over its rates and the row one construction, whatever the record period (the same sums, in the
    same order, as averaging the samples at the end)."""

    __slots__ = ("first", "last", "count", "dt", "sums", "lasts", "interrupts", "fresh")

    def __init__(self, s: VfSample) -> None:
        self.first = self.last = s
        self.count, self.dt, self.fresh = 1, s.dt, s.fresh
        self.interrupts = s.interrupts
        values = _rates_of(s)
        self.lasts: tuple[float | None, ...] = values
        # None for a rate not known for part of the row: not known for the row.
        self.sums: list[float | None] = [None if v is None else 0.0 + v * s.dt for v in values]

    def add(self, s: VfSample) -> None:
        self.last = s
        self.count += 1
        self.dt += s.dt
        self.fresh = self.fresh or s.fresh
        self.interrupts = None if self.interrupts is None or s.interrupts is None else self.interrupts + s.interrupts
        values, dt = _rates_of(s), s.dt
        self.lasts = values
        self.sums = [None if total is None or v is None else total + v * dt for total, v in zip(self.sums, values)]

    def merged(self) -> VfSample:
        if self.count == 1:
            return self.first
        dt = self.dt
        # The last sample's fields (its setting, times, ...), with the row's span and its rates
        # over the span: what replace(last, dt=..., **rates) gives, built in one call.
        args = list(_fields_of(self.last))
        args[_DT], args[_INTERRUPTS], args[_FRESH] = dt, self.interrupts, self.fresh
        lasts = self.lasts
        for k, total in enumerate(self.sums):
            args[_RATE_AT[k]] = None if total is None else (total / dt if dt > 0 else lasts[k])
        # rx/tx rates are never None; the zero default keeps their type a float
        for at in _RX_TX_AT:
            args[at] = args[at] or 0.0
        return make_vf_sample(args)


def _mean(samples: Sequence[PfSample], name: str, dt: float) -> float | None:
    values: list[float | None] = [getattr(s, name) for s in samples]
    known = [v for v in values if v is not None]
    if len(known) < len(values):
        return None  # not known for part of the row: not known for the row
    if dt <= 0:
        return known[-1]
    return sum(v * s.dt for v, s in zip(known, samples)) / dt


def merge_vf_samples(samples: Sequence[VfSample]) -> VfSample:
    """One VF's consecutive samples as one over their whole span; the setting is the last's."""
    if not samples:
        raise ValueError("no samples to merge")
    row = _VfRow(samples[0])
    for s in samples[1:]:
        row.add(s)
    return row.merged()


def merge_pf_samples(samples: Sequence[PfSample]) -> PfSample:
    """One PF's consecutive samples as one; the mode and switch count are the last's."""
    if not samples:
        raise ValueError("no samples to merge")
    dt = sum(s.dt for s in samples)
    return replace(samples[-1], dt=dt, rx_pps=_mean(samples, "rx_pps", dt) or 0.0,
                   rx_bps=_mean(samples, "rx_bps", dt) or 0.0)


class SampleRecorder:
    """Collects each tick's samples and hands them back merged once every `every_s` of host time."""

    def __init__(self, every_s: float) -> None:
        if not every_s >= 0:
            raise ValueError(f"every_s must be >= 0, got {every_s!r}")
        self.every_s = every_s
        self._vfs: dict[str, _VfRow] = {}
        self._pfs: dict[str, list[PfSample]] = {}
        self._since: float | None = None  # start of the period being collected

    def add(self, t: float, vf_samples: Iterable[VfSample], pf_samples: Iterable[PfSample],
            quiet: Iterable[VfSample] = ()) -> None:
        """One tick's samples; `quiet`: spans of VFs at rest that ended this tick, each before its
        VF's tick sample. A span is longer than a tick, so it does not say where the period began."""
        for s in quiet:
            self._add_vf(s)
        for s in vf_samples:
            if self._since is None:
                self._since = s.t - s.dt
            self._add_vf(s)
        for p in pf_samples:
            if self._since is None:
                self._since = p.t - p.dt
            self._pfs.setdefault(p.pf, []).append(p)
        if self._since is None:
            self._since = t

    def _add_vf(self, s: VfSample) -> None:
        row = self._vfs.get(s.pci)
        if row is None:
            self._vfs[s.pci] = _VfRow(s)
        else:
            row.add(s)

    def closes(self, t: float, tick_start: float) -> bool:
        """Whether the period will be due at host time t once a tick that began at tick_start
        is added: what the agent closes its VFs' quiet spans by, so a row covers its period."""
        since = self._since if self._since is not None else tick_start
        return t - since >= self.every_s - 1e-3

    def due(self, t: float) -> bool:
        """Whether the period has run its length at host time t (with 1 ms for float steps)."""
        return self._since is not None and self.closes(t, self._since)

    def take(self) -> tuple[list[VfSample], list[PfSample]]:
        """The period's samples merged per VF and per PF, and a new period begun."""
        vfs = [row.merged() for row in self._vfs.values()]
        pfs = [merge_pf_samples(p) for p in self._pfs.values()]
        self._vfs, self._pfs, self._since = {}, {}, None
        return vfs, pfs
