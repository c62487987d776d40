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
    # A busy period starts with the one interrupt of an arrival that finds the kernel idle:
    # interrupts = lam * (1 - U) with U = lam * per_packet + interrupts * per_interrupt, solved.
    # With constant spacing (a traffic generator) every packet finds the kernel idle until
    # packet + interrupt work fills the gap between two packets. Past that, a busy period
    # ends as soon as the kernel catches up, and the next packet interrupts again: the
    # interrupt work exactly fills the gaps, (1 - lam*per_packet) / per_interrupt interrupts/s,
    # and the kernel is never idle: the application starves.
    per_int = costs.per_interrupt_s
    if load.constant_rate:
        if lam * (per_packet + per_int) <= CORE:
            interrupts = min(lam, itr_cap)
        else:
            interrupts = min(max(0.0, (CORE - lam * per_packet) / per_int), itr_cap)
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


def pf_itr_cap(rx_usecs: int, rate_pps: float) -> float:
    """Interrupt ceiling of the PF's own vectors for an rx-usecs setting (1 = ixgbe adaptive)."""
    if rx_usecs == 0:
        return float("inf")
    if rx_usecs == 1:
        # ixgbe_update_itr walks 10..126 us with load; approximated by the packet rate.
        return 1e6 / (10.0 + 116.0 * min(1.0, rate_pps / 200_000.0))
    return 1e6 / rx_usecs


def cliff_pps(load: HostTraffic, rx_usecs: int = 1, costs: Costs = HOST) -> float:
    """Rate where DE saturates the core (kernel + application) with this PF coalescing,
    by bisection on the model."""
    per_packet = kernel_packet_s(load, costs) + load.app_packet_s
    low, high = 0.0, CORE / per_packet
    for _ in range(50):
        mid = (low + high) / 2
        rx = host_rx(load, mid, "de", STOCK_BUDGET, pf_itr_cap(rx_usecs, mid), costs)
        if rx.delivered_pps >= mid * 0.999:
            low = mid
        else:
            high = mid
    return low


def salah_cliff(per_packet_s: float, per_interrupt_s: float) -> float:
    """Salah et al.'s closed form for the cliff, r/2 * (sqrt(1 + 4 mu/r) - 1), with 1/mu the
    time to process one packet and deliver it to the application and 1/r the interrupt cost."""
    mu, r = 1.0 / per_packet_s, 1.0 / per_interrupt_s
    return float(r / 2.0 * (math.sqrt(1.0 + 4.0 * mu / r) - 1.0))
