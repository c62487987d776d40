"""The frontier: the least CPU per Gb a fixed plan can spend and still meet the score target.

Two of the tuner's targets pull apart: per-VF scores of at least 0.97 of the oracle (whose
rates are the best for each VF's own merit, whatever they cost) and CPU per Gb no higher than
the guests' own adaptive ITR. Where even the cheapest plan that meets the first spends more
than the default, no policy that holds fixed rates per phase can pass both, and a FAIL of the
CPU target there says nothing about the tuner. This module finds that plan, so the bench can
run it beside the oracle (as the policy `frontier`) and say where the targets conflict.

The plan, per phase of the scenario, is a rate for each tunable VF that
- keeps every busy VF at or above MIN_SCORE of its oracle merit, and the phase's geometric
  mean over busy VFs at or above GEOMEAN_SCORE (the bench's two score targets);
- at the least network CPU per delivered bit over the whole plan (phases weighted by length).

It is found on the simulator's steady state (noise at its mean), like the oracle:
- each VF's effect is swept over the oracle's candidate rates with its neighbours held at the
  current plan (from the oracle's own rates): the change it makes to the host's network CPU,
  to the bits delivered to every tunable VF, and to every busy VF's log score (a VF on a
  saturated port moves its neighbours too, and that is counted against it);
- the effects are taken as additive, which makes each phase a multiple-choice knapsack:
  Dinkelbach's iteration on the ratio, a Lagrange multiplier on the geometric-mean floor;
- the plan is then evaluated as a whole and re-swept around itself (ROUNDS at most), so where
  the sum of the separate effects missed the joint one the next round starts from what the
  plan really does; of the plans that met the floors jointly (the oracle's always does), the
  cheapest per phase is kept.

With a delay bound (`frontier:250`, the throughput objective's own plateau bound in us) only
rates whose coalescing delay is no longer are candidates, besides each VF's rate in the plan it
starts from: what a tuner held to that bound could reach.

Besides the plan, `bound` is the Lagrangian dual of the same additive model: no plan meets the
floor for less CPU per bit, as far as the VFs' effects add up (where they do not, say on a
saturated port, it is an estimate, and the bench reports the plan's run, not the bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from vftune.bench.oracle import LEFT_ALONE, OraclePhase, OraclePlan, OracleVf, candidates, vf_merit
from vftune.bench.scores import MIN_RATIO  # a VF that gets nothing scores this, not log(0)
from vftune.bench.targets import GEOMEAN_SCORE, MIN_SCORE
from vftune.sim.engine import HostRates, HostSim
from vftune.sim.layout import vf_pci
from vftune.sim.nic import nic_profile
from vftune.sim.scenarios import build
from vftune.sim.sweep import tunable_vfs
from vftune.sim.workload import HostSpec

OPEN_PHASE_S = 600.0  # a phase that holds to the end of the run: the bench's stationary length
ROUNDS = 4  # sweeps around the latest plan, for where the VFs' separate effects did not add up


@dataclass(frozen=True)
class Option:
    """One rate for one VF, as changes from the phase's base plan (neighbours held)."""

    itr: int
    cpu: float  # host network CPU, seconds/second
    bits: float  # bits/s delivered to all tunable VFs' applications
    log_score: float  # sum over busy VFs of log(merit / oracle merit)
    floor_ok: bool  # every busy VF it touches stays at or above MIN_SCORE


@dataclass(frozen=True)
class PhaseResult:
    itrs: dict[int, int]  # tunable VF index -> rate
    vfs: dict[int, tuple[float, float]]  # tunable VF index -> (merit, bits/s delivered) at those rates
    cpu: float  # steady state, seconds/second
    bits: float
    log_geomean: float  # mean over busy VFs of log score
    min_score: float
    met: bool  # both score floors hold in the joint steady state


@dataclass(frozen=True)
class Frontier:
    plan: OraclePlan  # the cheapest plan found that meets the floors (objective "frontier")
    cpu_per_gbit: float  # its steady-state network CPU seconds per Gb delivered
    oracle_cpu_per_gbit: float  # the oracle's, the same way
    bound_cpu_per_gbit: float  # the additive model's lower bound (see the module's text)
    met: bool  # every phase meets both floors in the joint steady state

    def figures(self) -> dict[str, float | bool]:
        """What the bench's JSON carries of it (PairResult.extra)."""
        return {"steady_cpu_per_gbit": round(self.cpu_per_gbit, 5),
                "oracle_steady_cpu_per_gbit": round(self.oracle_cpu_per_gbit, 5),
                "bound_cpu_per_gbit": round(self.bound_cpu_per_gbit, 5), "floors_met": self.met}


