"""A PF's own receive path for host traffic: DE, NAPI, and the hybrid switch (Salah & Qahtan).

Per packet the host kernel spends 1/mu, per interrupt 1/r (both from the simulated CPU's
Geist costs, costs.py), and the consuming host application app_packet_s. One host core
serves the PF's queues.
- DE (interrupt disable-enable): protocol work runs at interrupt level, one interrupt per busy
  period: lambda * (1 - U) for Poisson arrivals, U the kernel's busy share including the
  interrupts themselves. Lowest overhead and latency at low rate; above the cliff the
  kernel takes the whole core and the application starves (livelock).
- NAPI: softirq processing costs NAPI_OVERHEAD more per packet, but once the budget is used up
  the rest goes to ksoftirqd, which shares the core fairly with the application. A small budget
  (the paper's 2) leaves the application about half the core at overload; the stock 64 far less.
- hybrid: the patched driver estimates the rate and switches DE -> NAPI above (1+e)*cliff and
  NAPI -> DE below (1-e)*cliff, e = 0.15, with the NAPI budget it was given (default 2).
The cliff is the rate where DE's kernel plus application work fills the core.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from vftune.sim.costs import HOST, Costs
from vftune.sim.workload import HostTraffic

NAPI_OVERHEAD = 1.15  # softirq raise and poll-list handling per packet, relative to DE
STOCK_BUDGET = 64
CORE = 1.0  # CPU seconds per second of the core serving the PF's queues


@dataclass(frozen=True)
class HostRx:
    delivered_pps: float
    kernel_cpu: float  # irq + softirq seconds per second
    app_cpu: float
    interrupts_per_s: float


def kernel_packet_s(load: HostTraffic, costs: Costs = HOST) -> float:
    return costs.per_packet_s + costs.per_byte_s * load.packet_bytes


def napi_kernel_share(budget: int) -> float:
    """Core share the kernel keeps at overload: MAX_SOFTIRQ_RESTART (10) polls of `budget`
    packets run before ksoftirqd, which then competes fairly with the application."""
    burst = 10 * max(1, budget)
    return 0.5 + 0.5 * burst / (burst + 200)


def host_rx(load: HostTraffic, arrivals_pps: float, mode: str, budget: int, itr_cap: float,
            costs: Costs = HOST) -> HostRx:
    """Steady state of the PF's host traffic at this arrival rate, in `mode` ("de" or "napi")."""
    lam = max(0.0, arrivals_pps)
    if lam <= 0.0:
        return HostRx(0.0, 0.0, 0.0, 0.0)
    per_packet = kernel_packet_s(load, costs) * (NAPI_OVERHEAD if mode == "napi" else 1.0)
    # A busy period starts with the one interrupt of an arrival that finds the kernel idle.
    # Poisson arrivals (jittered: any gap is possible) find it idle with probability 1 - U
    # (PASTA): interrupts = lam * (1 - U) with U = lam * per_packet + interrupts * per_interrupt,
    # solved. Evenly spaced arrivals (a generator's constant intervals) are counted exactly
    # (evenly_spaced_busy_packets).
    per_int = costs.per_interrupt_s
    if load.constant_rate:
        interrupts = min(lam / evenly_spaced_busy_packets(lam, per_packet, per_int), itr_cap)
    else:
        busy = min(1.0, lam * (per_packet + per_int) / (CORE + lam * per_int))
        interrupts = min(lam * (1.0 - busy), itr_cap)
    kernel_need = lam * per_packet + interrupts * costs.per_interrupt_s
    cap = CORE if mode == "de" else CORE * napi_kernel_share(budget)
    kernel_cpu = min(kernel_need, cap)
    processed = lam * kernel_cpu / kernel_need
    app_cpu_free = CORE - kernel_cpu
    delivered = min(processed, app_cpu_free / load.app_packet_s)
    return HostRx(delivered, kernel_cpu, delivered * load.app_packet_s, interrupts)


def evenly_spaced_busy_packets(lam: float, per_packet: float, per_interrupt: float) -> float:
    """Packets one DE busy period takes when they arrive evenly spaced, g = 1/lam apart.

    The period opens with the interrupt of a packet that finds the kernel idle and lasts
    per_interrupt + n * per_packet; the driver takes every packet DMA'd meanwhile in the same
    handler, without a new interrupt (Salah & Qahtan, section 4.1: bcm5700_interrupt checks the
    status register again before returning). Packet k (k = 0, 1, ...) arrives at k*g and joins
    while k*g < per_interrupt + k*per_packet, so n = floor(per_interrupt / (g - per_packet)) + 1:
    one packet per interrupt while packet and interrupt work fit in a gap, then 2, 3, ... each
    time the gap shrinks past per_interrupt / k + per_packet (the drops in their interrupt rate,
    Figure 7(e)). Between busy periods the kernel is idle and the application runs; only when
    packet work alone fills the gaps (g <= per_packet) does a busy period never end.
    """
    gap = 1.0 / lam
    if gap <= per_packet:
        return float("inf")
    return float(math.floor(per_interrupt / (gap - per_packet)) + 1)


def pf_itr_cap(rx_usecs: int, rate_pps: float) -> float:
    """Interrupt ceiling of the PF's own vectors for an rx-usecs setting (1 = ixgbe adaptive)."""
    if rx_usecs == 0:
        return float("inf")
    if rx_usecs == 1:
        # ixgbe_update_itr walks 10..126 us with load; approximated by the packet rate.
        return 1e6 / (10.0 + 116.0 * min(1.0, rate_pps / 200_000.0))
    return 1e6 / rx_usecs


def first_shortfall(delivers: Callable[[float], bool], high: float, step: float = 1.01) -> float:
    """The lowest rate (up to `high`) at which `delivers(rate)` first turns False.

    Delivery need not fall monotonically: with evenly spaced arrivals DE saturates, then takes
    two packets per interrupt and delivers in full again (evenly_spaced_busy_packets), so a
    bisection over the whole range could land on a later edge. Rates rise `step` apart from
    high / 1e4 to the first shortfall, then bisection inside that one step."""
    low = high / 1e4
    if not delivers(low):
        return low
    rate = low * step
    while rate < high and delivers(rate):
        low, rate = rate, rate * step
    bad = min(rate, high)
    for _ in range(30):
        mid = (low + bad) / 2
        low, bad = (mid, bad) if delivers(mid) else (low, mid)
    return low


def cliff_pps(load: HostTraffic, rx_usecs: int = 1, costs: Costs = HOST) -> float:
    """Rate where DE first saturates the core (kernel + application) with this PF coalescing."""
    per_packet = kernel_packet_s(load, costs) + load.app_packet_s

    def delivers(rate: float) -> bool:
        return host_rx(load, rate, "de", STOCK_BUDGET, pf_itr_cap(rx_usecs, rate), costs).delivered_pps >= rate * 0.999

    return first_shortfall(delivers, CORE / per_packet)


def salah_cliff(per_packet_s: float, per_interrupt_s: float) -> float:
    """Salah et al.'s closed form for the cliff, r/2 * (sqrt(1 + 4 mu/r) - 1), with 1/mu the
    time to process one packet and deliver it to the application and 1/r the interrupt cost."""
    mu, r = 1.0 / per_packet_s, 1.0 / per_interrupt_s
    return float(r / 2.0 * (math.sqrt(1.0 + 4.0 * mu / r) - 1.0))
