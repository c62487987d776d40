"""Fluid (per-interval) model of one host's VFs: what each receives, at what CPU and latency.

Rates, not packets: each model step turns workloads, interrupt limits and CPU capacity into
steady rates, and the engine (engine.py) integrates them into counters. Effects, each with its
source (costs and their split in costs.py):

- Line rate per port, shared max-min fairly per direction (water-filling) between the VFs and
  the PF's own traffic; each packet carries 18 B of Ethernet header + FCS and 20 B of preamble
  and inter-frame gap on the wire (IEEE 802.3).
- Interrupt timers (Platform.timer). The 82599's EITR is a throttle: a vector fires at most once
  per interval I, and at once when the interval since its last interrupt has passed (82599
  datasheet, interrupt moderation). The Pro/1000's absolute receive delay (RADV, 1.024 us
  units) fires I after the first unreported packet. Either way events at rate e fire e / (e*I + 1) interrupts/s
  (`fired`). A packet waits for its interrupt: for the throttle, only when it lands in the
  blocked part of an interval; for the absolute delay, the packet that starts the timer waits
  all of I (`wait`, mean and p99 for Poisson arrivals).
- Guest NAPI (Salim, "When NAPI comes to town"; the mechanism in Linux net/core/dev.c): an
  interrupt schedules a poll and masks the vector; a poll that uses its whole budget stays
  scheduled and takes no new interrupt; one that drains the ring re-enables it. So the
  interrupt rate is the lesser of what the timer allows and the rate at which polls complete,
  (C - W) / c_int for a vCPU of capacity C doing packet work W: a saturated guest takes almost
  no interrupts, and bulk receive has no interrupt-driven livelock. Without NAPI (the Pro/1000
  era's interrupt-driven e1000, Platform.napi False) every interrupt is taken and its work runs
  first: receive livelock (Mogul & Ramakrishnan, "Eliminating receive livelock in an
  interrupt-driven kernel") where interrupts are not suppressed.
- GRO (costs.GRO_STACK_SHARE): the packets of one poll merge, up to 64 kB, so the stack's
  per-packet work is paid per merged packet. Packets per poll = arrivals / interrupts, or the
  NAPI budget (64) when polls run back to back.
- TCP: the receive window is what the scenario pins, else Linux's autotuning (DRS,
  tcp_rcv_space_adjust) grows it to cover the path's delay up to tcp_rmem's maximum, of which
  half is advertised (tcp_adv_win_scale = 1). The sender is ACK-clocked: the ACK for a window's
  last segment leaves at the receiver's next interrupt, so window / (RTT + I) bounds the rate.
  Bulk TCP is therefore flat over a wide range of intervals and decays only once I holds ACKs
  back (Geist et al.'s MTU-6000 TCP past a delay of ~2000). The rx ring (512 descriptors on
  ixgbevf, 256 on e1000) takes at most a ring per interval.
- UDP: arrivals ignore the receiver. Kernel work (and, without NAPI, interrupts) comes first;
  the receiving application gets the rest of the vCPU, and under NAPI at overload ksoftirqd
  shares the core with it (pfmode.napi_kernel_share). Where the kernel keeps up but the
  application does not, polls complete, interrupts are not suppressed and their cost starves the
  application: Salah & Qahtan's cliff. The VF counters count what the kernel took off the ring;
  the socket drops the rest.
- Counted bytes are not goodput: each merged GRO packet is ACKed, so fewer packets per poll send
  more ACKs, whose bytes the VF's tx counters count (VfRates.delivered_bps is what applications
  get).
- Request/response: response time = network RTT + service + wire time + CPU time + the
  coalescing wait of the request; throughput = requests in flight / response time (Little's law),
  capped by the vCPU and the link. Mean and p99 of the response time are reported.

Elsewhere: adaptive.py is ixgbevf's adaptive ITR (the untuned default), pfmode.py the PF's
host traffic under DE/NAPI/hybrid (Salah & Qahtan), noise.py the seeded jitter and bursts,
engine.py counter refresh, contention for cores and host profiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from vftune.itr import LINE_RATE_BPS, MTU, frame_bytes, wire_bytes
from vftune.sim.costs import (
    APP_CALL_PACKETS,
    EXIT_CYCLES,
    EXITS_PER_INTERRUPT,
    GRO_MAX_SEGS,
    GRO_STACK_SHARE,
    HOST_IRQ_CYCLES,
    Costs,
    cpu_costs,
    cycles_s,
)
from vftune.sim.pfmode import napi_kernel_share
from vftune.sim.workload import HostSpec, Idle, Poll, RequestResponse, Stream, Transmit, Workload

NAPI_BUDGET = 64  # per poll (NAPI_POLL_WEIGHT)
LIVELOCK_FLOOR = 0.01  # share of its CPU a livelocked receiver's application still gets
ADV_WIN_FRACTION = 0.5  # tcp_adv_win_scale = 1: half the receive buffer is window
TCPIP_HEADERS = 52  # IPv4 + TCP with timestamps
UDPIP_HEADERS = 28
TCP_PAYLOAD = MTU - TCPIP_HEADERS
ACK_BYTES = 52
INF = float("inf")


DEFAULT_STACK = cpu_costs(2.6)


@dataclass(frozen=True)
class Platform:
    """What the physics needs to know about the host: NIC, CPU and kernel."""

    line_rate_bps: float = LINE_RATE_BPS
    timer: str = "throttle"  # "throttle" (82599 EITR) or "absolute" (Pro/1000 RADV)
    ring: int = 512
    napi: bool = True
    gro: bool = True
    stack: Costs = DEFAULT_STACK
    irq_exit_s: float = EXITS_PER_INTERRUPT * cycles_s(EXIT_CYCLES, 2.6)
    host_irq_s: float = cycles_s(HOST_IRQ_CYCLES, 2.6)
    tcp_window_max: float = 6_291_456 * ADV_WIN_FRACTION
    # The sending host's CPU costs when the testbed's sender is a host like this one, with the same
    # NIC settings (sender_bound_pps); None: the far end is not CPU-bound, the workload's rate holds.
    sender: Costs | None = None

    @property
    def per_interrupt_s(self) -> float:
        return self.stack.per_interrupt_s + self.irq_exit_s


NIC_LINE_BPS = {"82599": 10e9, "pro1000": 1e9}


def platform_for(spec: HostSpec) -> Platform:
    """The Platform of a scenario's host profile."""
    ghz = spec.cpu_ghz
    if spec.nic == "pro1000":  # a NetBurst-era host: e1000 without NAPI or GRO, bare metal
        return Platform(line_rate_bps=1e9, timer="absolute", ring=256, napi=False, gro=False,
                        stack=cpu_costs(ghz, 1.0), irq_exit_s=0.0, host_irq_s=0.0,
                        tcp_window_max=spec.tcp_rmem_max * ADV_WIN_FRACTION)
    posted = spec.posted_interrupts
    return Platform(
        line_rate_bps=NIC_LINE_BPS.get(spec.nic, LINE_RATE_BPS),
        stack=cpu_costs(ghz),
        irq_exit_s=0.0 if posted else EXITS_PER_INTERRUPT * cycles_s(EXIT_CYCLES, ghz),
        host_irq_s=0.0 if posted else cycles_s(HOST_IRQ_CYCLES, ghz),
        tcp_window_max=spec.tcp_rmem_max * ADV_WIN_FRACTION,
    )


