"""Turn two snapshots into per-VF and per-PF rates. Pure: no clock, no I/O.

VF byte and packet counters on an unpatched ixgbe are copies refreshed every
2 s, so a rate is taken over the counters' own refresh times, not the snapshot
interval; between refreshes the previous rate is carried and marked not fresh.

A VF the agent says is at rest (no traffic, no interrupts, nothing its policy would do on a
quiet sample) is not rated every tick while its counts stay the same: its quiet span is rated
once, from the snapshot where it began, when the agent closes a history row or when the counts
move. On an idle host that is most VFs, and their per-tick work is then a comparison of counts.

Each VF sample also carries its port's receive load (port_view): VFs sharing a saturated port
share its line rate, so a VF's gain there may be a share taken from its neighbours, and the
tuner needs the port's total and the VF's fair share of it to tell the two apart. The share
water-fills the line rate over what the other users took at their peak over the last
share_memory_s: a neighbour that probes a low rate for a few seconds leaves room that is not
this VF's to keep, while a neighbour that never asks for more leaves room that is.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field, fields
from typing import NamedTuple, cast

from vftune.itr import LINE_RATE_BPS, WIRE_OVERHEAD_B
from vftune.model import Inventory, PfSample, Snapshot, VfCounters, VfInfo, VfSample, make_vf_sample


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


def fair_shares(capacity: float, want: dict[str, float], users: Iterable[str],
                near_share: float = NEAR_SHARE) -> dict[str, float]:
    """fair_share(capacity, [want of every other key], near_share) for each of `users` (keys of
    `want`), to the last bit, in O(n log n + k^2) for the port instead of O(n^2 log n): the
    wants are sorted once, and a user's walk skips its own place in that order. The walk of
    every user past the place where the walk over all wants stops is that walk (the same
    subtractions in the same order), so only the k users before it walk on their own, from the
    shared prefix; users with the same want get the same share."""
    values = sorted(want.values())
    n = len(values)
    if any(v != v for v in values):  # NaN: no order to share; the one-by-one reference
        return {u: fair_share(capacity, [b for k, b in want.items() if k != u], near_share) for u in users}
    near = near_share * (capacity / n) if n else 0.0  # fair_share's near_share * equal: n users each
    # The walk over every want, none skipped: prefix[i] is `left` before values[i] is looked at.
    prefix = [capacity]
    left, stop = capacity, n
    for i, rate in enumerate(values):
        if rate >= left / (n - i) or rate >= near:
            stop = i
            break
        left -= rate
        prefix.append(left)
    beyond = max(0.0, prefix[stop] / (n - stop)) if stop < n else None
    shares: dict[float, float] = {}
    out: dict[str, float] = {}
    for u in users:
        v = want[u]
        got = shares.get(v)
        if got is None:
            j = bisect.bisect_left(values, v)
            if beyond is not None and j > stop:
                got = beyond
            else:
                # Skipping place j: the same walk up to it, then on with one user fewer to count.
                left, count = prefix[j], n - j
                for rate in values[j + 1:]:
                    if rate >= left / count or rate >= near:
                        break
                    left -= rate
                    count -= 1
                got = max(0.0, left / count)
            shares[v] = got
        out[u] = got
    return out


def port_view(vf_rx: dict[str, tuple[float, float]], pf_rx: tuple[float, float],
              demand: dict[str, float] | None = None, line_rate_bps: float = LINE_RATE_BPS) -> PortView:
    """One port's receive side from its VFs' (bits/s, packets/s) by PCI address and the PF's own.

    The capacity is in the counters' bits (frames), so it depends on the mean frame size: line
    rate x frame / (frame + preamble and gap). With no packets the capacity is the line rate.
    A VF's share water-fills the capacity over the other users' `demand` (bits/s by PCI address,
    "" for the PF; default: what each receives now): fair_share for each VF, computed once for
    the port (fair_shares).
    """
    want = {pci: b for pci, (b, _) in vf_rx.items()}
    want[""] = pf_rx[0]
    want.update(demand or {})
    rx_bps = sum(b for b, _ in vf_rx.values()) + pf_rx[0]
    rx_pps = sum(p for _, p in vf_rx.values()) + pf_rx[1]
    capacity = _capacity(rx_bps, rx_pps, line_rate_bps)
    return PortView(rx_bps, capacity, fair_shares(capacity, want, vf_rx))


def _capacity(rx_bps: float, rx_pps: float, line_rate_bps: float = LINE_RATE_BPS) -> float:
    """A port's line rate in its counters' bits, for its mean frame size (port_view)."""
    frame = rx_bps / 8.0 / rx_pps if rx_pps > 0 else math.inf
    return line_rate_bps if math.isinf(frame) else line_rate_bps * frame / (frame + WIRE_OVERHEAD_B)


# A VF's rates as derive() takes them from its counters: (rx_pps, rx_bps, tx_pps, tx_bps).
_Rates = tuple[float, float, float, float]
_NO_RATES: _Rates = (0.0, 0.0, 0.0, 0.0)
_AT_REST = (0.0, 0.0)  # a VF at rest's (rx bits/s, rx packets/s) in its port's figures


@dataclass(frozen=True)
class _Layout:
    """What derive() needs of an inventory, worked out once per inventory (it changes on a
    refresh, not per tick): each VF's guest and whether it shares the guest with other VFs,
    and each port's VFs."""

    vfs: tuple[tuple[VfInfo, str | None, bool], ...]  # (VF, its guest's name, guest holds several)
    multi_guests: frozenset[str]  # guests with several VFs
    ports: tuple[tuple[str, tuple[str, ...]], ...]  # (PF name, its VFs' PCI addresses), PFs with VFs
    shared: tuple[tuple[str, str], ...] = ()  # (VF, its guest) for VFs whose guest holds several, in vfs' order

    @staticmethod
    def of(inv: Inventory) -> _Layout:
        vfs = inv.vfs()
        # A guest's socket drops are guest-wide: they are a VF's only when it is the guest's one VF.
        held = Counter(vf.guest.name for vf in vfs if vf.guest is not None)
        return _Layout(
            vfs=tuple((vf, vf.guest.name if vf.guest is not None else None,
                       vf.guest is not None and held[vf.guest.name] > 1) for vf in vfs),
            multi_guests=frozenset(g for g, n in held.items() if n > 1),
            ports=tuple((pf.name, tuple(vf.pci for vf in pf.vfs)) for pf in inv.pfs if pf.vfs),
            shared=tuple((vf.pci, vf.guest.name) for vf in vfs if vf.guest is not None and held[vf.guest.name] > 1),
        )


