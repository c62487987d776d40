"""Measurement windows: a VfSample stream cut at counter refreshes, after a settle time.

Per-VF byte counters on unpatched ixgbe refresh about every 2 s (or when the PF's ethtool
statistics are read), so a 1-s sample may show no delta and the next one double. A window
therefore starts and ends on samples whose counters were refreshed (VfSample.fresh), lasts at
least window_s, and sums bytes over its samples instead of averaging rates. Pure logic.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from vftune.model import GUEST_CLOCK_TICK_S, VfSample

EPS = 1e-6


@dataclass(frozen=True)
class Window:
    """One measurement window between two counter refreshes (sums over its samples)."""

    start: float
    end: float
    bits: float
    packets: float
    interrupts: int | None
    itr: int
    rx_bits: float = 0.0
    # The port over the same window (bits), None when a sample did not show it.
    port_bits: float | None = None
    port_capacity_bits: float | None = None
    share_bits: float | None = None
    rx_packets: float = 0.0
    cpu_s: float | None = None  # the owning guest's CPU seconds over the window, when known
    # Received bits the guest's sockets dropped (VfSample.rx_dropped_pps, or its share of them on
    # a guest with several VFs, at the window's mean frame size), None when unknown: what the
    # ring counters count but no application got.
    dropped_bits: float | None = None
    # Bits of all the owning guest's VFs over the window when it owns several (cpu_s is theirs
    # together), None when this VF is its only one.
    guest_bits: float | None = None
    # The lowest bit rate over the spans between counter refreshes that make up the window (its
    # own rate when it is one span): a window whose load stopped or started inside it shows a
    # span near zero beside busy ones.
    lowest_part_bps: float | None = None
    # The owning guest's own process and idle CPU seconds over the window (its agent's
    # accounting), None when unknown for part of it.
    user_cpu_s: float | None = None
    idle_cpu_s: float | None = None

    @classmethod
    def of(cls, s: VfSample) -> Window:
        """One sample as a window (its own counter span when it is fresh)."""
        dt = s.dt
        return cls(s.t - dt, s.t, (s.rx_bps + s.tx_bps) * dt, (s.rx_pps + s.tx_pps) * dt, s.interrupts, s.itr,
                   rx_bits=s.rx_bps * dt, rx_packets=s.rx_pps * dt)

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def bps(self) -> float:
        return self.bits / self.duration

    @property
    def pps(self) -> float:
        return self.packets / self.duration

    @property
    def app_bits(self) -> float:
        """The bits that reached applications: all of them unless the guest reports socket drops."""
        return max(0.0, self.bits - (self.dropped_bits or 0.0))

    @property
    def app_bps(self) -> float:
        return self.app_bits / self.duration

    @property
    def tx_bits(self) -> float:
        return self.bits - self.rx_bits

    @property
    def tx_packets(self) -> float:
        return self.packets - self.rx_packets

    @property
    def packet_bytes(self) -> float:
        return self.bits / 8.0 / self.packets if self.packets > 0 else 0.0

    @property
    def interrupt_rate(self) -> float | None:
        """Interrupts/s over the window, when the host shows them (not with posted interrupts)."""
        if not self.interrupts or self.duration <= 0:
            return None
        return self.interrupts / self.duration

    def cpu_per_bit(self, host_irq_cost_s: float = 0.0) -> float | None:
        """CPU seconds per bit delivered, what a setting costs per Gb: the guest's CPU per bit,
        plus host_irq_cost_s per interrupt the host forwarded for this VF (its exits and
        injection, which the guest's CPU time does not show; none counted when the host cannot
        see the interrupts). A guest with several VFs spends its CPU on all of them: its CPU
        is taken over their bits together, shared in proportion to bits. A VF's own rise in CPU
        per bit then shows diluted by its share of the guest's bits, but with its sign: over this
        VF's bits alone, any gain would look cheaper whatever it cost."""
        if self.cpu_s is None or self.bits <= 0:
            return None
        guest_bits = self.bits if self.guest_bits is None else max(self.guest_bits, self.bits)
        return self.cpu_s / guest_bits + host_irq_cost_s * (self.interrupts or 0) / self.bits

    @property
    def port_load(self) -> float | None:
        """The port's received load as a share of its line rate."""
        if self.port_bits is None or not self.port_capacity_bits:
            return None
        return self.port_bits / self.port_capacity_bits


