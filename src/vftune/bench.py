"""Side-by-side benchmark: every simulator scenario with every VF policy, in simulated time.

Each (scenario, policy) pair runs the real Agent loop (store=None, PFs left in stock NAPI)
against SimHost(speed=inf): one tick per simulated second, the policy under test on every VF.
The seed fixes the scenario instance and its noise, so every policy of a scenario sees the same
host, load and bursts; the oracle (the sweep's best fixed ITR of each phase per VF, set at each
phase) runs through the same noisy simulation and is the throughput reference.

Figures per pair (ground truth from the simulator, not what the agent estimated):
- throughput_ratio: bits the guest VFs' counters count (rx + tx) over the run / the oracle's;
- cpu: network CPU as a share of the host's cores (guests' receive paths + host irq/softirq),
  the sweep's definition; interrupts_per_s: all guest VFs together;
- converge_s / converge_probes (cold) and reconverge_s / reconverge_probes (after each phase
  change): per VF, the time and the number of ITR changes until the delivered ITR then stays
  put for HOLD_S (or to the end of the phase); the worst VF counts. None = never settled;
- changes_per_min: delivered-ITR changes per VF-minute after settling (steady state), restarts
  included; a policy that never settles counts all its changes.
A VF without traffic in a phase (< 1 Mbit/s: an idle guest) is left out of that phase's
convergence and change figures: its ITR, the guest's adaptive one, carries nothing.
For vftune the tuner's own records add search_probes_cold (measurements of each VF's first
search, the incumbent's and repeats included; the worst VF) and search_probes_phase (every
measurement from a phase change until the convergence the VF then held), restarts by cause,
and unasked_changes (decisions outside any search; none expected).

The ITR is what the simulated 82599 delivers (SimHost.vf_itr): under the guest's adaptive ITR
its changes count too, since the guest makes them.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.peers import PEERS
from vftune.agent.policy import ItrDecision, StockMode, VfPolicy, VfSample
from vftune.agent.tuner import SearchTuner, _same_itr
from vftune.hostdriver.base import Capabilities
from vftune.sim.host import SimHost
from vftune.sim.scenarios import SCENARIOS, build, get_scenario
from vftune.sim.layout import vf_pci
from vftune.sim.sweep import OraclePlan, oracle_plan, tunable_vfs

POLICIES: tuple[str, ...] = (
    "default", "fixed-8000", "fixed-20000", "fixed-100000", "paper", "net_dim", "ixgbe", "vftune", "oracle",
)
STATIONARY_S = 1800.0  # 30 simulated minutes: two or three of vftune's periodic restarts per VF
CYCLES = 2  # phased scenarios: every phase twice, so the first phase's return is a phase change too
IDLE_BPS = 1e6  # below this average a VF is idle in a phase
HOLD_S = 60.0  # an ITR that stays put this long has settled
TICK_S = 1.0


def default_duration(scenario: str, seed: int = 0) -> float:
    spec = build(scenario, seed)
    if spec.duration_s:
        return spec.duration_s
    return CYCLES * spec.cycle_s if spec.cycle_s else STATIONARY_S


class OraclePolicy:
    """Sets the oracle's ITR for the phase in force: the best fixed ITR, known in advance."""

    name = "oracle"

    def __init__(self, pci: str, plan: OraclePlan) -> None:
        self.pci = pci
        self.plan = plan

    def step(self, sample: VfSample) -> ItrDecision | None:
        phase = self.plan.phase_at(sample.t)
        itr = phase.itrs.get(self.pci)
        if itr is None or _same_itr(itr, sample.itr):
            return None
        return ItrDecision(itr, f"oracle: {itr}/s for phase {phase.label or 0}")


class Recording:
    """Passes samples to the policy under test and remembers its decisions (reason included)."""

    def __init__(self, inner: VfPolicy) -> None:
        self.inner = inner
        self.name = inner.name
        self.decisions: list[tuple[float, ItrDecision]] = []
        self.told: list[float] = []  # when a search was told a measurement (SearchTuner only)
        self._search: object = None
        self._probes = 0

    def step(self, sample: VfSample) -> ItrDecision | None:
        decision = self.inner.step(sample)
        if decision is not None:
            self.decisions.append((sample.t, decision))
        search = getattr(self.inner, "search", None)
        if search is not None and hasattr(search, "probes"):
            seen = 0 if search is not self._search else self._probes
            self.told.extend([sample.t] * max(0, search.probes - seen))
            self._search, self._probes = search, search.probes
        return decision

    def state(self) -> dict[str, Any]:
        state = getattr(self.inner, "state", None)
        return state() if callable(state) else {}


@dataclass
class Settle:
    at: float | None  # seconds from the segment start; None = never settled
    changes: int  # ITR changes up to settling (all of the segment's when never)
    steady_s: float
    steady_changes: int