def _network(rates: HostRates, spec: HostSpec, tunable: list[int]) -> tuple[float, float]:
    """(network CPU seconds/second, bits/s delivered to the tunable VFs), as the bench counts them."""
    cpu = sum(r.guest_cpu for vf, r in zip(spec.vfs, rates.vfs) if vf.guest is not None) + rates.host_kernel_cpu
    return cpu, sum(rates.vfs[i].delivered_bps for i in tunable)


def _log_scores(rates: HostRates, busy: dict[int, tuple[str, float]]) -> dict[int, float]:
    return {i: math.log(max(MIN_RATIO, vf_merit(rates.vfs[i], kind) / ref)) for i, (kind, ref) in busy.items()}


class _Phase:
    """One phase's sweeps and knapsack, around a base plan."""

    def __init__(self, sim: HostSim, t: float, busy: dict[int, tuple[str, float]], tunable: list[int],
                 base: list[int], grid: list[int]) -> None:
        self.sim, self.t, self.busy, self.tunable, self.grid = sim, t, busy, tunable, grid
        self.base = list(base)
        rates = sim.steady_state(t, self.base)
        self.cpu0, self.bits0 = _network(rates, sim.spec, tunable)
        self.logs0 = _log_scores(rates, busy)
        self.options = {i: self._sweep(i, rates.host_kernel_cpu) for i in busy}

    def _sweep(self, i: int, kernel: float) -> list[Option]:
        floor = math.log(MIN_SCORE) - 1e-9
        out = []
        for itr in sorted(set(self.grid) | {self.base[i]}):  # staying put is always a choice
            trial = self.base[:i] + [itr] + self.base[i + 1:]
            rates = self.sim.rates(self.t, trial, kernel)
            cpu, bits = _network(rates, self.sim.spec, self.tunable)
            logs = _log_scores(rates, self.busy)
            moved = [j for j in logs if j == i or abs(logs[j] - self.logs0[j]) > 1e-12]
            out.append(Option(itr, cpu - self.cpu0, bits - self.bits0,
                              sum(logs[j] - self.logs0[j] for j in logs),
                              all(logs[j] >= floor for j in moved)))
        # Around a plan that missed the floors no rate may keep them all: the best one then.
        return [o for o in out if o.floor_ok] or [max(out, key=lambda o: o.log_score)]

    @property
    def need(self) -> float:
        """The log-score sum the floor asks for, as a change from the base plan's."""
        return len(self.busy) * math.log(GEOMEAN_SCORE) - sum(self.logs0.values())

    def pick(self, rho: float, lam: float) -> dict[int, Option]:
        return {i: min(opts, key=lambda o: (o.cpu - rho * o.bits - lam * o.log_score, o.itr))
                for i, opts in self.options.items()}

    def _gain(self, rho: float, lam: float) -> float:
        return sum(o.log_score for o in self.pick(rho, lam).values())

    def _multipliers(self, rho: float) -> tuple[float, float]:
        """The multiplier on the floor, bracketed: at `high` the choice meets it, at `low` not
        (both 0 where the cheapest choice already meets it)."""
        if self._gain(rho, 0.0) >= self.need:
            return 0.0, 0.0
        low, high = 0.0, 1e-6
        while self._gain(rho, high) < self.need and high < 1e12:
            low, high = high, high * 4
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (low, mid) if self._gain(rho, mid) >= self.need else (mid, high)
        return low, high

    def solve(self, rho: float) -> dict[int, Option]:
        """The cheapest choice found (cost CPU - rho x bits) whose log scores meet the floor."""
        return self._tighten(self.pick(rho, self._multipliers(rho)[1]), rho)

    def dual(self, rho: float) -> float:
        """The Lagrangian dual's value: no choice that meets the floor costs less (additive model)."""
        def value(lam: float) -> float:
            chosen = self.pick(rho, lam)
            return sum(o.cpu - rho * o.bits - lam * o.log_score for o in chosen.values()) + lam * self.need

        return max(value(lam) for lam in self._multipliers(rho))

    def _tighten(self, chosen: dict[int, Option], rho: float) -> dict[int, Option]:
        """The multiplier's choice overshoots the floor (its VFs move in whole steps): take the
        single-VF move that saves the most while the floor still holds, until none saves."""
        chosen = dict(chosen)
        while True:
            slack = sum(o.log_score for o in chosen.values()) - self.need
            best: tuple[float, int, Option] | None = None
            for i, opts in self.options.items():
                now = chosen[i]
                for o in opts:
                    saving = (now.cpu - rho * now.bits) - (o.cpu - rho * o.bits)
                    if saving > 1e-15 and o.log_score - now.log_score >= -slack and (best is None or saving > best[0]):
                        best = (saving, i, o)
            if best is None:
                return chosen
            chosen[best[1]] = best[2]

    def plan(self, chosen: dict[int, Option]) -> list[int]:
        itrs = list(self.base)
        for i, o in chosen.items():
            itrs[i] = o.itr
        return itrs