IDLE_IRQ_ALLOWANCE = 100.0  # interrupts/s beyond its packets a VF without traffic may show


def starved(w: Window) -> bool:
    """Interrupted but taking (nearly) nothing off its ring: more interrupts than packets, by
    more than an idle VF's housekeeping vectors (mailbox, watchdog) raise. That is receive
    livelock (Mogul & Ramakrishnan): a guest without NAPI spends all its CPU on interrupts at
    a rate its load cannot sustain, and its counters read like an idle VF's. Unknown (False)
    where the host cannot see the VF's interrupts (posted interrupts)."""
    rate = w.interrupt_rate
    return rate is not None and rate > w.pps + IDLE_IRQ_ALLOWANCE


# A guest with less idle than this (CPU s/s over all its vCPUs; 50 ms a second, a few of its
# clock's 10-ms ticks per window) is full: its processes get what its interrupts leave them.
FULL_IDLE_CPU = 0.05


@dataclass(frozen=True)
class AppReference:
    """The guest's processes in a window: their CPU s/s, whether its vCPUs were full, and how
    finely its clock reads that rate (one of its ticks over the window, s/s)."""

    user_cpu: float
    full: bool
    resolution: float

    @staticmethod
    def of(w: Window) -> AppReference | None:
        """None when the guest's agent does not report its accounting."""
        if w.user_cpu_s is None or w.idle_cpu_s is None or w.duration <= 0:
            return None
        return AppReference(w.user_cpu_s / w.duration, w.idle_cpu_s / w.duration <= FULL_IDLE_CPU,
                            GUEST_CLOCK_TICK_S / w.duration)


def app_share(w: Window, ref: AppReference | None) -> float:
    """What a window's merit is weighed by: the guest's process time in it against the search's
    first window, where the guest's vCPUs were full in either. Interrupts and softirqs run first,
    so on a full guest a rate that buys bits takes them from its applications (which the bench's
    merit, and the operator, count). The guest's kernel counts in whole ticks, so each reading
    is known within one: the share is taken at the end of its interval nearest 1, and is 1 where
    the interval holds 1 (a guest busy with its network work alone, whose processes get a few
    ticks a window). 1 too for a guest with idle vCPUs at both (its processes got what they
    asked), or whose agent does not report its accounting."""
    now = AppReference.of(w)
    if ref is None or now is None or not (now.full or ref.full):
        return 1.0
    low = max(0.0, now.user_cpu - now.resolution) / (ref.user_cpu + ref.resolution)
    if low > 1.0:
        return low
    above = ref.user_cpu - ref.resolution
    return 1.0 if above <= 0 else min(1.0, (now.user_cpu + now.resolution) / above)


