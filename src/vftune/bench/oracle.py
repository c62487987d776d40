"""The oracle: the best fixed ITR of each tunable VF in each phase, known in advance.

Coordinate ascent over the grid on the simulator's steady state (no noise), each VF in turn,
maximizing the host's total throughput with the others held; on ties (within TIE_TOLERANCE)
the lower interrupt rate wins, since it costs less CPU. The benchmark runs it through the same
noisy simulation as every policy: its throughput is the reference the ratios are taken against.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from vftune.agent.policy import VfPolicy
from vftune.itr import same_itr
from vftune.model import ItrDecision, VfSample
from vftune.sim.engine import HostSim
from vftune.sim.layout import vf_pci
from vftune.sim.scenarios import build, get_scenario
from vftune.sim.sweep import TIE_TOLERANCE, default_grid, throughput_bps, tunable_vfs


@dataclass(frozen=True)
class OraclePhase:
    start_s: float
    end_s: float | None  # within the first cycle; None = open-ended
    label: str
    itrs: dict[str, int]  # VF PCI address -> best fixed ITR
    throughput_bps: float


@dataclass(frozen=True)
class OraclePlan:
    scenario: str
    seed: int
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


def _oracle_phase(sim: HostSim, t: float, grid: list[int], rounds: int) -> tuple[dict[int, int], float]:
    spec = sim.spec
    tunable = tunable_vfs(spec)
    everyone = list(range(len(spec.vfs)))
    base = [sim.vfs[i].itr for i in everyone]

    def total(itrs: list[int]) -> float:
        return throughput_bps(sim.steady_state(t, itrs, iterations=3), everyone)

    # Start from the best common ITR, then improve one VF at a time.
    coarse = grid[::3]
    common = max(coarse, key=lambda itr: (total([itr if i in tunable else base[i] for i in everyone]), -itr))
    itrs = [common if i in tunable else base[i] for i in everyone]
    best_total = total(itrs)
    for _ in range(rounds):
        for i in tunable:
            candidates = {itr: 0.0 for itr in coarse}
            for itr in coarse:
                candidates[itr] = total(itrs[:i] + [itr] + itrs[i + 1:])
            top = max(candidates, key=lambda k: candidates[k])
            pos = grid.index(top)
            for itr in grid[max(0, pos - 3): pos + 4]:
                if itr not in candidates:
                    candidates[itr] = total(itrs[:i] + [itr] + itrs[i + 1:])
            peak = max(candidates.values())
            itrs[i] = min(k for k, v in candidates.items() if v >= peak * (1.0 - TIE_TOLERANCE))
        best_total = total(itrs)
    return {i: itrs[i] for i in tunable}, best_total


@functools.lru_cache(maxsize=32)
def oracle_plan(scenario: str, seed: int = 0, rounds: int = 1) -> OraclePlan:
    """Best fixed ITR per tunable VF and per phase (cached; a few seconds for 16 VFs)."""
    get_scenario(scenario)
    spec = build(scenario, seed)
    sim = HostSim(spec, seed, noise=False)
    grid = default_grid()
    phases = []
    for index, phase in enumerate(spec.phases):
        start, end = spec.phase_bounds(index)
        itrs, thpt = _oracle_phase(sim, start, grid, rounds)
        by_pci = {vf_pci(spec.vfs[i].pf, spec.vfs[i].index): itr for i, itr in itrs.items()}
        phases.append(OraclePhase(start, end, phase.label, by_pci, thpt))
    return OraclePlan(scenario, seed, spec.cycle_s, tuple(phases))


def oracle_itr(scenario: str, seed: int, vf_pci: str, t: float) -> int:
    """The oracle's ITR for the VF at this PCI address at simulated time t."""
    itrs = oracle_plan(scenario, seed).phase_at(t).itrs
    if vf_pci not in itrs:
        raise ValueError(f"VF {vf_pci} is not a tunable VF of scenario {scenario}")
    return itrs[vf_pci]


class OraclePolicy(VfPolicy):
    """Sets the oracle's ITR for the phase in force: the best fixed ITR, known in advance."""

    name = "oracle"  # registry.ORACLE

    def __init__(self, pci: str, plan: OraclePlan) -> None:
        self.pci = pci
        self.plan = plan

    def step(self, sample: VfSample) -> ItrDecision | None:
        phase = self.plan.phase_at(sample.t)
        itr = phase.itrs.get(self.pci)
        if itr is None or same_itr(itr, sample.itr):
            return None
        return ItrDecision(itr, f"oracle: {itr}/s for phase {phase.label or 0}")
