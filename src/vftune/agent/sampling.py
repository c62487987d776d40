"""Turn two snapshots into per-VF and per-PF rates. Pure: no clock, no I/O.

VF byte and packet counters on an unpatched ixgbe are copies refreshed every
2 s, so a rate is taken over the counters' own refresh times, not the snapshot
interval; between refreshes the previous rate is carried and marked not fresh.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vftune.agent.policy import PfSample, VfSample
from vftune.hostdriver.base import Inventory, Snapshot, VfCounters


@dataclass
class _VfRates:
    rx_pps: float = 0.0
    rx_bps: float = 0.0
    tx_pps: float = 0.0
    tx_bps: float = 0.0


@dataclass
class RateDeriver:
    """Keeps the last snapshot and last rates; derive() is called once per tick."""

    last: Snapshot | None = None
    carried: dict[str, _VfRates] = field(default_factory=dict)

    def derive(
        self, snap: Snapshot, inv: Inventory, itrs: dict[str, int], modes: dict[str, str]
    ) -> tuple[list[VfSample], list[PfSample]]:
        prev, self.last = self.last, snap
        if prev is None:
            return [], []
        dt = snap.time - prev.time
        if dt <= 0:
            return [], []
        vf_samples: list[VfSample] = []
        for vf in inv.vfs():
            now_c, old_c = snap.vfs.get(vf.pci), prev.vfs.get(vf.pci)
            if now_c is None or old_c is None:
                continue  # appeared or vanished this tick: no interval to rate
            rates, fresh = self._rates(vf.pci, old_c, now_c)
            ints = None
            if now_c.interrupts is not None and old_c.interrupts is not None:
                ints = max(0, now_c.interrupts - old_c.interrupts)
            cpu = None
            if vf.guest is not None:
                c1, c0 = snap.guest_cpu.get(vf.guest.name), prev.guest_cpu.get(vf.guest.name)
                if c1 is not None and c0 is not None:
                    cpu = max(0.0, c1 - c0) / dt
            vf_samples.append(
                VfSample(
                    pci=vf.pci, pf=vf.pf, t=snap.time, dt=dt,
                    rx_pps=rates.rx_pps, rx_bps=rates.rx_bps,
                    tx_pps=rates.tx_pps, tx_bps=rates.tx_bps,
                    interrupts_per_s=None if ints is None or now_c.interrupts_frozen else ints / dt,
                    interrupts=None if now_c.interrupts_frozen else ints,
                    itr=itrs.get(vf.pci, 0), guest_cpu=cpu, fresh=fresh,
                )
            )
        pf_samples = [
            PfSample(
                pf=name, t=snap.time, dt=dt,
                rx_pps=max(0, c.rx_packets - prev.pfs[name].rx_packets) / dt,
                rx_bps=max(0, c.rx_bytes - prev.pfs[name].rx_bytes) * 8 / dt,
                mode=c.current_mode or modes.get(name, "napi"),
            )
            for name, c in snap.pfs.items()
            if name in prev.pfs
        ]
        return vf_samples, pf_samples

    def _rates(self, pci: str, old: VfCounters, now: VfCounters) -> tuple[_VfRates, bool]:
        span = now.counters_time - old.counters_time
        if span <= 0:
            return self.carried.get(pci, _VfRates()), False
        rates = _VfRates(
            rx_pps=max(0, now.rx_packets - old.rx_packets) / span,
            rx_bps=max(0, now.rx_bytes - old.rx_bytes) * 8 / span,
            tx_pps=max(0, now.tx_packets - old.tx_packets) / span,
            tx_bps=max(0, now.tx_bytes - old.tx_bytes) * 8 / span,
        )
        self.carried[pci] = rates
        return rates, True
