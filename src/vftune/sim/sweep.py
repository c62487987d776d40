"""Steady-state sweeps of the simulated host (the benchmark's oracle is built on them).

Steady state = the fluid model's expected rates (noise at its mean) once the host's share of
cores has settled; the seed picks the scenario instance (its parameter jitter), so sweeps are
deterministic per seed. Throughput is what the VF counters show (rx + tx frame bits/s) summed
over the tunable VFs, the quantity an agent measures. `cpu` is the fraction of the host's cores
spent on network work: the guests' receive paths plus the host's irq/softirq time (guests'
background load excluded).
"""

from __future__ import annotations

from typing import Any

from vftune.sim.engine import HostRates, HostSim
from vftune.sim.layout import vf_pci
from vftune.sim.model import VfRates
from vftune.sim.nic import I82599, NicProfile, nic_profile
from vftune.sim.scenarios import build
from vftune.sim.workload import HostSpec, Poll, RequestResponse, Stream, Transmit, Workload

GRID_RATIO = 1.04  # neighbouring grid points 4% apart: the peak is found within ~2%
TIE_TOLERANCE = 0.001


def hardware_rates(nic: NicProfile = I82599) -> list[int]:
    """Every rate the NIC can deliver over its profile's range (sim/nic.py), ascending: for the
    82599 1..511 steps of 2.048 us."""
    return nic.hardware_rates()


def default_grid(ratio: float = GRID_RATIO, nic: NicProfile = I82599) -> list[int]:
    """Deliverable ITRs over the NIC's range, neighbours `ratio` apart where the hardware
    allows it and every hardware step at the top, where steps are coarser than that."""
    rates = hardware_rates(nic)
    grid = [rates[0]]
    for i, rate in enumerate(rates[1:], start=1):
        # Keep the last step still within `ratio` of the previous point (or the next step).
        following = rates[i + 1] if i + 1 < len(rates) else None
        if following is None or following > grid[-1] * ratio:
            grid.append(rate)
    return grid


def tunable_vfs(spec: HostSpec) -> list[int]:
    """Indexes of the VFs the agent tunes: those passed to a guest."""
    return [i for i, vf in enumerate(spec.vfs) if vf.guest is not None]


def throughput_bps(rates: HostRates, indexes: list[int]) -> float:
    return sum((rates.vfs[i].rx_Bps + rates.vfs[i].tx_Bps) * 8.0 for i in indexes)


def _network_cpu(rates: HostRates, indexes: list[int]) -> float:
    return sum(rates.vfs[i].guest_cpu for i in indexes) + rates.host_kernel_cpu


def best_point(points: list[dict[str, Any]], tolerance: float = TIE_TOLERANCE, key: str = "goodput_bps") -> int:
    """The lowest ITR whose `key` (default: what the applications get) is within `tolerance` of
    the best. Not the counters' throughput: fewer packets per poll mean smaller GRO merges and
    more ACKs, which add counted bytes that carry nothing."""
    top = max(p[key] for p in points)
    return int(min(p["itr"] for p in points if p[key] >= top * (1.0 - tolerance)))


def _rr_latency(rates: list[VfRates]) -> dict[str, float]:
    """Request/response VFs' response time: the transaction-weighted mean and the worst p99."""
    rr = [(r.latency_mean_s, r.latency_p99_s, r.tx_pps) for r in rates
          if r.latency_mean_s is not None and r.latency_p99_s is not None and r.tx_pps > 0]
    if not rr:
        return {}
    weight = sum(tps for _, _, tps in rr)
    mean = sum(m * tps for m, _, tps in rr) / weight
    return {"latency_us_mean": round(mean * 1e6, 2), "latency_us_p99": round(max(p for _, p, _ in rr) * 1e6, 2)}


def _figures(r: VfRates, itr: int, host_cpus: int) -> dict[str, Any]:
    return {
        "itr": itr,
        "interval_us": round(1e6 / itr, 3),
        "throughput_bps": round((r.rx_Bps + r.tx_Bps) * 8.0, 1),
        "goodput_bps": round(r.delivered_bps, 1),
        "cpu": round((r.guest_cpu + r.host_cpu) / host_cpus, 6),
        "interrupts_per_s": round(r.interrupts_per_s, 1),
        "app_progress": round(r.app_progress, 4),
        **_rr_latency([r]),
    }


def sweep(scenario: str, itrs: list[int] | None = None, seed: int = 0, t: float = 0.0) -> dict[str, Any]:
    """The host's steady state with every tunable VF fixed at each ITR of the grid.

    Returns {"scenario", "seed", "time", "phase", "points", "best_itr"}; each point has the
    ITR (interrupts/s limit) and its interval, throughput_bps (rx + tx frame bits/s as the VF
    counters count them), goodput_bps (IP bits/s the applications get), cpu (share of the host's
    cores spent on network work), interrupts_per_s, latency_us_mean/latency_us_p99 when there are
    request/response VFs, and "vfs": the same per tunable VF. t picks the phase. best_itr is
    the lowest ITR within 0.1% of the best goodput.
    """
    spec = build(scenario, seed)
    nic = nic_profile(spec.nic)
    for itr in itrs or ():
        if not nic.itr_min <= itr <= nic.itr_max:
            raise ValueError(f"ITR {itr} outside {nic.itr_min}..{nic.itr_max} interrupts/s ({nic.name})")
    grid = sorted({nic.quantize(i) for i in itrs}) if itrs else default_grid(nic=nic)
    sim = HostSim(spec, seed, noise=False)
    tunable = tunable_vfs(spec)
    phase = spec.phase_index(t)
    points = []
    for itr in grid:
        itrs_now = [itr if i in tunable else sim.vfs[i].itr for i in range(len(spec.vfs))]
        rates = sim.steady_state(t, itrs_now)
        vfs = []
        for i in tunable:
            slot = spec.vfs[i]
            vfs.append({"vf": vf_pci(slot.pf, slot.index), "guest": slot.guest,
                        "kind": _kind(spec.workload(slot, phase)), **_figures(rates.vfs[i], itr, spec.host_cpus)})
        points.append({
            "itr": itr,
            "interval_us": round(1e6 / itr, 3),
            "throughput_bps": round(throughput_bps(rates, tunable), 1),
            "goodput_bps": round(sum(rates.vfs[i].delivered_bps for i in tunable), 1),
            "cpu": round(_network_cpu(rates, tunable) / spec.host_cpus, 6),
            "interrupts_per_s": round(sum(rates.vfs[i].interrupts_per_s for i in tunable), 1),
            **_rr_latency([rates.vfs[i] for i in tunable]),
            "vfs": vfs,
        })
    return {"scenario": scenario, "seed": seed, "time": t, "phase": spec.phases[phase].label,
            "points": points, "best_itr": best_point(points)}


def _kind(w: Workload) -> str:
    """The scenario file's name for a workload's kind."""
    if isinstance(w, Stream):
        return "tcp" if w.acked else "udp"
    if isinstance(w, RequestResponse):
        return "rr"
    return w.kind if isinstance(w, Transmit | Poll) else "idle"