DEFAULT_PLATFORM = Platform()


class VfInput(NamedTuple):  # a tuple: built for every VF at every step, so it must be cheap
    workload: Workload
    itr: float  # the rate the vector is throttled to now (interrupts/s; 1/delay for Pro/1000)
    capacity: float  # CPU seconds per second its receive vCPU can spend (per queue)
    load_factor: float = 1.0  # seeded noise, bursts and ramps on the offered load
    queues: int = 1  # RSS: receive queues, each with its own vector and vCPU
    microburst_gain: float = 1.0  # arrivals come in bursts at this many times the mean rate ...
    microburst_s: float = 0.0  # ... each this long, silent between them (0: smooth)
    runq_s: float = 0.0  # mean wait of a woken vCPU in the host's run queue (overcommit)


class VfRates(NamedTuple):
    rx_pps: float
    rx_Bps: float  # frame bytes/s as the VF counters count them
    tx_pps: float
    tx_Bps: float
    offered_bps: float  # IP bits/s the port carries to this VF
    delivered_bps: float  # IP bits/s that reach the guest's application
    interrupts_per_s: float
    guest_cpu: float  # seconds/second in the guest for network work
    host_cpu: float  # seconds/second of host irq work for this VF's interrupts
    rx_wire_bps: float = 0.0
    tx_wire_bps: float = 0.0
    latency_mean_s: float | None = None  # request/response only
    latency_p99_s: float | None = None
    socket_drop_pps: float = 0.0  # UDP: taken off the ring, dropped at the socket (RcvbufErrors)
    # Share of the CPU its guest's own application wanted that it got (1: none wanted, or all
    # of it); the engine sets it once the guest's network work is known.
    app_progress: float = 1.0


