"""Fluid (per-interval) model of one KVM host with 82599 PFs whose VFs are passed to guests.

Rates, not packets: each model step turns workloads, ITRs and CPU capacity into steady rates,
and the engine (engine.py) integrates them into counters. Effects modelled, and why:

- Line rate per port: 10 Gb/s on the wire, each packet carrying 18 B of header + FCS and 20 B of
  preamble + inter-frame gap (workload.py). VFs and the PF's host traffic share a port max-min
  fairly per direction (water-filling): TCP flows take what they can use, the rest is shared.
- Interrupts: the 82599 fires a vector at most once per ITR interval I and only when something
  arrived, so with events at rate p a queue vector takes p / (I*p + 1) interrupts/s. One queue
  vector per VF carries traffic (one rx/tx pair per VF); the third MSI-X vector is the mailbox.
- CPU (costs.py): Geist et al.'s T = a*MB + b*kilopackets + c*kilo-interrupts, scaled to the
  simulated CPU, 1.3x inside guests. A VF's receive path runs on one vCPU of its guest; the
  vCPU's capacity is its share of the host cores (guests' busy vCPUs and the host's irq work
  share `host_cpus`) minus the guest's background load, with seeded jitter.
- Receive livelock: interrupt work has priority. For acknowledged traffic (TCP, request/response)
  the sender is clocked by the receiver, so as ITR rises the interrupt cost eats the vCPU and the
  delivered rate falls towards one interrupt per packet. Unacknowledged arrivals (UDP) keep the
  vector firing at the full ITR whatever is delivered, so they collapse (to LIVELOCK_FLOOR).
- Coalescing delay: TCP is bounded by window / (RTT + I): the ACK for data that waits for the
  interrupt leaves up to one interval late. Request/response throughput is
  concurrency / (RTT + service + I/2): a request waits half an interval on average; at
  640 x 1.024 us this is under half of the best, as Geist et al. measured for NFS.
- The rx ring (512 descriptors) overflows when more than a ring's worth arrives per interval.
- The sender, window, CPU and ring bounds are combined with a soft minimum (SOFTMIN_K): near a
  corner queueing makes each bound cost a little of the other's headroom, which rounds the peak.
  The port's share is a hard limit on top (TCP fills a link).
So bulk throughput against ITR rises (window/delay bound), peaks and falls (CPU), with the peak
where the two meet: it moves with packet size, RTT, window and CPU share; offered-limited or
line-limited bulk VFs get a broad plateau; request/response peaks at high rates.

Elsewhere: adaptive.py is ixgbevf's own adaptive ITR (the untuned default), pfmode.py the PF's
host traffic under DE/NAPI/hybrid (Salah & Qahtan), noise.py the seeded jitter and bursts,
engine.py the 2 s VF counter refresh.

Calibration (scenarios.py; CPU constants and their sources in costs.py):
- paper-3vm (3 VMs, 15000-byte messages as 1500-byte segments, 10 GbE) uses an effective window
  of 21 kB and an RTT of 60 us (PAPER_WINDOW_B, PAPER_RTT_S): its peak is at 48,828 interrupts/s
  (the grid point nearest Wu & Wang's 48,000);
- the 512-byte series uses a 12 kB window and 12 host cores, so that the best fixed ITR beats the
  guests' default bulk class (12K) by +44% with 1 VM down to ~0% at 15 VMs, where the CPU ceiling
  and the line rate flatten the curve (Wu & Wang report +7.56% to +62.97%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vftune.itr import LINE_RATE_BPS, MTU, frame_bytes, wire_bytes
from vftune.sim.costs import GUEST, HOST_VF_IRQ_S
from vftune.sim.workload import Idle, RequestResponse, Stream, Workload

RING_DESCRIPTORS = 512
SOFTMIN_K = 8.0
LIVELOCK_FLOOR = 0.02  # share of the vCPU a livelocked NAPI poll still gets through
ACK_BYTES = 52  # IP size of a pure ACK with timestamps
ACKS_PER_SEGMENT = 0.5  # delayed ACK
TCPIP_HEADERS = 52  # IPv4 + TCP with timestamps
TCP_PAYLOAD = MTU - TCPIP_HEADERS
INF = float("inf")


@dataclass(frozen=True)
class VfInput:
    workload: Workload
    itr: int  # the rate the VF's vector is throttled to now (interrupts/s)
    capacity: float  # CPU seconds per second its receive vCPU can spend
    load_factor: float = 1.0  # seeded noise and bursts on the offered load


@dataclass(frozen=True)
class VfRates:
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


ZERO = VfRates(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def softmin(*values: float) -> float:
    """A smooth minimum, never above the smallest value."""
    total = 0.0
    for v in values:
        if v <= 0.0:
            return 0.0
        if v != INF:
            total += v ** -SOFTMIN_K
    return INF if total == 0.0 else total ** (-1.0 / SOFTMIN_K)


def interrupt_rate(events_per_s: float, itr: float) -> float:
    """Interrupts/s of one vector throttled to `itr` with events arriving at this rate."""
    if events_per_s <= 0.0:
        return 0.0
    return events_per_s / (events_per_s / itr + 1.0)


def cpu_bound_events(capacity: float, per_event_s: float, per_interrupt_s: float, itr: float) -> float:
    """Largest self-clocked event rate v with per_interrupt * ints(v) + per_event * v = capacity.

    Solves e*I*v^2 + (Ci + e - C*I)*v - C = 0 for its positive root, in the form that stays
    accurate when the linear term dominates.
    """
    if capacity <= 0.0:
        return 0.0
    interval = 1.0 / itr
    b = per_interrupt_s + per_event_s - capacity * interval
    disc = b * b + 4.0 * per_event_s * interval * capacity
    return 2.0 * capacity / (b + math.sqrt(disc))


def line_payload_Bps(packet_bytes: float) -> float:
    """IP bytes/s one port carries at line rate with packets of this size."""
    return LINE_RATE_BPS / 8.0 * packet_bytes / wire_bytes(packet_bytes)


def _stream(w: Stream, vf: VfInput, rx_cap_wire_bps: float) -> VfRates:
    s = float(w.packet_bytes)
    sender = w.offered_bps / 8.0 * vf.load_factor if w.offered_bps is not None else INF
    sender = min(sender, line_payload_Bps(s))
    link = rx_cap_wire_bps / 8.0 * s / wire_bytes(s)  # what the port leaves this VF
    arrivals = min(sender, link)
    itr = float(vf.itr)
    ring = RING_DESCRIPTORS * s * itr
    if w.acked:
        per_event = GUEST.per_byte_s * s + GUEST.per_packet_s * (1.0 + ACKS_PER_SEGMENT)
        window = w.window_bytes / (w.rtt_s + 1.0 / itr)
        cpu = cpu_bound_events(vf.capacity, per_event, GUEST.per_interrupt_s, itr) * s
        # The port's share is a hard limit (TCP fills a link); the others interact softly.
        delivered = min(softmin(sender, window, cpu, ring), link)
        rx_pps = delivered / s
        link_pps = rx_pps
        interrupts = interrupt_rate(rx_pps, itr)
        # A TCP sender sends what the receiver takes; when the port caps it, it offers the cap.
        offered = delivered if rx_cap_wire_bps == INF else arrivals
    else:
        per_event = GUEST.per_byte_s * s + GUEST.per_packet_s
        arrivals_pps = arrivals / s
        interrupts = interrupt_rate(arrivals_pps, itr)
        left = max(LIVELOCK_FLOOR * vf.capacity, vf.capacity - GUEST.per_interrupt_s * interrupts)
        delivered = softmin(arrivals, left / per_event * s, ring)
        # A starved guest stops refilling its ring: the NIC drops the rest as missed, so the
        # VF's counters show only what was delivered, while arrivals keep the vector firing.
        rx_pps = delivered / s
        link_pps = arrivals_pps
        offered = arrivals
    tx_pps = delivered / s * ACKS_PER_SEGMENT if w.acked else 0.0
    guest_cpu = min(vf.capacity, GUEST.per_interrupt_s * interrupts + per_event * delivered / s)
    return VfRates(
        rx_pps=rx_pps,
        rx_Bps=rx_pps * frame_bytes(s),
        tx_pps=tx_pps,
        tx_Bps=tx_pps * frame_bytes(ACK_BYTES),
        offered_bps=offered * 8.0,
        delivered_bps=delivered * 8.0,
        interrupts_per_s=interrupts,
        guest_cpu=guest_cpu,
        host_cpu=HOST_VF_IRQ_S * interrupts,
        rx_wire_bps=link_pps * wire_bytes(s) * 8.0,
        tx_wire_bps=tx_pps * wire_bytes(ACK_BYTES) * 8.0,
    )


def _packets(payload: int) -> int:
    return max(1, math.ceil(payload / TCP_PAYLOAD))


def _rr(w: RequestResponse, vf: VfInput, rx_cap_wire_bps: float, tx_cap_wire_bps: float) -> VfRates:
    rx_pkts, tx_pkts = _packets(w.request_bytes), _packets(w.response_bytes)
    events = float(rx_pkts + tx_pkts)  # tx completions interrupt too: same vector
    per_txn = (
        GUEST.per_byte_s * (w.request_bytes + w.response_bytes)
        + GUEST.per_packet_s * events
        + w.service_s
    )
    itr = float(vf.itr)
    if vf.capacity <= 0.0:
        return ZERO
    latency = w.rtt_s + per_txn / vf.capacity + 0.5 / itr
    tps_latency = w.concurrency * vf.load_factor / latency
    tps_cpu = cpu_bound_events(vf.capacity, per_txn / events, GUEST.per_interrupt_s, itr) / events
    rx_ip = w.request_bytes + TCPIP_HEADERS * rx_pkts  # IP bytes per transaction each way
    tx_ip = w.response_bytes + TCPIP_HEADERS * tx_pkts
    rx_wire_per_txn = 8.0 * (rx_ip + (wire_bytes(0) * rx_pkts))
    tx_wire_per_txn = 8.0 * (tx_ip + (wire_bytes(0) * tx_pkts))
    tps_line = min(rx_cap_wire_bps / rx_wire_per_txn, tx_cap_wire_bps / tx_wire_per_txn)
    tps = min(softmin(tps_latency, tps_cpu), tps_line)
    interrupts = interrupt_rate(events * tps, itr)
    return VfRates(
        rx_pps=tps * rx_pkts,
        rx_Bps=tps * (rx_ip + frame_bytes(0) * rx_pkts),
        tx_pps=tps * tx_pkts,
        tx_Bps=tps * (tx_ip + frame_bytes(0) * tx_pkts),
        offered_bps=tps * (rx_ip + tx_ip) * 8.0,
        delivered_bps=tps * (rx_ip + tx_ip) * 8.0,
        interrupts_per_s=interrupts,
        guest_cpu=min(vf.capacity, GUEST.per_interrupt_s * interrupts + per_txn * tps),
        host_cpu=HOST_VF_IRQ_S * interrupts,
        rx_wire_bps=tps * rx_wire_per_txn,
        tx_wire_bps=tps * tx_wire_per_txn,
    )


def _idle(w: Idle, vf: VfInput) -> VfRates:
    pps = w.pps * vf.load_factor
    interrupts = interrupt_rate(pps, float(vf.itr))
    s = float(w.packet_bytes)
    return VfRates(
        rx_pps=pps,
        rx_Bps=pps * frame_bytes(s),
        tx_pps=0.0,
        tx_Bps=0.0,
        offered_bps=pps * s * 8.0,
        delivered_bps=pps * s * 8.0,
        interrupts_per_s=interrupts,
        guest_cpu=GUEST.seconds(pps * s, pps, interrupts),
        host_cpu=HOST_VF_IRQ_S * interrupts,
        rx_wire_bps=pps * wire_bytes(s) * 8.0,
    )


def vf_rates(vf: VfInput, rx_cap_wire_bps: float = INF, tx_cap_wire_bps: float = INF) -> VfRates:
    """One VF's steady rates, given what the port leaves it in each direction."""
    w = vf.workload
    if isinstance(w, Stream):
        return _stream(w, vf, rx_cap_wire_bps)
    if isinstance(w, RequestResponse):
        return _rr(w, vf, rx_cap_wire_bps, tx_cap_wire_bps)
    return _idle(w, vf)


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


def share_port(vfs: list[VfInput], host_rx_wire_bps: float) -> tuple[list[VfRates], float]:
    """All VFs of one port and its host traffic: what each gets of the 10 Gb/s each way.

    Returns the VFs' rates and the host traffic's rx wire share in bits/s.
    """
    first = [vf_rates(vf) for vf in vfs]
    rx_demand = [r.rx_wire_bps for r in first] + [host_rx_wire_bps]
    tx_demand = [r.tx_wire_bps for r in first]
    if sum(rx_demand) <= LINE_RATE_BPS and sum(tx_demand) <= LINE_RATE_BPS:
        return first, host_rx_wire_bps
    rx_share = water_fill(LINE_RATE_BPS, rx_demand)
    tx_share = water_fill(LINE_RATE_BPS, tx_demand)
    rates = []
    for i, (vf, r) in enumerate(zip(vfs, first)):
        if rx_share[i] < r.rx_wire_bps * 0.9999 or tx_share[i] < r.tx_wire_bps * 0.9999:
            r = vf_rates(vf, rx_share[i], tx_share[i])
        rates.append(r)
    return rates, rx_share[-1]