def _evaluate(sim: HostSim, t: float, itrs: list[int], busy: dict[int, tuple[str, float]],
              tunable: list[int]) -> PhaseResult:
    rates = sim.steady_state(t, itrs)
    cpu, bits = _network(rates, sim.spec, tunable)
    logs = _log_scores(rates, busy)
    log_gm = sum(logs.values()) / len(logs) if logs else 0.0
    low = math.exp(min(logs.values())) if logs else 1.0
    met = log_gm >= math.log(GEOMEAN_SCORE) - 1e-9 and low >= MIN_SCORE - 1e-9
    kinds = {i: busy[i][0] if i in busy else "idle" for i in tunable}
    vfs = {i: (vf_merit(rates.vfs[i], kinds[i]), float(rates.vfs[i].delivered_bps)) for i in tunable}
    return PhaseResult({i: itrs[i] for i in tunable}, vfs, cpu, bits, log_gm, low, met)


def _cheapest(choices: list[list[PhaseResult]], weights: list[float]) -> list[PhaseResult]:
    """One result per phase, for the least CPU per bit over the whole plan (Dinkelbach again)."""
    picked = [c[0] for c in choices]
    for _ in range(30):
        bits = sum(w * r.bits for w, r in zip(weights, picked))
        rho = sum(w * r.cpu for w, r in zip(weights, picked)) / bits if bits > 0 else 0.0
        again = [min(c, key=lambda r: r.cpu - rho * r.bits) for c in choices]
        if again == picked:
            break
        picked = again
    return picked


def _solve_phases(phases: list[_Phase], weights: list[float]) -> tuple[list[list[int]], float]:
    """Dinkelbach on the whole plan's CPU per bit: the plan per phase and the dual bound (CPU s per bit)."""
    rho = 0.0
    chosen = [ph.solve(rho) for ph in phases]
    for _ in range(30):
        cpu = sum(w * (ph.cpu0 + sum(o.cpu for o in c.values())) for w, ph, c in zip(weights, phases, chosen))
        bits = sum(w * (ph.bits0 + sum(o.bits for o in c.values())) for w, ph, c in zip(weights, phases, chosen))
        new_rho = cpu / bits if bits > 0 else 0.0
        if abs(new_rho - rho) <= 1e-6 * max(rho, 1e-18):
            break
        rho = new_rho
        chosen = [ph.solve(rho) for ph in phases]
    # Lower bound: the largest rho whose dual value is still >= 0 (no plan is cheaper than it).
    def dual_total(r: float) -> float:
        return sum(w * (ph.cpu0 - r * ph.bits0 + ph.dual(r)) for w, ph in zip(weights, phases))

    low, high = 0.0, rho
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if dual_total(mid) >= 0 else (low, mid)
    return [ph.plan(c) for ph, c in zip(phases, chosen)], low