class Derived(NamedTuple):
    """One tick's samples: each VF rated over the tick, each PF's, and the quiet spans of VFs at
    rest that ended this tick (rated over the span; each comes before its VF's tick sample)."""

    vfs: list[VfSample]
    pfs: list[PfSample]
    quiet: list[VfSample]


def _same_counts(a: VfCounters, b: VfCounters) -> bool:
    return (a.rx_packets == b.rx_packets and a.tx_packets == b.tx_packets and a.rx_bytes == b.rx_bytes
            and a.tx_bytes == b.tx_bytes and a.interrupts == b.interrupts)


@dataclass
class RateDeriver:
    """Keeps the last snapshot and last rates; derive() is called once per tick."""

    last: Snapshot | None = None
    carried: dict[str, _Rates] = field(default_factory=dict)  # VF -> its rates at its last refresh
    carried_drops: dict[str, float] = field(default_factory=dict)  # guest -> its last drop rate
    carried_split: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # guest -> its last CPU split
    # A port user's demand: its highest rx rate over this long. Longer than a neighbour's cold
    # search, whose low probes come between higher ones.
    share_memory_s: float = 15.0
    _recent: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)
    _layout: tuple[Inventory, _Layout] | None = None
    # Per port: what its fair shares were last computed from (capacity, VFs, demands) and them.
    _last_shares: dict[str, tuple[tuple[object, ...], dict[str, float]]] = field(default_factory=dict)
    # VF at rest -> the snapshot its quiet span not yet rated began at.
    _rest_from: dict[str, Snapshot] = field(default_factory=dict)

    def derive(
        self, snap: Snapshot, inv: Inventory, itrs: Mapping[str, int], modes: Mapping[str, str],
        pending: Mapping[str, int] | None = None, resting: Set[str] = frozenset(), close_spans: bool = False,
    ) -> Derived:
        """Each VF's and PF's sample over the interval since the last snapshot, every field set
        at once (one VfSample per VF, none copied). `pending`: VF -> an ITR accepted but not in
        force yet (VfSample.itr_pending). `resting`: VFs at rest (the module's docstring): none
        of them has a tick sample while its counts stay the same; `close_spans`: their quiet
        spans are rated up to this snapshot (a history row ends here)."""
        prev, self.last = self.last, snap
        if prev is None:
            return Derived([], [], [])
        dt = snap.time - prev.time
        if dt <= 0:
            return Derived([], [], [])
        if self._layout is None or self._layout[0] is not inv:
            self._layout = (inv, _Layout.of(inv))
            known = {vf.pci for vf, _, _ in self._layout[1].vfs}
            self._rest_from = {pci: base for pci, base in self._rest_from.items() if pci in known}
        layout = self._layout[1]
        rest_from = self._rest_from
        quiet: list[VfSample] = []
        rested: set[str] = set()  # VFs at rest all tick: their port counts them at zero
        pending = pending or {}
        snap_vfs, prev_vfs = snap.vfs, prev.vfs
        snap_cpu, prev_cpu = snap.guest_cpu, prev.guest_cpu
        # Per VF rated this tick: the VfSample's fields in order, the port and guest ones filled below.
        rows: dict[str, list[object]] = {}
        cpu_of: dict[str, float | None] = {}  # guest -> its CPU s/s over the interval
        drops_of: dict[str, float | None] = {}  # guest -> its drops/s (rated once a tick per guest)
        split_of: dict[str, tuple[float, float, float] | None] = {}  # guest -> its (irq, user) s/s, likewise
        t, carried, pending_get, itrs_get = snap.time, self.carried, pending.get, itrs.get
        for vf, guest, shared in layout.vfs:
            pci = vf.pci
            now_c, old_c = snap_vfs.get(pci), prev_vfs.get(pci)
            if now_c is None or old_c is None:
                continue  # appeared or vanished this tick: no interval to rate
            base = rest_from.get(pci)
            if base is not None or pci in resting:
                start = base or prev
                start_c = start.vfs.get(pci)
                if pci in resting and start_c is not None and _same_counts(now_c, start_c):
                    rested.add(pci)
                    if close_spans:
                        quiet.append(self._quiet_span(vf, guest, shared, snap, start, itrs_get(pci, 0)))
                        start = snap
                    rest_from[pci] = start
                    continue
                if base is not None:
                    del rest_from[pci]
                    if base is not prev:  # its quiet span up to this tick, then the tick
                        quiet.append(self._quiet_span(vf, guest, shared, prev, base, itrs_get(pci, 0)))
            # The rates over the counters' own refresh times (else the last refresh's, carried).
            span = now_c.counters_time - old_c.counters_time
            if span <= 0:
                rates, fresh = carried.get(pci, _NO_RATES), False
            else:
                rates = carried[pci] = (
                    max(0, now_c.rx_packets - old_c.rx_packets) / span,
                    max(0, now_c.rx_bytes - old_c.rx_bytes) * 8 / span,
                    max(0, now_c.tx_packets - old_c.tx_packets) / span,
                    max(0, now_c.tx_bytes - old_c.tx_bytes) * 8 / span,
                )
                fresh = True
            ints = None
            n1, n0 = now_c.interrupts, old_c.interrupts
            if n1 is not None and n0 is not None:
                ints = max(0, n1 - n0)
            cpu = dropped = split = None
            if guest is not None:
                if guest in cpu_of:
                    cpu = cpu_of[guest]
                else:
                    c1, c0 = snap_cpu.get(guest), prev_cpu.get(guest)
                    cpu = cpu_of[guest] = max(0.0, c1 - c0) / dt if c1 is not None and c0 is not None else None
                if guest not in drops_of:
                    drops_of[guest], split_of[guest] = self._guest_rates(guest, snap, prev)
                split = split_of[guest]
                if not shared:
                    dropped = drops_of[guest]
            frozen = now_c.interrupts_frozen
            rows[pci] = [
                pci, vf.pf, t, dt, *rates,
                None if ints is None or frozen else ints / dt, None if frozen else ints,
                itrs_get(pci, 0), cpu, fresh,
                None, None, None,  # port_rx_bps, port_rx_capacity_bps, port_rx_share_bps
                dropped, pending_get(pci),
                None, None,  # guest_bps, rx_dropped_share_pps
                *(split if split is not None else (None, None, None)),  # guest_irq_cpu, _user_cpu, _idle_cpu
            ]
        if layout.multi_guests:
            self._guest_totals(rows, layout, drops_of)
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
        self._ports(snap.time, rows, pf_samples, layout, rested)
        return Derived(list(map(make_vf_sample, rows.values())), pf_samples, quiet)

    def end_rest(self, itrs: Mapping[str, int]) -> list[VfSample]:
        """The quiet spans not yet rated, up to the last snapshot (the agent stops), at the
        rates `itrs` (VF -> ITR in force); each VF at rest leaves it."""
        last, layout = self.last, self._layout
        if last is None or layout is None:
            return []
        spans = [
            self._quiet_span(vf, guest, shared, last, base, itrs.get(vf.pci, 0))
            for vf, guest, shared in layout[1].vfs
            if (base := self._rest_from.get(vf.pci)) is not None and base is not last and vf.pci in last.vfs
        ]
        self._rest_from = {}
        return spans

    def _quiet_span(self, vf: VfInfo, guest: str | None, shared: bool, snap: Snapshot, base: Snapshot,
                    itr: int) -> VfSample:
        """A VF at rest over its quiet span from `base` to `snap` (its counts the same at both):
        no traffic, its guest's figures over the span. Its port's figures and its share of a
        guest it shares are counted per tick, not kept over a span: not known (None), which a
        policy at rest does not read."""
        now_c, base_c = snap.vfs[vf.pci], base.vfs[vf.pci]
        dt = snap.time - base.time
        cpu = dropped = split = None
        if guest is not None:
            c1, c0 = snap.guest_cpu.get(guest), base.guest_cpu.get(guest)
            cpu = max(0.0, c1 - c0) / dt if c1 is not None and c0 is not None else None
            renewed, drops, split = _guest_rates_between(guest, snap, base)
            if not renewed:  # its agent not read again since: its last rates, as a tick shows them
                drops, split = self.carried_drops.get(guest), self.carried_split.get(guest)
            if not shared:
                dropped = drops
        ints = None if now_c.interrupts is None else 0
        return VfSample(
            pci=vf.pci, pf=vf.pf, t=snap.time, dt=dt, rx_pps=0.0, rx_bps=0.0, tx_pps=0.0, tx_bps=0.0,
            interrupts_per_s=None if ints is None else 0.0, interrupts=ints, itr=itr, guest_cpu=cpu,
            fresh=now_c.counters_time > base_c.counters_time, rx_dropped_pps=dropped,
            guest_irq_cpu=split[0] if split else None, guest_user_cpu=split[1] if split else None,
            guest_idle_cpu=split[2] if split else None,
        )

    @staticmethod
    def _guest_totals(rows: dict[str, list[object]], layout: _Layout, drops: dict[str, float | None]) -> None:
        """A guest's CPU covers all of its VFs: each VF of a guest with several is given their
        bits/s together, so its CPU per bit is the guest's, not the guest's CPU over its own bits
        (which falls whenever this VF gains, however much CPU the gain cost). Its socket drops
        are shared out by received packets: whose they were is not known, but a VF whose gain
        costs the guest's sockets their datagrams must not read it as a gain."""
        bits: dict[str, float] = {}
        packets: dict[str, float] = {}
        members: list[tuple[list[object], str]] = []
        for pci, guest in layout.shared:
            row = rows.get(pci)
            if row is None:
                continue
            members.append((row, guest))
            rx_pps, rx_bps, tx_bps = cast(float, row[_RX_PPS]), cast(float, row[_RX_BPS]), cast(float, row[_TX_BPS])
            bits[guest] = bits.get(guest, 0.0) + (rx_bps + tx_bps)
            packets[guest] = packets.get(guest, 0.0) + rx_pps
        for row, guest in members:
            rate = drops.get(guest)
            share = None
            if rate is not None:
                share = rate * cast(float, row[_RX_PPS]) / packets[guest] if packets[guest] > 0 else 0.0
            row[_GUEST_BPS], row[_DROPPED_SHARE] = bits[guest], share

    def _guest_rates(self, guest: str, snap: Snapshot,
                     prev: Snapshot) -> tuple[float | None, tuple[float, float, float] | None]:
        """A guest's socket drops per second, and its own (interrupt, user, idle) CPU seconds per
        second, between its two latest reads (one read gives both; an agent is read off the
        tick: a count may be older than its snapshot, and one not read again since the last
        snapshot carries the last rates). None where either snapshot lacks it; a count that went
        back (the guest rebooted) rates 0."""
        renewed, drops, split = _guest_rates_between(guest, snap, prev)
        if drops is None:
            self.carried_drops.pop(guest, None)
        elif not renewed:
            drops = self.carried_drops.get(guest)
        else:
            self.carried_drops[guest] = drops
        if split is None:
            self.carried_split.pop(guest, None)
        elif not renewed:
            split = self.carried_split.get(guest)
        else:
            self.carried_split[guest] = split
        return drops, split

    def _peak(self, key: str, t: float, bps: float) -> float:
        """The highest of this user's rx rates over the last share_memory_s, this one included."""
        # A monotonic deque: rates decrease from left to right, so the peak is the leftmost
        # unexpired entry; each rate enters and leaves once (O(1) a tick, not O(window)).
        recent = self._recent.get(key)
        if recent is None:
            recent = self._recent[key] = deque()
        while recent and recent[-1][1] <= bps:
            recent.pop()
        recent.append((t, bps))
        while recent[0][0] <= t - self.share_memory_s:
            recent.popleft()
        return recent[0][1]

    def _ports(self, t: float, rows: dict[str, list[object]], pf_samples: list[PfSample], layout: _Layout,
               rested: Set[str]) -> None:
        """Fill each VF's port fields, for ports whose PF and every VF were rated this tick (a VF
        at rest, `rested`, counts as rated at zero)."""
        pf_rates = {p.pf: (p.rx_bps, p.rx_pps) for p in pf_samples}
        seen: set[str] = set()
        peak, last_shares = self._peak, self._last_shares
        for pf, pcis in layout.ports:
            if pf not in pf_rates:
                continue
            members = [rows.get(pci) for pci in pcis]
            if any(m is None and pci not in rested for pci, m in zip(pcis, members)):
                continue  # part of the port unseen: its total would be too low
            rates = {pci: (cast(float, m[_RX_BPS]), cast(float, m[_RX_PPS])) if m is not None else _AT_REST
                     for pci, m in zip(pcis, members)}
            demand = {pci: peak(pci, t, bps) for pci, (bps, _) in rates.items()}
            pf_key = f"pf:{pf}"
            demand[""] = peak(pf_key, t, pf_rates[pf][0])
            seen.update(rates)
            seen.add(pf_key)
            # port_view(rates, pf_rates[pf], demand), its fair shares computed again only when
            # what they are computed from moved (the same capacity and wants give the same shares).
            pf_rx = pf_rates[pf]
            rx_bps = sum(b for b, _ in rates.values()) + pf_rx[0]
            rx_pps = sum(p for _, p in rates.values()) + pf_rx[1]
            capacity = _capacity(rx_bps, rx_pps)
            key = (capacity, pcis, *demand.values())
            last = last_shares.get(pf)
            if last is not None and last[0] == key:
                shares = last[1]
            else:
                shares = fair_shares(capacity, demand, rates)
                last_shares[pf] = (key, shares)
            for pci, m in zip(pcis, members):
                if m is None:
                    continue  # at rest: no sample this tick
                m[_PORT_BPS], m[_PORT_CAPACITY], m[_PORT_SHARE] = rx_bps, capacity, shares[pci]
        if len(self._recent) != len(seen):
            for gone in set(self._recent) - seen:
                del self._recent[gone]


