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

from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE, ITR_STEP_US, quantize_itr
from vftune.sim.engine import HostRates, HostSim
from vftune.sim.scenarios import build
from vftune.sim.workload import HostSpec

GRID_RATIO = 1.04  # neighbouring grid points 4% apart: the peak is found within ~2%
TIE_TOLERANCE = 0.001


def hardware_rates() -> list[int]:
    """Every rate the 82599 can deliver: 1..511 steps of 2.048 us, ascending."""
    return sorted({quantize_itr(1e6 / (steps * ITR_STEP_US)) for steps in range(1, 512)})


def default_grid(ratio: float = GRID_RATIO) -> list[int]:
    """Deliverable ITRs over the hardware range, neighbours `ratio` apart where the hardware
    allows it and every hardware step at the top, where steps are coarser than that."""
    rates = hardware_rates()
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


def best_point(points: list[dict[str, Any]], tolerance: float = TIE_TOLERANCE) -> int:
    """The lowest ITR whose throughput is within `tolerance` of the best."""
    top = max(p["throughput_bps"] for p in points)
    return int(min(p["itr"] for p in points if p["throughput_bps"] >= top * (1.0 - tolerance)))


def sweep(scenario: str, itrs: list[int] | None = None, seed: int = 0, t: float = 0.0) -> dict[str, Any]:
    """The host's steady state with every tunable VF fixed at each ITR of the grid.

    Returns {"scenario", "points": [{"itr", "throughput_bps", "cpu", "interrupts_per_s"}],
    "best_itr"}; t picks the phase for scenarios whose load changes.
    """
    spec = build(scenario, seed)
    grid = sorted({quantize_itr(i) for i in itrs}) if itrs else default_grid()
    for itr in itrs or ():
        if not ITR_MIN_RATE <= itr <= ITR_MAX_RATE:
            raise ValueError(f"ITR {itr} outside {ITR_MIN_RATE}..{ITR_MAX_RATE} interrupts/s")
    sim = HostSim(spec, seed, noise=False)
    tunable = tunable_vfs(spec)
    points = []
    for itr in grid:
        itrs_now = [itr if i in tunable else sim.vfs[i].itr for i in range(len(spec.vfs))]
        rates = sim.steady_state(t, itrs_now)
        points.append({
            "itr": itr,
            "throughput_bps": round(throughput_bps(rates, tunable), 1),
            "cpu": round(_network_cpu(rates, tunable) / spec.host_cpus, 6),
            "interrupts_per_s": round(sum(rates.vfs[i].interrupts_per_s for i in tunable), 1),
        })
    return {"scenario": scenario, "points": points, "best_itr": best_point(points)}