def give_way_plans(oracle: OraclePlan, front: OraclePlan) -> dict[str, OraclePlan]:
    """Per busy VF, the frontier's plan with that VF at its oracle rate: its neighbours give way
    to the cheapest rates that still keep them at the score floors, and it takes its own best.
    A policy can make that trade (the held-RATE and oracle runs cannot: they move every VF
    alike); a VF whose frontier rate is its oracle rate in every phase has it in the
    frontier's own run already."""
    plans = {}
    for pci in front.phases[0].vfs:
        mine = [(f.vfs[pci], o.vfs[pci]) for f, o in zip(front.phases, oracle.phases)]
        if all(f.itr == o.itr or o.kind in LEFT_ALONE for f, o in mine):
            continue
        phases = tuple(replace(f, vfs={**f.vfs, pci: o.vfs[pci]}) for f, o in zip(front.phases, oracle.phases))
        plans[pci] = replace(front, phases=phases)
    return plans


def frontier(oracle: OraclePlan, max_delay_us: float | None = None) -> Frontier:
    """The cheapest fixed plan (per phase, per tunable VF) that meets the bench's score floors
    against this oracle plan; with `max_delay_us`, among rates whose coalescing delay is no
    longer (the oracle's own rates stay candidates, so the plan can always keep them)."""
    scenario, seed = oracle.scenario, oracle.seed
    spec = build(scenario, seed)
    sim = HostSim(spec, seed, noise=False)
    tunable = tunable_vfs(spec)
    grid = [r for r in candidates(nic_profile(spec.nic)) if max_delay_us is None or 1e6 / r <= max_delay_us]
    pci_of = {i: vf_pci(spec.vfs[i].pf, spec.vfs[i].index) for i in tunable}
    starts, weights, busys, bases = [], [], [], []
    for index, phase in enumerate(oracle.phases):
        start, end = spec.phase_bounds(index)
        starts.append(start)
        weights.append((end - start) if end is not None else OPEN_PHASE_S)
        busys.append({i: (phase.vfs[pci_of[i]].kind, phase.vfs[pci_of[i]].merit) for i in tunable
                      if phase.vfs[pci_of[i]].kind not in LEFT_ALONE and phase.vfs[pci_of[i]].merit > 0})
        itrs = [sim.vfs[i].itr for i in range(len(spec.vfs))]
        for i in tunable:
            itrs[i] = phase.vfs[pci_of[i]].itr
        bases.append(itrs)
    oracle_eval = [_evaluate(sim, t, b, busy, tunable) for t, b, busy in zip(starts, bases, busys)]
    met: list[list[PhaseResult]] = [[r] if r.met else [] for r in oracle_eval]
    plans, bound = bases, math.inf
    for _ in range(ROUNDS):
        phases = [_Phase(sim, t, busy, tunable, b, grid) for t, busy, b in zip(starts, busys, plans)]
        new_plans, new_bound = _solve_phases(phases, weights)
        bound = min(bound, new_bound)
        for found, t, p, busy in zip(met, starts, new_plans, busys):
            result = _evaluate(sim, t, p, busy, tunable)
            if result.met:
                found.append(result)
        if new_plans == plans:
            break
        # Re-swept around the latest plan, met or not: where the moves did not add up, their
        # effects measured from there are what the next knapsack needs.
        plans = new_plans
    results = _cheapest([found or [o] for found, o in zip(met, oracle_eval)], weights)
    cpu = sum(w * r.cpu for w, r in zip(weights, results))
    bits = sum(w * r.bits for w, r in zip(weights, results))
    o_cpu = sum(w * r.cpu for w, r in zip(weights, oracle_eval))
    o_bits = sum(w * r.bits for w, r in zip(weights, oracle_eval))
    plan_phases = []
    for phase, result in zip(oracle.phases, results):
        vfs = {pci_of[i]: OracleVf(result.itrs[i], phase.vfs[pci_of[i]].kind, *result.vfs[i]) for i in tunable}
        plan_phases.append(OraclePhase(phase.start_s, phase.end_s, phase.label, vfs, phase.rounds, phase.converged))
    plan = OraclePlan(scenario, seed, "frontier", oracle.cycle_s, tuple(plan_phases), oracle.duration_s)
    per_gbit = 1e9
    return Frontier(plan, cpu / bits * per_gbit if bits else math.nan,
                    o_cpu / o_bits * per_gbit if o_bits else math.nan,
                    bound * per_gbit, all(r.met for r in results))
