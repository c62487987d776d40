"""The oracle: per VF and per phase, the best fixed ITR, known in advance, under an objective.

For each phase of a scenario every tunable VF takes its best response: a sweep of that VF over
every rate of the grid (4% apart, then every 2.048-us hardware step around the best) with its
neighbours held at their own current oracle settings. Rates are judged on the
simulator's steady state (noise at its mean).
Rounds of best responses repeat until a whole round changes nothing (a fixed point:
no VF can do better alone), at most MAX_ROUNDS; a phase that did not settle says so
(`converged` False) and the bench prints it.

What "best" means is the objective's:
- throughput: the VF's own merit at its highest (below). Rates within TIE of the best are one
  plateau at the mean load, and the oracle takes the middle of it (the median rate): at its
  lower edge two bounds meet (the ring at a low rate and the CPU, say), so a second of spare
  CPU or a burst finds the cheapest rate capped, and a fixed rate above it would beat an
  oracle that took the edge;
- efficiency: the lowest rate whose merit is within EFFICIENCY_MARGIN of that best;
- latency: request/response VFs as under throughput (their merit is response time), bulk VFs
  as under efficiency, so their interrupts take the least CPU from their neighbours.
A VF's merit (vf_merit) is what the bench scores it on: bits/s delivered to its application
for bulk traffic, the inverse of the mean response time for request/response traffic. Idle VFs keep
the rate they have.

The benchmark runs the plan through the same noisy simulation as every policy; each VF's
figures there are its reference (scores.py). A policy that beats it by more than the noise
shows that the oracle is wrong, and the bench says so.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from vftune.itr import quantize_itr
from vftune.sim.engine import HostSim
from vftune.sim.layout import vf_pci
from vftune.sim.scenarios import build, get_scenario
from vftune.sim.sweep import default_grid, hardware_rates, tunable_vfs
from vftune.sim.workload import Idle, RequestResponse

OBJECTIVES = ("throughput", "efficiency", "latency")
EFFICIENCY_MARGIN = 0.02  # "within a margin of the best": the tuner's noise margin
MAX_ROUNDS = 6
START_ITR = 20_000  # every VF starts the rounds here (ixgbevf's own starting class)
# Rates the peers run, always candidates, so a fixed peer cannot sit between grid points.
TIE = 0.002  # rates this close to the best merit are one plateau at the mean load
PEER_RATES = (8_000, 12_000, 20_000, 100_000, 500_000, 125_000, 62_500, 31_250, 16_129, 15_625, 7_936)


def vf_kind(workload: object) -> str:
    if isinstance(workload, Idle):
        return "idle"
    return "rr" if isinstance(workload, RequestResponse) else "bulk"


def vf_merit(rates: Any, kind: str) -> float:
    """What a VF is scored on, higher is better: bits/s delivered to its application (bulk), or
    the inverse of its mean response time (request/response; bits/s where the model has none)."""
    latency = getattr(rates, "latency_mean_s", None)
    progress = float(getattr(rates, "app_progress", 1.0))  # the guest's own application's share (app_cpu)
    if kind == "rr" and latency:
        return progress / float(latency)
    return float(rates.delivered_bps) * progress


def choose(merits: dict[int, float], kind: str, objective: str) -> int:
    """The rate an objective picks from a VF's sweep (rate -> merit)."""
    top = max(merits.values())
    if objective == "efficiency" or (objective == "latency" and kind == "bulk"):
        return min(itr for itr, m in merits.items() if m >= top * (1.0 - EFFICIENCY_MARGIN))
    plateau = sorted(itr for itr, m in merits.items() if m >= top * (1.0 - TIE))
    return plateau[(len(plateau) - 1) // 2]


@dataclass(frozen=True)
class OracleVf:
    itr: int
    kind: str  # bulk, rr or idle in this phase
    merit: float  # steady state at the fixed point
    throughput_bps: float  # delivered to the application


@dataclass(frozen=True)
class OraclePhase:
    start_s: float
    end_s: float | None  # within the first cycle; None = open-ended
    label: str
    vfs: dict[str, OracleVf]  # VF PCI address -> its setting and steady-state figures
    rounds: int
    converged: bool

    @property
    def itrs(self) -> dict[str, int]:
        return {pci: v.itr for pci, v in self.vfs.items()}

    @property
    def throughput_bps(self) -> float:
        return sum(v.throughput_bps for v in self.vfs.values())


@dataclass(frozen=True)
class OraclePlan:
    scenario: str
    seed: int
    objective: str
    cycle_s: float | None
    phases: tuple[OraclePhase, ...]

    def phase_at(self, t: float) -> OraclePhase:
        if self.cycle_s:
            t = t % self.cycle_s
        current = self.phases[0]
        for phase in self.phases:
            if t >= phase.start_s:
                current = phase
        return current

    @property
    def converged(self) -> bool:
        return all(p.converged for p in self.phases)


def candidates() -> list[int]:
    return sorted(set(default_grid()) | {quantize_itr(r) for r in PEER_RATES})


def _refine(grid: list[int], best: int) -> list[int]:
    """Every hardware rate between the grid neighbours of `best`."""
    i = grid.index(best)
    low, high = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    return [r for r in hardware_rates() if low <= r <= high]


def _phase_fixed_point(sim: HostSim, t: float, kinds: list[str], objective: str,
                       grid: list[int]) -> tuple[list[int], int, bool]:
    spec = sim.spec
    tunable = [i for i in tunable_vfs(spec) if kinds[i] != "idle"]
    itrs = [quantize_itr(START_ITR) if i in tunable_vfs(spec) else sim.vfs[i].itr for i in range(len(spec.vfs))]
    for rounds in range(1, MAX_ROUNDS + 1):
        changed = False
        for i in tunable:
            # Neighbours held: the host's irq work is theirs, so one evaluation per rate.
            kernel = sim.steady_state(t, itrs, iterations=3).host_kernel_cpu

            def merit(itr: int, i: int = i, kernel: float = kernel) -> float:
                trial = itrs[:i] + [itr] + itrs[i + 1:]
                return vf_merit(sim.rates(t, trial, kernel).vfs[i], kinds[i])

            merits = {itr: merit(itr) for itr in grid}
            for itr in _refine(grid, choose(merits, kinds[i], objective)):
                if itr not in merits:
                    merits[itr] = merit(itr)
            best = choose(merits, kinds[i], objective)
            if best != itrs[i]:
                itrs[i], changed = best, True
        if not changed:
            return itrs, rounds, True
    return itrs, MAX_ROUNDS, False


@functools.lru_cache(maxsize=64)
def oracle_plan(scenario: str, seed: int = 0, objective: str = "throughput") -> OraclePlan:
    """Per tunable VF and phase, the best fixed ITR under `objective` (cached per process)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}")
    get_scenario(scenario)
    spec = build(scenario, seed)
    sim = HostSim(spec, seed, noise=False)
    grid = candidates()
    phases = []
    for index, phase in enumerate(spec.phases):
        start, end = spec.phase_bounds(index)
        kinds = [vf_kind(spec.workload(vf, index)) for vf in spec.vfs]
        itrs, rounds, converged = _phase_fixed_point(sim, start, kinds, objective, grid)
        rates = sim.steady_state(start, itrs)
        vfs = {}
        for i in tunable_vfs(spec):
            r = rates.vfs[i]
            vfs[vf_pci(spec.vfs[i].pf, spec.vfs[i].index)] = OracleVf(
                itrs[i], kinds[i], vf_merit(r, kinds[i]), float(r.delivered_bps))
        phases.append(OraclePhase(start, end, phase.label, vfs, rounds, converged))
    return OraclePlan(scenario, seed, objective, spec.cycle_s, tuple(phases))


def oracle_itr(scenario: str, seed: int, vf_pci: str, t: float) -> int:
    """The oracle's ITR for the VF at this PCI address at simulated time t."""
    itrs = oracle_plan(scenario, seed).phase_at(t).itrs
    if vf_pci not in itrs:
        raise ValueError(f"VF {vf_pci} is not a tunable VF of scenario {scenario}")
    return itrs[vf_pci]


def geomean(values: list[float]) -> float:
    """Geometric mean of positive values (nan when there are none or one is not positive)."""
    if not values or any(not v > 0 for v in values):
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))