def settle(changes: list[float], start: float, end: float, hold_s: float = HOLD_S) -> Settle:
    """When a VF's delivered ITR settled in [start, end): the last change before a quiet hold_s.

    A quiet stretch that reaches the segment's end counts when it is at least hold_s long or
    covers the whole remainder of a segment shorter than that.
    """
    inside = [t for t in changes if start <= t < end]
    marks = [start] + inside
    for i, t in enumerate(marks):
        following = marks[i + 1] if i + 1 < len(marks) else end
        if following - t >= min(hold_s, end - start):
            later = len(inside) - i
            return Settle(t - start, i, end - t, later)
    return Settle(None, len(inside), end - start, len(inside))


def _segments(plan: OraclePlan, duration: float) -> list[tuple[float, float]]:
    """[start, end) of each phase occurrence in the run (one segment when nothing changes)."""
    if not plan.cycle_s:
        return [(0.0, duration)]
    starts = sorted({p.start_s for p in plan.phases})
    out = []
    base = 0.0
    while base < duration:
        for s in starts:
            if base + s < duration:
                out.append(base + s)
        base += plan.cycle_s
    bounds = out + [duration]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


@dataclass
class PairResult:
    scenario: str
    policy: str
    seed: int
    duration_s: float
    throughput_bps: float
    cpu: float
    interrupts_per_s: float
    converge_s: float | None
    converge_probes: int | None
    reconverge_s: float | None
    reconverge_probes: int | None
    changes_per_min: float
    throughput_ratio: float = math.nan
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {
            "scenario": self.scenario,
            "policy": self.policy,
            "throughput_ratio": _round(self.throughput_ratio, 4),
            "cpu": _round(self.cpu, 4),
            "interrupts_per_s": _round(self.interrupts_per_s, 0),
            "converge_s": _round(self.converge_s, 0),
            "converge_probes": self.converge_probes,
            "reconverge_s": _round(self.reconverge_s, 0),
            "reconverge_probes": self.reconverge_probes,
            "changes_per_min": _round(self.changes_per_min, 3),
            "throughput_gbps": _round(self.throughput_bps / 1e9, 4),
            "seed": self.seed,
            "duration_s": self.duration_s,
        }
        d.update(self.extra)
        return d


def _round(x: float | None, digits: int) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(x, digits) if digits else float(round(x))


def _factory(policy: str, plan: OraclePlan, made: dict[str, Recording]):
    if policy != "oracle" and policy not in PEERS:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")

    def make(pci: str, caps: Capabilities) -> VfPolicy:
        inner: VfPolicy = OraclePolicy(pci, plan) if policy == "oracle" else PEERS[policy](pci, caps)
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
    segments = _segments(plan, ticks * TICK_S)
    bounds = [b for _, b in segments]
    marks: dict[str, list[float]] = {pci: [] for pci in pcis}  # cumulative bits at each segment end
    agent.start()
    for _ in range(ticks):
        host.sleep(TICK_S)
        agent.tick()
        t = host.now()
        if any(abs(t - b) < 1e-6 for b in bounds):
            for pci in pcis:
                live = host.sim.vfs[index[pci]].live
                marks[pci].append((live[1] + live[3]) * 8.0)
        for pci in pcis:
            itr = host.vf_itr(pci)
            if itr != last_itr[pci]:
                changes[pci].append(t)
                last_itr[pci] = itr
    elapsed = host.now()
    sim = host.sim
    bits = sum((sim.vfs[i].live[1] + sim.vfs[i].live[3]) * 8.0 for i in tunable)
    interrupts = sum(sim.vfs[i].live[4] for i in tunable)
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
        extra = _tuner_figures(made, segments, settled)
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


def _tuner_figures(made: dict[str, Recording], segments: list[tuple[float, float]],
                   settled: dict[str, list[Settle]]) -> dict[str, Any]:
    """vftune's own view: probes told until each VF settled, and why it restarted."""
    cold_probes: list[int] = []
    phase_probes: list[int] = []
    restarts: dict[str, int] = {}
    unasked = 0
    for pci, rec in made.items():
        tuner = rec.inner
        if not isinstance(tuner, SearchTuner) or pci not in settled:
            continue  # not a guest's VF: not counted anywhere in the benchmark
        for i, ((start, end), st) in enumerate(zip(segments, settled[pci])):
            if st.at is None:
                continue
            # Cold: the first search's probes. After a phase change: every probe told from the
            # change to the convergence the VF then held (a search restarted on the way keeps
            # counting, and so does one that was running when the phase changed).
            settled_from = start if i == 0 else start + st.at - 1e-6
            done = next((float(c["t"]) for c in tuner.convergences if settled_from <= float(c["t"]) < end), None)
            if done is None:
                continue
            probes = sum(1 for t in rec.told if start <= t <= done)
            (cold_probes if i == 0 else phase_probes).append(probes)
        for cause, n in tuner.restarts.items():
            restarts[cause] = restarts.get(cause, 0) + n
        unasked += _unasked_changes(rec)
    return {
        "search_probes_cold": max(cold_probes) if cold_probes else None,
        "search_probes_phase": max(phase_probes) if phase_probes else None,
        "restarts_periodic": restarts.get("periodic", 0),
        "restarts_load": restarts.get("load", 0),
        "restarts_in_search": restarts.get("in_search", 0),
        "unasked_changes": unasked,
    }


