"""Side-by-side benchmark: every simulator scenario with every VF policy, in simulated time.

Each (scenario, policy, seed) runs the real Agent loop (store=None, PFs left in stock NAPI)
against SimHost(speed=inf): one tick every TICK_S (0.25 s) of simulated time. A host-run policy is the agent's
policy on every tunable VF; a guest-run one (the guests' adaptive ITR, DIM) runs inside the
simulated guests while the agent only observes (groundtruth.py). The seed fixes the scenario
instance and its noise, so every policy of a scenario sees the same host, load and bursts. The
oracle (oracle.py) runs through the same noisy simulation and is the reference.

Runs fan out over worker processes, one (scenario, policy, seed) per task, the oracle plans
first. The figures and how they are taken are in scores.py; the targets, targets.py.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from vftune.agent.loop import Agent, AgentConfig
from vftune.bench import random_hosts
from vftune.bench.frontier import frontier, give_way_plans
from vftune.bench.groundtruth import GUEST_STEP_S, MeasuredSim
from vftune.bench.oracle import OraclePlan, held_plan, oracle_plan, run_duration
from vftune.bench.registry import (
    FIXED,
    GUEST,
    ORACLE,
    POLICIES,
    check_policy,
    frontier_delay_us,
    host_factory,
    is_frontier,
)
from vftune.bench.scores import (
    BOUND_PLANS,
    GIVE_WAY,
    IDLE_BPS,
    Cell,
    PairResult,
    Recording,
    Settle,
    held_policies,
    held_rate,
    phase_segments,
    score,
    settle,
    tuner_figures,
)
from vftune.control.policy import StockMode, VfPolicy, VfPolicyFactory
from vftune.lifetime import end_with_parent
from vftune.model import Capabilities
from vftune.sim.host import DEFAULT_STEP_S, SimHost
from vftune.sim.layout import vf_pci
from vftune.sim.scenarios import SCENARIOS, build, get_scenario
from vftune.sim.sweep import tunable_vfs

TICK_S = AgentConfig().interval  # the agent's own tick: each snapshot reads fresh counters (the PF's ethtool statistics)
# Always run: every score is taken against them (under `throughput`, each VF's reference is its
# best over the plans known in advance: scores.BOUND_PLANS).
REFERENCES = ("default", *BOUND_PLANS)
# Wu & Wang's one experiment at 15 sizes (paper-Nvm, paper-3vm-512 its N = 3) ties every policy
# at every size: the default set keeps one size per band, the others stay selectable by name.
PAPER_SIZES = (1, 3, 8, 15)
QUICK_SCENARIOS = ("paper-3vm", "rr-mix", "saturated-rr-bulk", "steps-10s")
QUICK_DURATION_S = 300.0

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def _paper_size(name: str) -> int | None:
    """N for a size of Wu & Wang's 512-byte experiment (paper-Nvm, paper-3vm-512), else None
    (paper-3vm is their 15000-byte case: another experiment)."""
    if name == "paper-3vm-512":
        return 3
    if name.startswith("paper-") and name.endswith("vm") and name[6:-2].isdigit() and name != "paper-3vm":
        return int(name[6:-2])
    return None


def default_scenarios() -> list[str]:
    """What `vftune bench` runs when no scenario is named: every built-in but the paper sizes
    between the kept bands."""
    return [name for name, s in SCENARIOS.items() if s.source == "built-in"
            and (_paper_size(name) is None or _paper_size(name) in PAPER_SIZES)]


def default_duration(scenario: str, seed: int = 0) -> float:
    """The scenario file's duration_s, else CYCLES cycles, else STATIONARY_S past the last
    phase's start (without a cycle the last phase holds: as long as a stationary scenario)."""
    return run_duration(build(scenario, seed))


def _factory(policy: str, made: dict[str, Recording]) -> VfPolicyFactory:
    base = host_factory(policy)

    def make(pci: str, caps: Capabilities) -> VfPolicy:
        made[pci] = Recording(base(pci, caps))
        return made[pci]

    return make