def median_window(windows: list[Window]) -> Window:
    """The window with the median bit rate: a typical one, not a burst's."""
    ordered = sorted(windows, key=lambda w: w.bps)
    return ordered[(len(ordered) - 1) // 2]


def joined(windows: Sequence[Window]) -> Window:
    """Windows of one setting taken at different times, as one: sums over them, ending where
    the last ends and lasting as long as they do together."""
    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    duration = sum(w.duration for w in windows)
    last = windows[-1]
    irqs = [w.interrupts for w in windows]
    return Window(last.end - duration, last.end, sum(w.bits for w in windows), sum(w.packets for w in windows),
                  None if any(i is None for i in irqs) else sum(i for i in irqs if i is not None), last.itr,
                  sum(w.rx_bits for w in windows), total([w.port_bits for w in windows]),
                  total([w.port_capacity_bits for w in windows]), total([w.share_bits for w in windows]),
                  sum(w.rx_packets for w in windows), total([w.cpu_s for w in windows]),
                  total([w.dropped_bits for w in windows]), total([w.guest_bits for w in windows]),
                  min(w.bps if w.lowest_part_bps is None else w.lowest_part_bps for w in windows),
                  total([w.user_cpu_s for w in windows]), total([w.idle_cpu_s for w in windows]))


class MedianPool:
    """The latest `maxlen` windows in arrival order, kept sorted by bit rate as well, so their
    median_window is a lookup instead of a sort each window (126 VFs x 512 windows, twice a
    second). Ties in bit rate go by arrival, as median_window's stable sort orders them."""

    def __init__(self, maxlen: int) -> None:
        self._order: deque[tuple[float, int, Window]] = deque()
        self._sorted: list[tuple[float, int, Window]] = []
        self._seq = 0
        self.maxlen = maxlen

    def append(self, w: Window) -> None:
        if len(self._order) == self.maxlen:
            oldest = self._order.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, oldest[:2])]
        entry = (w.bps, self._seq, w)
        self._seq += 1
        self._order.append(entry)
        bisect.insort(self._sorted, entry)

    def extend(self, windows: Iterable[Window]) -> None:
        for w in windows:
            self.append(w)

    def clear(self) -> None:
        self._order.clear()
        self._sorted.clear()

    def __len__(self) -> int:
        return len(self._order)

    def first(self) -> Window:
        return self._order[0][2]

    def windows(self) -> Iterator[Window]:
        """The windows in arrival order."""
        return (entry[2] for entry in self._order)

    def median(self, after: Sequence[Window] = ()) -> Window:
        """median_window of these windows followed by `after` (a few more, not kept)."""
        entries = self._sorted
        if after:
            entries = entries.copy()
            for i, w in enumerate(after):
                bisect.insort(entries, (w.bps, self._seq + i, w))
        return entries[(len(entries) - 1) // 2][2]


class _Sums:
    """What a window sums over its samples, from its origin on."""

    def __init__(self, origin: float) -> None:
        self.origin = origin
        self.bits = 0.0
        self.rx_bits = 0.0
        self.packets = 0.0
        self.rx_packets = 0.0
        self.cpu: float | None = 0.0
        self.dropped: float | None = 0.0
        self.interrupts: int | None = 0
        self.port: list[float] | None = [0.0, 0.0, 0.0]  # bits, capacity bits, share bits
        self.guest_bits = 0.0
        self.shared = False  # a sample gave the bits of the guest's VFs together
        self.part_bits = 0.0  # the span since the last refresh inside the window
        self.part_s = 0.0
        self.lowest_part: float | None = None
        self.user: float | None = 0.0
        self.idle: float | None = 0.0

    def add(self, s: VfSample) -> None:
        # Each field read once (one sample a VF a tick): the same products and sums, in the same order.
        dt, rx_bps, rx_pps = s.dt, s.rx_bps, s.rx_pps
        bits = (rx_bps + s.tx_bps) * dt  # throughput_bps * dt
        self.bits += bits
        self.rx_bits += rx_bps * dt
        self.packets += (rx_pps + s.tx_pps) * dt
        self.rx_packets += rx_pps * dt
        cpu, guest_cpu = self.cpu, s.guest_cpu
        self.cpu = None if guest_cpu is None or cpu is None else cpu + guest_cpu * dt
        user, idle = self.user, self.idle
        self.user = None if user is None or s.guest_user_cpu is None else user + s.guest_user_cpu * dt
        self.idle = None if idle is None or s.guest_idle_cpu is None else idle + s.guest_idle_cpu * dt
        guest_bps = s.guest_bps
        if guest_bps is None:
            self.guest_bits += bits
        else:
            self.guest_bits += guest_bps * dt
            self.shared = True
        dropped = s.rx_dropped_pps
        if dropped is None:
            dropped = s.rx_dropped_share_pps
        if dropped is None or self.dropped is None:
            self.dropped = None
        elif rx_pps > 0:  # at the sample's mean frame size, and never more than it received
            self.dropped += min(dropped, rx_pps) * (rx_bps / rx_pps) * dt
        port = self.port
        if port is not None:
            port_bps, capacity, share = s.port_rx_bps, s.port_rx_capacity_bps, s.port_rx_share_bps
            if port_bps is None or capacity is None or share is None:
                self.port = None
            else:
                port[0] += port_bps * dt
                port[1] += capacity * dt
                port[2] += share * dt
        interrupts = self.interrupts
        if interrupts is not None:
            n = s.interrupts
            self.interrupts = None if n is None else interrupts + n
        self.part_bits += bits
        part_s = self.part_s = self.part_s + dt
        if s.fresh and part_s > 0:
            part = self.part_bits / part_s
            lowest = self.lowest_part
            self.lowest_part = part if lowest is None else min(lowest, part)
            self.part_bits, self.part_s = 0.0, 0.0

    def window(self, end: float, itr: int) -> Window:
        port: list[float | None] = list(self.port) if self.port else [None, None, None]
        return Window(self.origin, end, self.bits, self.packets, self.interrupts, itr,
                      self.rx_bits, port[0], port[1], port[2], self.rx_packets, self.cpu, self.dropped,
                      self.guest_bits if self.shared else None, self.lowest_part, self.user, self.idle)


class WindowMeter:
    """Cuts a VfSample stream into windows bounded by fresh counters, after a settle time.

    A window longer than the meter's own (the adaptive ITR's, measured over several) also
    shows its slices of the meter's own length as they end (`slice`): a load that changes
    inside the long window is seen as soon as a short one would see it."""

    def __init__(self, window_s: float) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        self.window_s = window_s
        self._length = window_s
        self._change_t = -math.inf
        self._settle_s = 0.0
        self._sums: _Sums | None = None  # None while settling
        self._slice: _Sums | None = None
        self.slice: Window | None = None  # the slice that ended at the last sample, if any
        self._last_t: float | None = None  # where the last sample ended

    def start(self, change_t: float, settle_s: float, window_s: float | None = None) -> None:
        """Forget the running window: a setting changed at change_t (sample time). Windows from
        here on last `window_s` (default: the meter's own) until the next start."""
        if window_s is not None and not window_s > 0:
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        self._change_t = change_t
        self._settle_s = settle_s
        self._length = self.window_s if window_s is None else window_s
        self._sums = self._slice = None

    @property
    def settling(self) -> bool:
        return self._sums is None

    def _open(self, t: float) -> None:
        self._sums = _Sums(t)
        self._slice = _Sums(t) if self._length > self.window_s + EPS else None

    def add(self, s: VfSample) -> Window | None:
        self.slice = None
        last_t, self._last_t = self._last_t, s.t
        if last_t is not None and s.t - s.dt > last_t + EPS and self._sums is not None:
            # Ticks this VF had no sample in (its PF's counters unreadable for a tick): a window
            # spanning them would read their traffic as none. The next window opens after the
            # gap; a settle time still running keeps its end.
            settled_at = self._change_t + self._settle_s
            self._change_t = s.t - s.dt
            self._settle_s = max(0.0, settled_at - self._change_t)
            self._sums = self._slice = None
        if s.itr_pending is not None:
            # A write is on its way (the patched VF takes it at its next fetch): the rate changes
            # somewhere after this sample, so no window counts across it and the settle time
            # runs from here.
            self._change_t = s.t
            self._sums = self._slice = None
            return None
        if self._sums is None:
            # The counters of a fresh sample were copied somewhere in (t - dt, t]: only a sample
            # that begins after the change and ends after the settle time opens a window.
            if s.fresh and s.t - s.dt >= self._change_t - EPS and s.t >= self._change_t + self._settle_s - EPS:
                self._open(s.t)
            return None
        sums = self._sums
        if s.t <= sums.origin:
            return None
        sums.add(s)
        if s.fresh and s.t - sums.origin >= self._length - EPS:
            self._open(s.t)
            return sums.window(s.t, s.itr)
        if self._slice is not None:
            self._slice.add(s)
            if s.fresh and s.t - self._slice.origin >= self.window_s - EPS:
                self.slice = self._slice.window(s.t, s.itr)
                self._slice = _Sums(s.t)
        return None
