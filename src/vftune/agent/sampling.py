"""Turn two snapshots into per-VF and per-PF rates. Pure: no clock, no I/O.

VF byte and packet counters on an unpatched ixgbe are copies refreshed every
2 s, so a rate is taken over the counters' own refresh times, not the snapshot
interval; between refreshes the previous rate is carried and marked not fresh.

Each VF sample also carries its port's receive load (port_view): VFs sharing a saturated port
share its line rate, so a VF's gain there may be a share taken from its neighbours, and the
tuner needs the port's total and the VF's fair share of it to tell the two apart. The share
water-fills the line rate over what the other users took at their peak over the last
share_memory_s: a neighbour that probes a low rate for a few seconds leaves room that is not
this VF's to keep, while a neighbour that never asks for more leaves room that is.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field, replace

from vftune.itr import LINE_RATE_BPS, WIRE_OVERHEAD_B
from vftune.model import Inventory, PfSample, Snapshot, VfCounters, VfSample


@dataclass(frozen=True)
class PortView:
    rx_bps: float
    capacity_bps: float
    shares: dict[str, float]  # VF PCI address -> its max-min fair share of capacity_bps


# A port user within this fraction of the equal split wants its full share: it is held back by
# its own interrupt rate (as the VF asking may be), not a small user leaving room to others.
NEAR_SHARE = 0.9


def fair_share(capacity: float, others: list[float], near_share: float = NEAR_SHARE) -> float:
    """What max-min fair sharing of `capacity` gives one more user that asks for everything,
    while the others ask for `others` (water-filling); those within near_share of the equal
    split count as asking for everything too."""
    users = len(others) + 1
    equal = capacity / users
    left = capacity
    for rate in sorted(others):
        if rate >= left / users or rate >= near_share * equal:
            break  # this one and every larger one are held to the level too
        left -= rate
        users -= 1
    return max(0.0, left / users)


def port_view(vf_rx: dict[str, tuple[float, float]], pf_rx: tuple[float, float],
              demand: dict[str, float] | None = None, line_rate_bps: float = LINE_RATE_BPS) -> PortView:
    """One port's receive side from its VFs' (bits/s, packets/s) by PCI address and the PF's own.

    The capacity is in the counters' bits (frames), so it depends on the mean frame size: line
    rate x frame / (frame + preamble and gap). With no packets the capacity is the line rate.
    A VF's share water-fills the capacity over the other users' `demand` (bits/s by PCI address,
    "" for the PF; default: what each receives now).
    """
    want = {pci: b for pci, (b, _) in vf_rx.items()}
    want[""] = pf_rx[0]
    want.update(demand or {})
    rx_bps = sum(b for b, _ in vf_rx.values()) + pf_rx[0]
    rx_pps = sum(p for _, p in vf_rx.values()) + pf_rx[1]
    frame = rx_bps / 8.0 / rx_pps if rx_pps > 0 else math.inf
    capacity = line_rate_bps if math.isinf(frame) else line_rate_bps * frame / (frame + WIRE_OVERHEAD_B)
    shares = {pci: fair_share(capacity, [b for other, b in want.items() if other != pci]) for pci in vf_rx}
    return PortView(rx_bps, capacity, shares)


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
    carried_drops: dict[str, float] = field(default_factory=dict)  # guest -> its last drop rate
    # A port user's demand: its highest rx rate over this long. Longer than a neighbour's cold
    # search, whose low probes come between higher ones.
    share_memory_s: float = 15.0
    _recent: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)

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
        # A guest's socket drops are guest-wide: they are a VF's only when it is the guest's one VF.
        vfs_of = Counter(vf.guest.name for vf in inv.vfs() if vf.guest is not None)
        shared_drops: dict[str, float | None] = {}  # guests with several VFs: their drops/s
        for vf in inv.vfs():
            now_c, old_c = snap.vfs.get(vf.pci), prev.vfs.get(vf.pci)
            if now_c is None or old_c is None:
                continue  # appeared or vanished this tick: no interval to rate
            rates, fresh = self._rates(vf.pci, old_c, now_c)
            ints = None
            if now_c.interrupts is not None and old_c.interrupts is not None:
                ints = max(0, now_c.interrupts - old_c.interrupts)
            cpu = dropped = None
            if vf.guest is not None:
                c1, c0 = snap.guest_cpu.get(vf.guest.name), prev.guest_cpu.get(vf.guest.name)
                if c1 is not None and c0 is not None:
                    cpu = max(0.0, c1 - c0) / dt
                if vfs_of[vf.guest.name] == 1:
                    dropped = self._drop_rate(vf.guest.name, snap, prev)
                elif vf.guest.name not in shared_drops:
                    shared_drops[vf.guest.name] = self._drop_rate(vf.guest.name, snap, prev)
            vf_samples.append(
                VfSample(
                    pci=vf.pci, pf=vf.pf, t=snap.time, dt=dt,
                    rx_pps=rates.rx_pps, rx_bps=rates.rx_bps,
                    tx_pps=rates.tx_pps, tx_bps=rates.tx_bps,
                    interrupts_per_s=None if ints is None or now_c.interrupts_frozen else ints / dt,
                    interrupts=None if now_c.interrupts_frozen else ints,
                    itr=itrs.get(vf.pci, 0), guest_cpu=cpu, fresh=fresh, rx_dropped_pps=dropped,
                )
            )
        vf_samples = self._with_guest_totals(vf_samples, inv, vfs_of, shared_drops)
        pf_samples = [
            PfSample(
                pf=name, t=snap.time, dt=dt,
                rx_pps=max(0, c.rx_packets - prev.pfs[name].rx_packets) / dt,
                rx_bps=max(0, c.rx_bytes - prev.pfs[name].rx_bytes) * 8 / dt,
                mode=c.current_mode or modes.get(name, "napi"),
                switches=c.switches,
            )
            for name, c in snap.pfs.items()
            if name in prev.pfs
        ]
        return self._with_ports(snap.time, vf_samples, pf_samples, inv), pf_samples

    @staticmethod
    def _with_guest_totals(samples: list[VfSample], inv: Inventory, vfs_of: Counter[str],
                         drops: dict[str, float | None]) -> list[VfSample]:
        """A guest's CPU covers all of its VFs: each VF of a guest with several is given their
        bits/s together, so its CPU per bit is the guest's, not the guest's CPU over its own bits
        (which falls whenever this VF gains, however much CPU the gain cost). Its socket drops
        are shared out by received packets: whose they were is not known, but a VF whose gain
        costs the guest's sockets their datagrams must not read it as a gain."""
        guest_of = {vf.pci: vf.guest.name for vf in inv.vfs() if vf.guest is not None and vfs_of[vf.guest.name] > 1}
        if not guest_of:
            return samples
        bits: dict[str, float] = {}
        packets: dict[str, float] = {}
        for s in samples:
            if s.pci in guest_of:
                guest = guest_of[s.pci]
                bits[guest] = bits.get(guest, 0.0) + s.throughput_bps
                packets[guest] = packets.get(guest, 0.0) + s.rx_pps

        def shared(s: VfSample, guest: str) -> VfSample:
            rate = drops.get(guest)
            share = None
            if rate is not None:
                share = rate * s.rx_pps / packets[guest] if packets[guest] > 0 else 0.0
            return replace(s, guest_bps=bits[guest], rx_dropped_share_pps=share)

        return [shared(s, guest_of[s.pci]) if s.pci in guest_of else s for s in samples]

    def _drop_rate(self, guest: str, snap: Snapshot, prev: Snapshot) -> float | None:
        """A guest's socket drops per second between its two latest reads (an agent is read off
        the tick: a count may be older than its snapshot, and one not read again since the last
        snapshot carries the last rate). None when either snapshot lacks the guest; a count that
        went back (the guest rebooted) rates 0."""
        d1, d0 = snap.guest_rx_drops.get(guest), prev.guest_rx_drops.get(guest)
        if d1 is None or d0 is None:
            self.carried_drops.pop(guest, None)
            return None
        t1, t0 = snap.guest_rx_drops_time.get(guest, snap.time), prev.guest_rx_drops_time.get(guest, prev.time)
        if t1 <= t0:
            return self.carried_drops.get(guest)
        rate = self.carried_drops[guest] = max(0, d1 - d0) / (t1 - t0)
        return rate

    def _peak(self, key: str, t: float, bps: float) -> float:
        """The highest of this user's rx rates over the last share_memory_s, this one included."""
        # A monotonic deque: rates decrease from left to right, so the peak is the leftmost
        # unexpired entry; each rate enters and leaves once (O(1) a tick, not O(window)).
        recent = self._recent.setdefault(key, deque())
        while recent and recent[-1][1] <= bps:
            recent.pop()
        recent.append((t, bps))
        while recent[0][0] <= t - self.share_memory_s:
            recent.popleft()
        return recent[0][1]

    def _with_ports(
        self, t: float, vf_samples: list[VfSample], pf_samples: list[PfSample], inv: Inventory
    ) -> list[VfSample]:
        """Fill each VF sample's port fields, for ports whose PF and every VF were rated this tick."""
        pf_rates = {p.pf: (p.rx_bps, p.rx_pps) for p in pf_samples}
        by_pci = {s.pci: s for s in vf_samples}
        out: dict[str, VfSample] = {}
        seen: set[str] = set()
        for pf in inv.pfs:
            members = [by_pci.get(vf.pci) for vf in pf.vfs]
            if pf.name not in pf_rates or not pf.vfs or any(m is None for m in members):
                continue  # part of the port unseen: its total would be too low
            rates = {m.pci: (m.rx_bps, m.rx_pps) for m in members if m is not None}
            demand = {pci: self._peak(pci, t, bps) for pci, (bps, _) in rates.items()}
            demand[""] = self._peak(f"pf:{pf.name}", t, pf_rates[pf.name][0])
            seen.update(rates)
            seen.add(f"pf:{pf.name}")
            view = port_view(rates, pf_rates[pf.name], demand)
            for m in members:
                assert m is not None
                out[m.pci] = replace(m, port_rx_bps=view.rx_bps, port_rx_capacity_bps=view.capacity_bps,
                                     port_rx_share_bps=view.shares[m.pci])
        for gone in set(self._recent) - seen:
            del self._recent[gone]
        return [out.get(s.pci, s) for s in vf_samples]

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