def _direct(policy: str, plan: OraclePlan, pcis: list[str]) -> Callable[[float], dict[str, int]] | None:
    """For a fixed rate or a plan (the oracle, the frontier): the writes due at simulated time t
    (none between phases)."""
    if policy in FIXED:
        return lambda t: {pci: FIXED[policy] for pci in pcis} if t == 0.0 else {}
    if policy == ORACLE or is_frontier(policy):
        starts = {p.start_s for p in plan.phases}

        def due(t: float) -> dict[str, int]:
            at = t % plan.cycle_s if plan.cycle_s else t
            return plan.phase_at(t).itrs if t == 0.0 or any(abs(at - s) < 1e-6 for s in starts) else {}

        return due
    return None


def run_pair(scenario: str, policy: str, seed: int = 0, duration: float | None = None,
             plan: OraclePlan | None = None) -> PairResult:
    """One policy on one scenario for `duration` simulated seconds (default: default_duration).

    Throughput ratios and per-VF scores are not filled in: they need the oracle's run (score())."""
    get_scenario(scenario)
    check_policy(policy)
    duration = default_duration(scenario, seed) if duration is None else duration
    if not duration >= 2 * TICK_S:
        raise ValueError(f"duration must be at least {2 * TICK_S:g} simulated seconds, got {duration!r}")
    plan = plan or oracle_plan(scenario, seed, duration=duration)
    ticks = int(round(duration / TICK_S))
    segments = phase_segments(plan, ticks * TICK_S)
    host = SimHost(scenario, seed=seed, speed=math.inf)
    guest = GUEST.get(policy)
    step = GUEST_STEP_S if policy in GUEST else DEFAULT_STEP_S
    host.sim = MeasuredSim(host.spec, seed, segments, step, host.sim.patched_counters, guest)
    made: dict[str, Recording] = {}
    spec = host.spec
    tunable = tunable_vfs(spec)
    pcis = [vf_pci(spec.vfs[i].pf, spec.vfs[i].index) for i in tunable]
    # Fixed rates and the oracle's plan need no agent: the harness writes them through the host
    # driver at each phase start, so the reference is in force from t = 0. Guest-run policies
    # need none either: the host only watches.
    front = frontier(plan, frontier_delay_us(policy)) if is_frontier(policy) else None
    writes = _direct(policy, front.plan if front else plan, pcis)
    agent = None
    if writes is None and policy not in GUEST:
        agent = Agent(host, None, _factory(policy, made), lambda pf, caps: StockMode(),
                      AgentConfig(interval=TICK_S), wall_offset=0.0)
        agent.start()
    elif writes is not None:
        for pci, itr in writes(0.0).items():
            host.set_vf_itr(pci, itr)
        host.sim.apply_requests_now()
    # Convergence and steady state follow the host's setting (what a policy decides); the rate
    # the VF delivers also moves under a guest's adaptive ITR, which is counted apart.
    last_setting = {pci: host.vf_setting(pci) for pci in pcis}
    last_itr = {pci: host.vf_itr(pci) for pci in pcis}
    changes: dict[str, list[float]] = {pci: [] for pci in pcis}
    moves = 0
    for _ in range(ticks):
        host.sleep(TICK_S)
        t = host.now()
        if agent is not None:
            agent.tick()
        elif writes is not None:
            for pci, itr in writes(t).items():
                host.set_vf_itr(pci, itr)
            host.sim.apply_requests_now()  # a reference: in force at once, not at the VF's next fetch
        for pci in pcis:
            setting, itr = host.vf_setting(pci), host.vf_itr(pci)
            if setting != last_setting[pci]:
                changes[pci].append(t)
                last_setting[pci] = setting
            if itr != last_itr[pci]:
                moves += 1
                last_itr[pci] = itr
    sim = host.sim
    elapsed = round(sim.t, 6)  # fractional steps add up to a hair off the whole second
    tally = sim.tally
    background = sum(vm.background_cpu for vm in spec.vms) * elapsed
    network_cpu = sum(sim.guest_cpu.values()) - background + sim.host_irq_cpu

    # A VF without traffic in a phase (an idle guest, < 1 Mbit/s) has nothing to converge to:
    # it is left out of that phase's convergence and steady-state figures.
    def busy(i: int, k: int) -> bool:
        return tally[i][k].bps >= IDLE_BPS

    index = dict(zip(pcis, tunable))
    cold = [settle(changes[p], *segments[0]) for p in pcis if busy(index[p], 0)]
    later = [settle(changes[p], a, b) for p in pcis for k, (a, b) in enumerate(segments)
             if k and busy(index[p], k)]
    every = cold + later
    steady_s = sum(s.steady_s for s in every)
    steady_changes = sum(s.steady_changes for s in every)

    def worst(items: list[Settle]) -> tuple[float | None, int | None]:
        if not items or any(s.at is None for s in items):
            return None, None
        return max(s.at for s in items), max(s.changes for s in items)  # type: ignore[type-var]

    # No VF busy at the start: none had anything to settle (0 s), where no later phase means
    # "no change" (None). A VF whose load first comes in a later phase settles "after a change".
    converge_s, converge_probes = worst(cold) if cold else (0.0, 0)
    reconverge_s, reconverge_probes = worst(later)
    extra: dict[str, Any] = {}
    if policy.startswith("vftune"):
        settled = {p: [settle(changes[p], a, b) if busy(index[p], k) else Settle(None, 0, 0.0, 0)
                       for k, (a, b) in enumerate(segments)] for p in pcis}
        extra = tuner_figures(made, segments, settled)
    if front is not None:
        extra = front.figures()
    # Per VF and per phase of the scenario (occurrences summed): what scores are taken from.
    cells: dict[tuple[str, int], Cell] = {}
    for pci, i in index.items():
        for k, (a, _) in enumerate(segments):
            phase = plan.phase_at(a)
            p = plan.phases.index(phase)
            cell = cells.setdefault((pci, p), Cell(phase.vfs[pci].kind))
            cell.add(tally[i][k])
    oracle_converged = plan.converged
    result = PairResult(
        scenario, policy, seed, elapsed,
        throughput_bps=sum(t.delivered_bits for i in tunable for t in tally[i]) / elapsed,
        cpu=network_cpu / elapsed / spec.host_cpus,
        interrupts_per_s=sum(t.interrupts for i in tunable for t in tally[i]) / elapsed,
        converge_s=converge_s, converge_probes=converge_probes,
        reconverge_s=reconverge_s, reconverge_probes=reconverge_probes,
        changes_per_min=steady_changes / (steady_s / 60.0) if steady_s > 0 else 0.0,
        itr_moves_per_min=moves / (len(pcis) * elapsed / 60.0) if pcis and elapsed > 0 else 0.0,
        cells=cells, extra=extra, oracle_converged=oracle_converged,
    )
    host.close()
    return result