def _guest_rates_between(guest: str, snap: Snapshot, base: Snapshot) -> tuple[
        bool, float | None, tuple[float, float, float] | None]:
    """Whether the guest's agent was read again between two snapshots, and its socket drops per
    second and (interrupt, user, idle) CPU seconds per second between those reads (not renewed:
    0 over no time, to be carried by the caller). None where either snapshot lacks it; a count
    that went back (the guest rebooted) rates 0."""
    t1, t0 = snap.guest_rx_drops_time.get(guest, snap.time), base.guest_rx_drops_time.get(guest, base.time)
    renewed = t1 > t0
    dt = t1 - t0 if renewed else 1.0
    drops: float | None = None
    d1, d0 = snap.guest_rx_drops.get(guest), base.guest_rx_drops.get(guest)
    if d1 is not None and d0 is not None:
        drops = max(0, d1 - d0) / dt
    split: tuple[float, float, float] | None = None
    c1, c0 = snap.guest_cpu_times.get(guest), base.guest_cpu_times.get(guest)
    if c1 is not None and c0 is not None:
        split = (max(0.0, c1.interrupts - c0.interrupts) / dt, max(0.0, c1.user - c0.user) / dt,
                 max(0.0, c1.idle - c0.idle) / dt)
    return renewed, drops, split


# Places in a derive() row (VfSample's fields in order; checked against the dataclass below).
_RX_PPS, _RX_BPS, _TX_BPS = 4, 5, 7
_PORT_BPS, _PORT_CAPACITY, _PORT_SHARE = 13, 14, 15
_GUEST_BPS, _DROPPED_SHARE = 18, 19
_FIELDS = [f.name for f in fields(VfSample)]
assert (_FIELDS[_RX_PPS], _FIELDS[_RX_BPS], _FIELDS[_TX_BPS], _FIELDS[_PORT_BPS], _FIELDS[_PORT_CAPACITY],
        _FIELDS[_PORT_SHARE], _FIELDS[16], _FIELDS[17], _FIELDS[_GUEST_BPS], _FIELDS[_DROPPED_SHARE], len(_FIELDS)) == (
    "rx_pps", "rx_bps", "tx_bps", "port_rx_bps", "port_rx_capacity_bps", "port_rx_share_bps",
    "rx_dropped_pps", "itr_pending", "guest_bps", "rx_dropped_share_pps", 23), "VfSample's fields moved"