ZERO = VfRates(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


# -- interrupt timing ---------------------------------------------------------------------


def fired(events_per_s: float, itr: float) -> float:
    """Interrupts/s a timer allows for events at this rate (at most one per interval)."""
    if events_per_s <= 0.0:
        return 0.0
    return events_per_s / (events_per_s / itr + 1.0)


interrupt_rate = fired  # the name the agent-side tests know


def wait(events_per_s: float, itr: float, timer: str) -> tuple[float, float]:
    """Mean and p99 of the time an arriving packet waits for its interrupt (Poisson arrivals)."""
    interval = 1.0 / itr
    x = events_per_s * interval  # events per interval
    if timer == "absolute":
        # The packet that starts the timer waits all of I, the x that follow wait less.
        mean = interval * (1.0 + x / 2.0) / (1.0 + x)
        return mean, interval
    # Throttle: a fraction x/(1+x) of arrivals lands in the blocked part, uniformly.
    blocked = x / (1.0 + x)
    mean = blocked * interval / 2.0
    p99 = interval * max(0.0, 1.0 - 0.01 / blocked) if blocked > 0.0 else 0.0
    return mean, p99


def ring_pps(plat: Platform, vf: VfInput) -> float:
    """Packets/s the rx ring can take: at most a ring per interrupt interval. With microbursts
    (gain g, bursts of b seconds carrying all the traffic, so one burst per g*b seconds) a burst
    finds an empty ring and is drained once per interval while it lasts: a ring plus b*itr rings
    per burst, so a burst shorter than the interval overflows whatever the rate (the NIC drops
    what does not fit: rx_missed)."""
    rings_per_s = vf.itr
    if vf.microburst_gain > 1.0 and vf.microburst_s > 0.0:
        b = vf.microburst_s
        rings_per_s = (1.0 + b * vf.itr) / (vf.microburst_gain * b)
    return plat.ring * rings_per_s


def fired_bursty(events_per_s: float, vf: VfInput) -> float:
    """Interrupts/s the timer allows for these events, which come in the VF's microbursts (if
    any): the timer fires within bursts only, at the burst's rate, for 1/gain of the time."""
    g = vf.microburst_gain
    if g > 1.0 and vf.microburst_s > 0.0:
        return fired(events_per_s * g, vf.itr) / g
    return fired(events_per_s, vf.itr)


def napi_interrupts(timer_rate: float, capacity: float, work: float, per_interrupt: float) -> float:
    """Interrupts/s under NAPI: what the timer allows, at most the rate polls complete."""
    return min(timer_rate, max(0.0, (capacity - work) / per_interrupt))


def cpu_bound_events(capacity: float, per_event_s: float, per_interrupt_s: float, itr: float) -> float:
    """Largest event rate v with per_interrupt * fired(v) + per_event * v = capacity, interrupts
    taken for every interval with an arrival (no NAPI): the positive root of
    e*I*v^2 + (Ci + e - C*I)*v - C = 0, in the form that stays accurate when the linear term dominates."""
    if capacity <= 0.0:
        return 0.0
    interval = 1.0 / itr
    b = per_interrupt_s + per_event_s - capacity * interval
    disc = b * b + 4.0 * per_event_s * interval * capacity
    return 2.0 * capacity / (b + math.sqrt(disc))


def sender_bound_pps(packet_bytes: float, acked: bool, itr: float, sender: Costs) -> float:
    """Packets/s one sending host's CPU sustains (netperf on a host like the receiver, one CPU).

    Per packet it pays the receiver's per-byte and per-packet costs on the way out (the copy from
    the application and the protocol and driver work: the transmit path does the same work per
    byte and per packet as the receive path it mirrors, an assumption, not a fit); a UDP sender
    one send call per datagram (APP_CALL_PACKETS, as the receiver's recvmsg); a TCP sender the
    receive path of one ACK per two segments. Its NIC raises an interrupt per timer interval that
    saw a transmit completion or an ACK, at the receiver's setting (`fired`, no NAPI: e1000 of
    the Pro/1000 era). The bound is the rate where that work fills the CPU (cpu_bound_events).
    """
    acks = 0.5 if acked else 0.0
    calls = 0.0 if acked else APP_CALL_PACKETS
    per_packet = sender.per_byte_s * packet_bytes + sender.per_packet_s * (1.0 + acks + calls)
    events = 1.0 + acks  # completions and ACKs per packet sent
    return cpu_bound_events(1.0, per_packet / events, sender.per_interrupt_s, itr) / events


def line_payload_Bps(packet_bytes: float, line_rate_bps: float = LINE_RATE_BPS) -> float:
    """IP bytes/s one port carries at line rate with packets of this size."""
    return line_rate_bps / 8.0 * packet_bytes / wire_bytes(packet_bytes)


def gro_merge(packets_per_poll: float, plat: Platform) -> float:
    if not plat.gro or packets_per_poll <= 1.0:
        return 1.0
    return packets_per_poll if packets_per_poll < GRO_MAX_SEGS else float(GRO_MAX_SEGS)


def _tcp_segment_s(s: float, merge: float, plat: Platform) -> float:
    c = plat.stack
    return c.per_byte_s * s + c.per_packet_s * ((1.0 - GRO_STACK_SHARE) + GRO_STACK_SHARE / merge)


# -- bulk streams ---------------------------------------------------------------------------


def _stream(w: Stream, vf: VfInput, plat: Platform, link_wire_bps: float) -> VfRates:
    s = float(w.packet_bytes)
    itr = float(vf.itr)
    interval = 1.0 / itr
    line = line_payload_Bps(s, plat.line_rate_bps)
    # The remote sender's jitter and bursts reach every flow (a burst is clipped by the link).
    base = w.offered_bps / 8.0 if w.offered_bps is not None else line
    sender = base * vf.load_factor
    if plat.sender is not None:  # the sending host's own CPU
        sender = min(sender, sender_bound_pps(s, w.acked, itr, plat.sender) * s)
    link = link_wire_bps / 8.0 * s / wire_bytes(s)  # what the port leaves this VF
    ring = ring_pps(plat, vf) * s
    cap = vf.capacity
    ci = plat.per_interrupt_s
    if w.acked:
        payload = max(1.0, s - TCPIP_HEADERS)
        window = w.window_bytes if w.window_bytes is not None else plat.tcp_window_max
        window_bound = window / (w.rtt_s + interval) * s / payload
        if plat.napi:  # saturated: polls run back to back with full budgets, GRO at its best
            cpu = cap / _tcp_segment_s(s, gro_merge(NAPI_BUDGET, plat), plat) * s
        else:
            cpu = cpu_bound_events(cap, _tcp_segment_s(s, 1.0, plat), ci, itr) * s
        delivered = min(sender, link, window_bound, ring, cpu)
        pps = delivered / s
        timer = fired_bursty(pps, vf)
        if plat.napi:
            ints = timer
            for _ in range(2):  # packets per poll set GRO, GRO sets the work, work sets polls
                merge = gro_merge(pps / ints if ints > 0 else NAPI_BUDGET, plat)
                work = pps * _tcp_segment_s(s, merge, plat)
                ints = napi_interrupts(timer, cap, work, ci)
        else:
            ints = timer
            work = pps * _tcp_segment_s(s, 1.0, plat)
        merge = gro_merge(pps / ints if ints > 0 else NAPI_BUDGET, plat)
        ack_pps = pps / max(2.0, merge)  # delayed ACK, or one per merged packet
        guest_cpu = min(cap, work + ints * ci)
        arrivals_pps = pps
        offered = delivered if link_wire_bps == INF else min(sender, link)
        socket_drops = 0.0  # TCP: the window holds the sender back, nothing is dropped at the socket
    else:
        arrivals = min(sender, link)
        arrivals_pps = arrivals / s
        c = plat.stack
        kernel_per = c.per_packet_s + c.per_byte_s * s
        app_per = APP_CALL_PACKETS * c.per_packet_s
        timer = fired_bursty(arrivals_pps, vf)
        # The ring overflows when more than a ring arrives per interrupt (the NIC drops the rest),
        # unless NAPI polls already run back to back.
        back_to_back = plat.napi and arrivals_pps * kernel_per >= cap
        taken = arrivals_pps if back_to_back else min(arrivals_pps, ring_pps(plat, vf))
        if plat.napi:
            kernel_need = taken * kernel_per
            ints = napi_interrupts(timer, cap, kernel_need, ci)
            kernel_need += ints * ci
            kernel = min(kernel_need, cap * napi_kernel_share(NAPI_BUDGET)) if kernel_need > cap else kernel_need
            processed = taken * min(1.0, kernel / kernel_need) if kernel_need > 0 else 0.0
            app_cpu = cap - kernel
        else:
            ints = timer  # interrupts are never suppressed: their work always comes first
            kernel_need = ints * ci + taken * kernel_per
            kernel = min(cap, kernel_need)
            processed = taken if kernel_need <= cap else max(0.0, cap - ints * ci) / kernel_per
            app_cpu = max(LIVELOCK_FLOOR * cap, cap - kernel)
        delivered_pps = min(processed, app_cpu / app_per)
        delivered = delivered_pps * s
        # The VF counters count what the guest took off the ring; what its socket then drops
        # for want of a reader never reaches the application.
        pps = processed
        guest_cpu = min(cap, kernel + delivered_pps * app_per)
        ack_pps = 0.0
        offered = arrivals
        socket_drops = max(0.0, processed - delivered_pps)
    return VfRates(
        rx_pps=pps,
        rx_Bps=pps * frame_bytes(s),
        tx_pps=ack_pps,
        tx_Bps=ack_pps * frame_bytes(ACK_BYTES),
        offered_bps=offered * 8.0,
        delivered_bps=delivered * 8.0,
        interrupts_per_s=ints,
        guest_cpu=guest_cpu,
        host_cpu=plat.host_irq_s * ints,
        rx_wire_bps=arrivals_pps * wire_bytes(s) * 8.0,
        tx_wire_bps=ack_pps * wire_bytes(ACK_BYTES) * 8.0,
        socket_drop_pps=socket_drops,
    )


# -- request/response ------------------------------------------------------------------------


def _packets(payload: int, mtu: int) -> int:
    return max(1, math.ceil(payload / (mtu - TCPIP_HEADERS)))


def _latency_bound_tps(k: float, base: float, rx_pkts: int, interval: float, timer: str) -> float:
    """Transactions/s of k in flight when each takes `base` plus the request's coalescing wait.

    Little's law x = k / (base + wait(x)) with wait() as in `wait` for requests arriving at
    x * rx_pkts per second; multiplying out the wait's denominator leaves a quadratic in x.
    """
    a = rx_pkts * interval  # requests' packets per interval, per transaction/s
    if timer == "absolute":  # wait = I (1 + a x / 2) / (1 + a x)
        qa, qb = base * a + interval * a / 2.0, base + interval - k * a
    else:  # wait = I * (a x) / (1 + a x) / 2
        qa, qb = base * a + interval * a / 2.0, base - k * a
    return (-qb + math.sqrt(qb * qb + 4.0 * qa * k)) / (2.0 * qa)


def _rr(w: RequestResponse, vf: VfInput, plat: Platform, rx_wire_bps: float, tx_wire_bps: float) -> VfRates:
    if vf.capacity <= 0.0:
        return ZERO
    mtu = w.mtu
    rx_pkts, tx_pkts = _packets(w.request_bytes, mtu), _packets(w.response_bytes, mtu)
    c = plat.stack
    rx_ip = w.request_bytes + TCPIP_HEADERS * rx_pkts  # IP bytes per transaction each way
    tx_ip = w.response_bytes + TCPIP_HEADERS * tx_pkts
    # Guest CPU per transaction: every packet both ways, the bytes, a receive and a send call.
    per_txn = (c.per_byte_s * (rx_ip + tx_ip) + c.per_packet_s * (rx_pkts + tx_pkts)
               + 2 * APP_CALL_PACKETS * c.per_packet_s + w.service_s)
    events_per_txn = float(rx_pkts + tx_pkts)  # tx completions fire the same vector
    itr = float(vf.itr)
    ci = plat.per_interrupt_s
    rx_wire_per_txn = 8.0 * (rx_ip + wire_bytes(0) * rx_pkts)
    tx_wire_per_txn = 8.0 * (tx_ip + wire_bytes(0) * tx_pkts)
    line_bps = plat.line_rate_bps
    tps_line = min(min(rx_wire_bps, line_bps) / rx_wire_per_txn, min(tx_wire_bps, line_bps) / tx_wire_per_txn)
    # The larger message crosses the wire once per transaction.
    wire_s = max(rx_wire_per_txn, tx_wire_per_txn) / line_bps
    # A request's vCPU may first wait in the host's run queue (overcommit: engine.py).
    base = w.rtt_s + wire_s + per_txn / vf.capacity + vf.runq_s
    concurrency = w.concurrency * vf.load_factor
    tps = min(_latency_bound_tps(concurrency, base, rx_pkts, 1.0 / itr, plat.timer), tps_line)
    ints = 0.0
    for _ in range(10):  # the CPU bound depends on the interrupt rate, which depends on tps
        timer = fired(tps * events_per_txn, itr)
        ints = napi_interrupts(timer, vf.capacity, tps * per_txn, ci) if plat.napi else timer
        tps_cpu = max(0.0, vf.capacity - ints * ci) / per_txn
        if tps_cpu >= tps * 0.9999:
            break
        # Under NAPI a saturated guest takes no interrupts: one step lands on the bound. Without
        # NAPI fewer transactions mean fewer interrupts: halve the way to the fixed point.
        tps = tps_cpu if plat.napi else 0.5 * (tps + tps_cpu)
    mean_wait, p99_wait = wait(tps * rx_pkts, itr, plat.timer)
    latency = concurrency / tps if tps > 0 else INF  # Little's law: queueing when CPU or link bound
    p99 = latency - mean_wait + p99_wait
    return VfRates(
        rx_pps=tps * rx_pkts,
        rx_Bps=tps * (rx_ip + frame_bytes(0) * rx_pkts),
        tx_pps=tps * tx_pkts,
        tx_Bps=tps * (tx_ip + frame_bytes(0) * tx_pkts),
        offered_bps=tps * (rx_ip + tx_ip) * 8.0,
        delivered_bps=tps * (rx_ip + tx_ip) * 8.0,
        interrupts_per_s=ints,
        guest_cpu=min(vf.capacity, ints * ci + per_txn * tps),
        host_cpu=plat.host_irq_s * ints,
        rx_wire_bps=tps * rx_wire_per_txn,
        tx_wire_bps=tps * tx_wire_per_txn,
        latency_mean_s=latency,
        latency_p99_s=p99,
    )


def _idle(w: Idle, vf: VfInput, plat: Platform) -> VfRates:
    pps = w.pps * vf.load_factor
    ints = fired(pps, float(vf.itr))
    s = float(w.packet_bytes)
    return VfRates(
        rx_pps=pps,
        rx_Bps=pps * frame_bytes(s),
        tx_pps=0.0,
        tx_Bps=0.0,
        offered_bps=pps * s * 8.0,
        delivered_bps=pps * s * 8.0,
        interrupts_per_s=ints,
        guest_cpu=plat.stack.seconds(pps * s, pps, 0.0) + ints * plat.per_interrupt_s,
        host_cpu=plat.host_irq_s * ints,
        rx_wire_bps=pps * wire_bytes(s) * 8.0,
    )


# -- transmit-heavy and poll-mode guests ------------------------------------------------------

TSQ_BYTES = 1_048_576  # net.ipv4.tcp_limit_output_bytes (Linux 6.1's default)
DELAYED_ACK_SEGMENTS = 2  # the remote receiver ACKs every second full segment (RFC 1122)
ACK_COST_SHARE = 0.5  # an ACK carries no data: no copy or socket queueing (assumption, not fitted)
TSO_SEGMENTS = GRO_MAX_SEGS  # a TSO send of 64 kB is one descriptor chain and one completion
# A poll-mode driver's per-packet work against the kernel path's: DPDK's ixgbe PMD takes tens
# of millions of packets per second per core where the kernel stack takes about one
# (assumption from the PMD's published performance reports, not fitted).
POLL_PACKET_SHARE = 0.05


def _transmit(w: Transmit, vf: VfInput, plat: Platform, tx_wire_bps: float) -> VfRates:
    """Bulk TCP sent by the guest. TCP Small Queues (tcp_small_queue_check) lets a socket have
    at most TSQ_BYTES below it until transmit completions free them, and completions are
    cleaned in the poll an interrupt starts: at most TSQ_BYTES per interval. ACKs wait for the
    sender's interrupt as data does at a receiver, so window / (RTT + I) bounds the rate. The
    sender's CPU: the copy (per byte), one TSO send and completion per 64 kB, the ACKs."""
    s = float(w.packet_bytes)
    itr = float(vf.itr)
    interval = 1.0 / itr
    payload = max(1.0, s - TCPIP_HEADERS)
    line = line_payload_Bps(s, plat.line_rate_bps)
    base = w.offered_bps / 8.0 if w.offered_bps is not None else line
    sender = base * vf.load_factor
    link = min(tx_wire_bps, plat.line_rate_bps) / 8.0 * s / wire_bytes(s)
    window = w.window_bytes if w.window_bytes is not None else plat.tcp_window_max
    window_bound = window / (w.rtt_s + interval) * s / payload
    tsq_bound = TSQ_BYTES * itr
    c = plat.stack
    ack_per_packet = 1.0 / DELAYED_ACK_SEGMENTS
    sends_per_packet = 1.0 / TSO_SEGMENTS if plat.gro else 1.0  # TSO where the NIC offloads
    per_packet_s = (c.per_byte_s * s + c.per_packet_s * sends_per_packet * (1.0 + APP_CALL_PACKETS)
                    + c.per_packet_s * ACK_COST_SHARE * ack_per_packet)
    cap = vf.capacity
    ci = plat.per_interrupt_s
    events_per_packet = ack_per_packet + sends_per_packet  # ACKs in, completions out: one vector
    cpu = max(0.0, cap) / per_packet_s * s
    pps = min(sender, link, window_bound, tsq_bound, cpu) / s
    timer = fired_bursty(pps * events_per_packet, vf)
    if plat.napi:
        ints = napi_interrupts(timer, cap, pps * per_packet_s, ci)
    else:
        ints = timer
        pps = min(pps, max(0.0, cap - ints * ci) / per_packet_s)
    ack_pps = pps * ack_per_packet
    return VfRates(
        rx_pps=ack_pps,
        rx_Bps=ack_pps * frame_bytes(ACK_BYTES),
        tx_pps=pps,
        tx_Bps=pps * frame_bytes(s),
        offered_bps=pps * s * 8.0,
        delivered_bps=pps * s * 8.0,
        interrupts_per_s=ints,
        guest_cpu=min(cap, pps * per_packet_s + ints * ci),
        host_cpu=plat.host_irq_s * ints,
        rx_wire_bps=ack_pps * wire_bytes(ACK_BYTES) * 8.0,
        tx_wire_bps=pps * wire_bytes(s) * 8.0,
    )


def _poll(w: Poll, vf: VfInput, plat: Platform, rx_wire_bps: float) -> VfRates:
    """A poll-mode driver: its core spins on the ring with interrupts off, whatever the load,
    so it spends its whole vCPU, raises no interrupts, and the ITR changes nothing."""
    s = float(w.packet_bytes)
    line = line_payload_Bps(s, plat.line_rate_bps)
    base = w.offered_bps / 8.0 if w.offered_bps is not None else line
    link = min(rx_wire_bps, plat.line_rate_bps) / 8.0 * s / wire_bytes(s)
    cpu = max(0.0, vf.capacity) / (plat.stack.per_packet_s * POLL_PACKET_SHARE) * s
    pps = min(base * vf.load_factor, link, cpu) / s
    return VfRates(
        rx_pps=pps,
        rx_Bps=pps * frame_bytes(s),
        tx_pps=0.0,
        tx_Bps=0.0,
        offered_bps=pps * s * 8.0,
        delivered_bps=pps * s * 8.0,
        interrupts_per_s=0.0,
        guest_cpu=max(0.0, vf.capacity),
        host_cpu=0.0,
        rx_wire_bps=pps * wire_bytes(s) * 8.0,
    )


def _spread(vf: VfInput, rx_cap_wire_bps: float, tx_cap_wire_bps: float, plat: Platform) -> VfRates:
    """RSS: a VF with q receive queues is q single-queue VFs, each with 1/q of the offered load
    (and of the transactions in flight), its own vector and its own vCPU; each flow keeps its
    own window. Rates add up over the queues; response times are each queue's."""
    q = vf.queues
    one = vf_rates(vf._replace(queues=1, load_factor=vf.load_factor / q),
                   min(rx_cap_wire_bps, plat.line_rate_bps) / q, min(tx_cap_wire_bps, plat.line_rate_bps) / q, plat)
    return one._replace(
        rx_pps=one.rx_pps * q, rx_Bps=one.rx_Bps * q, tx_pps=one.tx_pps * q, tx_Bps=one.tx_Bps * q,
        offered_bps=one.offered_bps * q, delivered_bps=one.delivered_bps * q,
        interrupts_per_s=one.interrupts_per_s * q, guest_cpu=one.guest_cpu * q, host_cpu=one.host_cpu * q,
        rx_wire_bps=one.rx_wire_bps * q, tx_wire_bps=one.tx_wire_bps * q, socket_drop_pps=one.socket_drop_pps * q)


def vf_rates(vf: VfInput, rx_cap_wire_bps: float = INF, tx_cap_wire_bps: float = INF,
             plat: Platform = DEFAULT_PLATFORM) -> VfRates:
    """One VF's steady rates, given what the port leaves it in each direction."""
    w = vf.workload
    if vf.queues > 1 and not isinstance(w, Idle):
        return _spread(vf, rx_cap_wire_bps, tx_cap_wire_bps, plat)
    if isinstance(w, Transmit):
        return _transmit(w, vf, plat, tx_cap_wire_bps)
    if isinstance(w, Poll):
        return _poll(w, vf, plat, rx_cap_wire_bps)
    if isinstance(w, Stream):
        return _stream(w, vf, plat, rx_cap_wire_bps)
    if isinstance(w, RequestResponse):
        return _rr(w, vf, plat, rx_cap_wire_bps, tx_cap_wire_bps)
    return _idle(w, vf, plat)


def water_fill(capacity: float, demands: list[float]) -> list[float]:
    """Max-min fair shares of `capacity`; nobody gets more than it asks for."""
    shares = [0.0] * len(demands)
    order = sorted(range(len(demands)), key=lambda i: demands[i])
    left, remaining = capacity, len(demands)
    for i in order:
        fair = left / remaining
        shares[i] = min(demands[i], fair)
        left -= shares[i]
        remaining -= 1
    return shares


def share_port(vfs: list[VfInput], host_rx_wire_bps: float, plat: Platform = DEFAULT_PLATFORM,
               memo: dict[VfInput, VfRates] | None = None,
               incast: list[int | None] | None = None) -> tuple[list[VfRates], float]:
    """All VFs of one port and its host traffic: what each gets of the line rate each way.

    Returns the VFs' rates and the host traffic's rx wire share in bits/s. `memo` keeps the
    unconstrained rates of inputs seen before (the engine clears it every simulated second).
    `incast` names each VF's incast group (None: none): the microbursts of a group's VFs
    coincide, so while they last the group's arrivals share the line, and what exceeds it
    is dropped before the host (a switch's shallow buffer is not modelled).
    """
    line = plat.line_rate_bps
    if memo is None:
        first = [vf_rates(vf, plat=plat) for vf in vfs]
    else:
        first = []
        for vf in vfs:
            r = memo.get(vf)
            if r is None:
                r = memo[vf] = vf_rates(vf, plat=plat)
            first.append(r)
    rx_demand = [r.rx_wire_bps for r in first] + [host_rx_wire_bps]
    tx_demand = [r.tx_wire_bps for r in first]
    incast_caps = _incast_caps(vfs, first, incast, line) if incast else {}
    if sum(rx_demand) <= line and sum(tx_demand) <= line and not incast_caps:
        return first, host_rx_wire_bps
    rx_share = water_fill(line, rx_demand)
    tx_share = water_fill(line, tx_demand)
    for i, cap in incast_caps.items():
        rx_share[i] = min(rx_share[i], cap)
    rates = []
    for i, (vf, r) in enumerate(zip(vfs, first)):
        if rx_share[i] < r.rx_wire_bps * 0.9999 or tx_share[i] < r.tx_wire_bps * 0.9999:
            r = vf_rates(vf, rx_share[i], tx_share[i], plat)
        rates.append(r)
    return rates, rx_share[-1]


def _incast_caps(vfs: list[VfInput], first: list[VfRates], incast: list[int | None],
                 line: float) -> dict[int, float]:
    """Receive caps of the VFs whose group's coinciding microbursts exceed the line rate."""
    groups: dict[int, list[int]] = {}
    for i, group in enumerate(incast):
        if group is not None and vfs[i].microburst_gain > 1.0 and vfs[i].microburst_s > 0.0:
            groups.setdefault(group, []).append(i)
    caps: dict[int, float] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        in_burst = sum(first[i].rx_wire_bps * vfs[i].microburst_gain for i in members)
        if in_burst > line:
            for i in members:
                caps[i] = first[i].rx_wire_bps * line / in_burst
    return caps