# ---- a whole run ------------------------------------------------------------------------


def _plan_task(task: tuple[str, int, str, float | None]) -> OraclePlan:
    scenario, seed, objective, duration = task
    return oracle_plan(scenario, seed, objective, duration)


def give_way(scenario: str, seed: int, duration: float | None, plan: OraclePlan) -> PairResult:
    """The give-way reference (frontier.give_way_plans): per VF, its cells from the run of the
    frontier's plan with that VF at its oracle rate; the other figures are the frontier's."""
    front = frontier(plan).plan
    result = run_pair(scenario, ORACLE, seed, duration, front)
    result.policy, result.cells = GIVE_WAY, {}
    for pci, mixed in give_way_plans(plan, front).items():
        run = run_pair(scenario, ORACLE, seed, duration, mixed)
        result.cells.update({key: cell for key, cell in run.cells.items() if key[0] == pci})
    return result


def _pair_task(task: tuple[str, str, int, float | None, OraclePlan]) -> PairResult:
    scenario, policy, seed, duration, plan = task
    started = time.process_time()
    rate = held_rate(policy)
    if policy == GIVE_WAY:
        result = give_way(scenario, seed, duration, plan)
    elif rate is None:
        result = run_pair(scenario, policy, seed, duration, plan)
    else:  # a reference run: one rate held host-wide, written as the oracle's plan is
        result = run_pair(scenario, ORACLE, seed, duration, held_plan(plan, rate))
        result.policy = policy
    result.run_s = time.process_time() - started
    return result


