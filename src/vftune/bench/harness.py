"""Side-by-side benchmark: every simulator scenario with every VF policy, in simulated time.

Each (scenario, policy) pair runs the real Agent loop (store=None, PFs left in stock NAPI)
against SimHost(speed=inf): one tick per simulated second, the policy under test on every VF.
The seed fixes the scenario instance and its noise, so every policy of a scenario sees the same
host, load and bursts; the oracle (the sweep's best fixed ITR of each phase per VF, set at each
phase) runs through the same noisy simulation and is the throughput reference.

The figures and how they are taken are in scores.py; the targets vftune must meet, targets.py.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Iterable
from typing import Any

from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policy import StockMode, VfPolicy, VfPolicyFactory
from vftune.bench.oracle import OraclePlan, OraclePolicy, oracle_plan
from vftune.bench.registry import FACTORIES, ORACLE, POLICIES
from vftune.bench.scores import IDLE_BPS, PairResult, Recording, Settle, phase_segments, settle, tuner_figures
from vftune.model import Capabilities
from vftune.sim.host import SimHost
from vftune.sim.layout import vf_pci
from vftune.sim.scenarios import SCENARIOS, build, get_scenario
from vftune.sim.sweep import tunable_vfs

STATIONARY_S = 1800.0  # 30 simulated minutes: two or three of vftune's periodic restarts per VF
CYCLES = 2  # phased scenarios: every phase twice, so the first phase's return is a phase change too
TICK_S = 1.0


def default_duration(scenario: str, seed: int = 0) -> float:
    spec = build(scenario, seed)
    if spec.duration_s:
        return spec.duration_s
    return CYCLES * spec.cycle_s if spec.cycle_s else STATIONARY_S


def _factory(policy: str, plan: OraclePlan, made: dict[str, Recording]) -> VfPolicyFactory:
    if policy != ORACLE and policy not in FACTORIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")

    def make(pci: str, caps: Capabilities) -> VfPolicy:
        inner: VfPolicy = OraclePolicy(pci, plan) if policy == ORACLE else FACTORIES[policy](pci, caps)
        made[pci] = Recording(inner)
        return made[pci]

    return make


def run_pair(scenario: str, policy: str, seed: int = 0, duration: float | None = None,
             plan: OraclePlan | None = None) -> PairResult:
    """One policy on one scenario for `duration` simulated seconds (default: default_duration)."""
    get_scenario(scenario)
    duration = default_duration(scenario, seed) if duration is None else duration
    if not duration >= 2 * TICK_S:
        raise ValueError(f"duration must be at least {2 * TICK_S:g} simulated seconds, got {duration!r}")
    plan = plan or oracle_plan(scenario, seed)
    host = SimHost(scenario, seed=seed, speed=math.inf)
    made: dict[str, Recording] = {}
    agent = Agent(host, None, _factory(policy, plan, made), lambda pf, caps: StockMode(),
                  AgentConfig(interval=TICK_S), wall_offset=0.0)
    spec = host.spec
    tunable = tunable_vfs(spec)
    pcis = [vf_pci(spec.vfs[i].pf, spec.vfs[i].index) for i in tunable]
    last_itr = {pci: host.vf_itr(pci) for pci in pcis}
    changes: dict[str, list[float]] = {pci: [] for pci in pcis}
    index = dict(zip(pcis, tunable))
    ticks = int(round(duration / TICK_S))
    segments = phase_segments(plan, ticks * TICK_S)
    bounds = [b for _, b in segments]
    marks: dict[str, list[float]] = {pci: [] for pci in pcis}  # cumulative bits at each segment end
    agent.start()
    for _ in range(ticks):
        host.sleep(TICK_S)
        agent.tick()
        t = host.now()
        if any(abs(t - b) < 1e-6 for b in bounds):
            for pci in pcis:
                marks[pci].append(host.sim.vfs[index[pci]].live.bits)
        for pci in pcis:
            itr = host.vf_itr(pci)
            if itr != last_itr[pci]:
                changes[pci].append(t)
                last_itr[pci] = itr
    elapsed = host.now()
    sim = host.sim
    bits = sum(sim.vfs[i].live.bits for i in tunable)
    interrupts = sum(sim.vfs[i].live.interrupts for i in tunable)
    background = sum(vm.background_cpu for vm in spec.vms) * elapsed
    network_cpu = sum(sim.guest_cpu.values()) - background + sim.host_irq_cpu

    # A VF without traffic in a phase (an idle guest, < 1 Mbit/s) has nothing to converge to:
    # it is left out of that phase's convergence and steady-state figures.
    def busy(pci: str, k: int) -> bool:
        before = marks[pci][k - 1] if k else 0.0
        a, b = segments[k]
        return (marks[pci][k] - before) / (b - a) >= IDLE_BPS

    cold = [settle(changes[p], *segments[0]) for p in pcis if busy(p, 0)]
    later = [settle(changes[p], a, b) for p in pcis for k, (a, b) in enumerate(segments) if k and busy(p, k)]
    every = cold + later
    steady_s = sum(s.steady_s for s in every)
    steady_changes = sum(s.steady_changes for s in every)

    def worst(items: list[Settle]) -> tuple[float | None, int | None]:
        if not items:
            return None, None
        if any(s.at is None for s in items):
            return None, None
        return max(s.at for s in items), max(s.changes for s in items)  # type: ignore[type-var]

    converge_s, converge_probes = worst(cold)
    reconverge_s, reconverge_probes = worst(later)
    extra: dict[str, Any] = {}
    if policy == "vftune":
        settled = {p: [settle(changes[p], a, b) if busy(p, k) else Settle(None, 0, 0.0, 0)
                       for k, (a, b) in enumerate(segments)] for p in pcis}
        extra = tuner_figures(made, segments, settled)
    result = PairResult(
        scenario, policy, seed, elapsed,
        throughput_bps=bits / elapsed,
        cpu=network_cpu / elapsed / spec.host_cpus,
        interrupts_per_s=interrupts / elapsed,
        converge_s=converge_s, converge_probes=converge_probes,
        reconverge_s=reconverge_s, reconverge_probes=reconverge_probes,
        changes_per_min=steady_changes / (steady_s / 60.0) if steady_s > 0 else 0.0,
        extra=extra,
    )
    host.close()
    return result


# ---- a whole run ------------------------------------------------------------------------


def _run_task(task: tuple[str, str, int, float | None, OraclePlan]) -> PairResult:
    scenario, policy, seed, duration, plan = task
    return run_pair(scenario, policy, seed, duration, plan)


def run(scenarios: Iterable[str] | None = None, policies: Iterable[str] | None = None, seed: int = 0,
        duration: float | None = None, jobs: int | None = None) -> list[PairResult]:
    """Every scenario x policy pair; throughput ratios are filled in against the oracle."""
    scenarios = list(scenarios or SCENARIOS)
    policies = list(policies or POLICIES)
    for name in scenarios:
        get_scenario(name)
    for name in policies:
        if name not in POLICIES:
            raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
    wanted = policies if ORACLE in policies else [*policies, ORACLE]
    plans = {name: oracle_plan(name, seed) for name in scenarios}
    # Biggest hosts first so the pool's last tasks are short.
    order = sorted(scenarios, key=lambda n: -len(build(n, seed).vfs))
    tasks = [(s, p, seed, duration, plans[s]) for s in order for p in wanted]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(tasks)))
    if jobs == 1:
        results = [_run_task(t) for t in tasks]
    else:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            results = pool.map(_run_task, tasks, chunksize=1)
    oracle = {r.scenario: r.throughput_bps for r in results if r.policy == ORACLE}
    for r in results:
        r.throughput_ratio = r.throughput_bps / oracle[r.scenario] if oracle[r.scenario] > 0 else math.nan
    rank = {name: i for i, name in enumerate(scenarios)}
    prank = {name: i for i, name in enumerate(wanted)}
    results.sort(key=lambda r: (rank[r.scenario], prank[r.policy]))
    return [r for r in results if r.policy in policies]