def _unasked_changes(rec: Recording) -> int:
    """Decisions vftune took that belong to no search and no restart (should be none)."""
    return sum(1 for _, d in rec.decisions
               if not d.reason.startswith(("start:", "restart:", "probe", "converged", "abort"))
               and "probe not applied" not in d.reason and "idle during probe" not in d.reason)


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
    wanted = policies if "oracle" in policies else policies + ["oracle"]
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
    oracle = {r.scenario: r.throughput_bps for r in results if r.policy == "oracle"}
    for r in results:
        r.throughput_ratio = r.throughput_bps / oracle[r.scenario] if oracle[r.scenario] > 0 else math.nan
    rank = {name: i for i, name in enumerate(scenarios)}
    prank = {name: i for i, name in enumerate(wanted)}
    results.sort(key=lambda r: (rank[r.scenario], prank[r.policy]))
    return [r for r in results if r.policy in policies]


# ---- targets (issue 3) --------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    ok: bool
    detail: str


def targets(results: list[PairResult]) -> list[Target]:
    """The issue's targets for vftune, each with the figures behind its verdict."""
    by = {(r.scenario, r.policy): r for r in results}
    scenarios = list(dict.fromkeys(r.scenario for r in results))
    ours = [by[(s, "vftune")] for s in scenarios if (s, "vftune") in by]
    if not ours:
        return []
    out: list[Target] = []
    ratios = [r.throughput_ratio for r in ours]
    mean = sum(ratios) / len(ratios)
    low = min(ours, key=lambda r: r.throughput_ratio)
    out.append(Target("throughput vs oracle", mean >= 0.97 and low.throughput_ratio >= 0.90,
                      f"mean {mean:.3f} (>= 0.97), lowest {low.throughput_ratio:.3f} in {low.scenario} (>= 0.90)"))
    if all((s, "default") in by for s in scenarios):
        gaps = [(r.throughput_ratio / by[(r.scenario, "default")].throughput_ratio - 1.0, r.scenario) for r in ours]
        worst_gap, where = min(gaps)
        out.append(Target("never below default by > 1%", worst_gap >= -0.01,
                          f"worst {worst_gap * 100:+.2f}% vs default in {where}"))
    peers = [p for p in ("paper", "net_dim", "ixgbe") if all((s, p) in by for s in scenarios)]
    if peers:
        means = {p: sum(by[(s, p)].throughput_ratio for s in scenarios) / len(scenarios) for p in peers}
        out.append(Target("ahead of paper, net_dim, ixgbe on average", all(mean > m for m in means.values()),
                          f"vftune {mean:.3f}; " + ", ".join(f"{p} {m:.3f}" for p, m in means.items())))
    cold_max = max((r.extra.get("search_probes_cold") or 0 for r in ours), default=0)
    phase_max = max((r.extra.get("search_probes_phase") or 0 for r in ours), default=0)
    never = [r.scenario for r in ours if r.converge_s is None]
    never += [r.scenario for r in ours if build(r.scenario, r.seed).cycle_s and r.reconverge_s is None]
    out.append(Target("converges in <= 15 probes cold, <= 20 after a phase change",
                      cold_max <= 15 and phase_max <= 20 and not never,
                      f"cold max {cold_max} probes; after a phase change max {phase_max}"
                      + (f"; never settled in {', '.join(never)}" if never else "")))
    unasked = sum(int(r.extra.get("unasked_changes", 0)) for r in ours)
    load_restarts = {r.scenario: r.extra.get("restarts_load", 0) for r in ours
                     if not build(r.scenario, r.seed).cycle_s and r.extra.get("restarts_load", 0)}
    cpm = max(r.changes_per_min for r in ours)
    out.append(Target("no steady-state changes beyond the restart policy", unasked == 0 and not load_restarts,
                      f"{unasked} changes outside searches; max {cpm:.2f} changes/min, all from restarts"
                      + (f"; load-change restarts without a load change: {load_restarts}" if load_restarts else "")))
    if all((s, "default") in by for s in scenarios):
        equal = [(r, by[(r.scenario, "default")]) for r in ours
                 if abs(r.throughput_ratio / by[(r.scenario, "default")].throughput_ratio - 1.0) <= 0.01]
        worse = [f"{r.scenario} ({r.cpu:.4f} vs {d.cpu:.4f})" for r, d in equal if r.cpu >= d.cpu]
        out.append(Target("less CPU than default where throughput is equal", not worse,
                          f"{len(equal)} scenario(s) within 1% of default"
                          + (f"; not less in {', '.join(worse)}" if worse else ", less CPU in all")))
    return out