def _cost(scenario: str, seed: int, duration: float | None) -> float:
    spec = build(scenario, seed)
    return len(spec.vfs) * (duration or default_duration(scenario, seed))


def run(scenarios: Iterable[str] | None = None, policies: Iterable[str] | None = None,
        seeds: Iterable[int] = (0,), duration: float | None = None, jobs: int | None = None,
        objective: str = "throughput", progress: Progress | None = None, random: int = 0) -> list[PairResult]:
    """Every scenario x policy x seed, and `random` random hosts per seed (each on its own seed);
    each scored against its seed's oracle and default runs. None: the default set (an empty list:
    no built-in, the random hosts alone)."""
    policies = list(dict.fromkeys(policies or POLICIES))
    seeds = list(dict.fromkeys(seeds))
    scenarios = list(dict.fromkeys(default_scenarios() if scenarios is None else scenarios))
    for name in scenarios:
        get_scenario(name)
    for name in policies:
        check_policy(name)
    drawn = {seed: random_hosts.register(seed, random) for seed in seeds}
    # In the registry's order, a tuner with a margin after the named ones; the oracle last.
    references = REFERENCES if objective == "throughput" else ("default", ORACLE)
    wanted = [p for p in POLICIES if (p in policies or p in references) and p != ORACLE]
    wanted += [p for p in policies if p not in POLICIES] + [ORACLE]
    held = held_policies() if objective == "throughput" else []
    keys = [(s, seed) for s in scenarios for seed in seeds] + [(s, seed) for seed in seeds for s in drawn[seed]]
    order = sorted(keys, key=lambda k: -_cost(k[0], k[1], duration))
    plan_tasks = [(s, seed, objective, duration or default_duration(s, seed)) for s, seed in order]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(plan_tasks) * len(wanted)))
    report = progress or (lambda stage, done, total: None)

    def fan_out(fn: Callable[[Any], Any], tasks: list[Any], stage: str, pool: Any) -> list[Any]:
        out = []
        report(stage, 0, len(tasks))
        mapped = map(fn, tasks) if pool is None else pool.imap_unordered(fn, tasks, chunksize=1)
        for item in mapped:
            out.append(item)
            report(stage, len(out), len(tasks))
        return out

    def go(pool: Any) -> list[PairResult]:
        plans = {(p.scenario, p.seed): p for p in fan_out(_plan_task, plan_tasks, "oracle", pool)}
        pair_tasks = [(s, p, seed, duration, plans[(s, seed)]) for s, seed in order for p in wanted + held]
        return fan_out(_pair_task, pair_tasks, "pairs", pool)

    if jobs == 1:
        results = go(None)
    else:
        # Workers end with this process, SIGKILL included (lifetime.py).
        with multiprocessing.get_context("fork").Pool(jobs, end_with_parent, (os.getpid(),)) as pool:
            results = go(pool)
    score(results, objective)
    results = [r for r in results if r.policy in policies]
    rank = {name: i for i, name in enumerate(scenarios + [s for seed in seeds for s in drawn[seed]])}
    prank = {name: i for i, name in enumerate(wanted)}
    results.sort(key=lambda r: (rank[r.scenario], prank[r.policy], r.seed))
    return results
