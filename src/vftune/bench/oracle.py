"""The oracle: per VF and per phase, the best fixed ITR, known in advance, under an objective.

For each phase of a scenario every tunable VF takes its best response: a sweep of that VF over
rates with its neighbours held at their own current oracle settings. Rounds of best responses
repeat until a whole round changes nothing (a fixed point: no VF can do better alone), at most
MAX_ROUNDS; a phase that did not settle says so (`converged` False) and the bench prints it.

Two stages:
1. on the simulator's steady state (noise at its mean), every rate of the grid (4% apart, then
   every 2.048-us hardware step around the best): where each VF's best lies at the mean load;
2. under the run's own noise (common random numbers): from that fixed point, each VF's rates are
   judged by what they deliver over the very seconds the bench's run spends in the phase, with
   the noise those seconds draw (the same seed, so the same bursts every policy meets). A rate
   that is best at the mean load can lose a burst's packets a faster one would have kept (or the
   reverse, under a vCPU's jitter), so the steady state alone is no bound: under heavy bursts
   single VFs beat it by 4-5%. The candidates here are the steady-state choice, every rate a
   peer runs, rates 4% x 1, 2, 4 ... 128 grid steps either side, then every hardware step around
   the best; at most NOISY_SAMPLES step starts per phase are evaluated (evenly spread over the
   run, so a long run costs no more than a short one). Rounds repeat as in stage 1, at most
   NOISY_ROUNDS.

What "best" means is the objective's:
- throughput: the VF's own merit at its highest (below). Rates within TIE of the best are one
  plateau, and the oracle takes the middle of it (the median rate): at its lower edge two
  bounds meet (the ring at a low rate and the CPU, say), so a second of spare CPU or a burst
  finds the cheapest rate capped;
- efficiency: the lowest rate whose merit is within EFFICIENCY_MARGIN of that best;
- latency: request/response VFs as under throughput (their merit is response time), the other
  busy VFs as under efficiency, so their interrupts take the least CPU from their neighbours.
A VF's merit (vf_merit) is what the bench scores it on: the inverse of the mean response time
for the kinds in RESPONSE_KINDS, bits/s delivered to (or sent by) its application for every
other kind. VFs of the kinds in LEFT_ALONE (idle; a poll-mode guest, whose VF raises no
interrupts for its ITR to move) keep the rate they have.

The candidate rates are the scenario's own NIC's (sim/nic.py: a pro1000 reaches delays to
3.28 ms, 305 interrupts/s, the 82599 stops at 956/s).

The plan is what the oracle runs; it is not, alone, each VF's reference. Where VFs share a
port, a vCPU or the host's cores one plan cannot be every VF's best: a VF gains when its
neighbours give way (on a shared 1 GbE port a VF got 1.4 times its plan's bits under a fast
rate held host-wide, which starves the small-packet neighbours). So under `throughput` each
VF's reference in a phase is the best it reached there over the runs of the fixed plans known
in advance, each through the same noisy simulation as every policy: this plan, the frontier's
(frontier.py), every rate a peer runs (PEER_RATES) held host-wide, and per VF the frontier's
plan with that VF alone at this plan's rate (its neighbours give way to the cheapest rates that
keep them at the score floors: the trade a per-VF tuner can make; scores.reference_cells).
The oracle's own run then scores below 1 on a VF where another plan served that VF better.
A VF of any policy that still beats its reference by more than 2% (a trade beyond these, or a
change of rate within a phase) shows the bound missing there,
and the bench says so (scores.oracle_beaten). Under `efficiency` and `latency` the reference
stays the oracle's own run: its rates give up merit on purpose.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

from vftune.bench.groundtruth import Tally
from vftune.sim.engine import HostSim
from vftune.sim.layout import vf_pci
from vftune.sim.nic import I82599, NicProfile, nic_profile
from vftune.sim.scenarios import build, get_scenario
from vftune.sim.sweep import default_grid, hardware_rates, tunable_vfs
from vftune.sim.workload import HostSpec, Idle, RequestResponse

OBJECTIVES = ("throughput", "efficiency", "latency")
EFFICIENCY_MARGIN = 0.02  # "within a margin of the best": the tuner's noise margin
MAX_ROUNDS = 6
START_ITR = 20_000  # every VF starts the rounds here (ixgbevf's own starting class)
# Rates the peers run, always candidates, so a fixed peer cannot sit between grid points.
REFINE_POINTS = 40  # at most this many hardware rates between two grid neighbours (the 82599 has fewer)
TIE = 0.002  # rates this close to the best merit are one plateau at the mean load
PEER_RATES = (8_000, 12_000, 20_000, 100_000, 500_000, 125_000, 62_500, 31_250, 16_129, 15_625, 7_936)


NOISY_ROUNDS = 3
NOISY_SAMPLES = 160  # step starts per phase judged under the run's noise (evenly spread)
NOISY_REACH = 8  # stage 2 probes 1, 2, 4 ... 2**(NOISY_REACH - 1) grid steps either side
JOINT_SCALES = (0.25, 0.5, 0.7, 1.4, 2.0)  # stage 3: every busy VF's rate times one of these
PARETO_PASSES = 2
STATIONARY_S = 600.0  # 10 simulated minutes: a cold search, a steady state, for half the VFs a periodic restart
CYCLES = 2  # phased scenarios: every phase twice, so the first phase's return is a phase change too
RUN_STEP_S = 0.5  # the host's simulator step in the bench's runs of host-run policies (the oracle's)

# The kinds a VF's workload can be in a phase (vf_kind). A kind not named here is bulk-like:
# scored on the bits its application moves, under `latency` treated as bulk.
RESPONSE_KINDS = frozenset({"rr"})  # scored on response time
LEFT_ALONE = frozenset({"idle", "poll"})  # no interrupts worth a rate: the VF keeps what it has


def vf_kind(workload: object) -> str:
    """The VF's kind in a phase: idle, rr, bulk (a stream the guest receives), or the workload's
    own kind for any other (poll, tcp_tx, ...)."""
    if isinstance(workload, Idle):
        return "idle"
    if isinstance(workload, RequestResponse):
        return "rr"
    if getattr(workload, "poll", False):
        return "poll"
    kind = str(getattr(workload, "kind", "stream"))
    return "bulk" if kind == "stream" else kind


def vf_merit(rates: Any, kind: str) -> float:
    """What a VF is scored on, higher is better: the inverse of its mean response time (the
    RESPONSE_KINDS; bits/s where the model has none), else the bits/s its application moves."""
    latency = getattr(rates, "latency_mean_s", None)
    progress = float(getattr(rates, "app_progress", 1.0))  # the guest's own application's share (app_cpu)
    if kind in RESPONSE_KINDS and latency:
        return progress / float(latency)
    return float(rates.delivered_bps) * progress


def tally_merit(tally: Tally, kind: str) -> float:
    """vf_merit over a stretch of a run: transactions over the summed response time (the
    RESPONSE_KINDS), else the bits delivered over the seconds (scores.Cell.merit, the same)."""
    if not tally.seconds:
        return 0.0
    progress = 1.0 - tally.app_lost_s / tally.seconds  # the guest's own application's share (app_cpu)
    if kind in RESPONSE_KINDS and tally.transactions > 0 and tally.latency_s > 0:
        return tally.transactions / tally.latency_s * progress
    return tally.delivered_bits / tally.seconds * progress


def choose(merits: dict[int, float], kind: str, objective: str) -> int:
    """The rate an objective picks from a VF's sweep (rate -> merit)."""
    top = max(merits.values())
    if objective == "efficiency" or (objective == "latency" and kind not in RESPONSE_KINDS):
        return min(itr for itr, m in merits.items() if m >= top * (1.0 - EFFICIENCY_MARGIN))
    plateau = sorted(itr for itr, m in merits.items() if m >= top * (1.0 - TIE))
    return plateau[(len(plateau) - 1) // 2]


@dataclass(frozen=True)
class OracleVf:
    itr: int
    kind: str  # vf_kind in this phase: bulk, rr, idle, poll ...
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
    noisy_rounds: int = 0  # rounds of stage 2 (0: the run spent no time in the phase)
    moved: int = 0  # VFs whose rate stage 2 changed from the steady state's

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
    duration_s: float = 0.0  # the run whose noise stage 2 judged rates under

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


def candidates(nic: NicProfile = I82599) -> list[int]:
    """The rates the oracle sweeps on a host with this NIC: its grid over the NIC's own range,
    and every rate a peer runs as that NIC delivers it."""
    return sorted(set(default_grid(nic=nic)) | {nic.quantize(r) for r in PEER_RATES})


def _refine(grid: list[int], best: int, nic: NicProfile) -> list[int]:
    """Hardware rates between the grid neighbours of `best`: every one, or REFINE_POINTS evenly
    spread where the NIC's steps are finer (pro1000's 1.024 us at milliseconds of delay: a
    hundred steps within 4%, none of them telling apart from its neighbour)."""
    i = grid.index(best)
    low, high = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    rates = [r for r in hardware_rates(nic) if low <= r <= high]
    stride = max(1, math.ceil(len(rates) / REFINE_POINTS))
    return sorted(set(rates[::stride]) | {best})


def _phase_fixed_point(sim: HostSim, t: float, kinds: list[str], objective: str,
                       grid: list[int]) -> tuple[list[int], int, bool]:
    spec = sim.spec
    nic = nic_profile(spec.nic)
    tunable = [i for i in tunable_vfs(spec) if kinds[i] not in LEFT_ALONE]
    itrs = [nic.quantize(START_ITR) if i in tunable_vfs(spec) else sim.vfs[i].itr for i in range(len(spec.vfs))]
    for rounds in range(1, MAX_ROUNDS + 1):
        changed = False
        for i in tunable:
            # Neighbours held: the host's irq work is theirs, so one evaluation per rate.
            kernel = sim.steady_state(t, itrs, iterations=3).host_kernel_cpu

            def merit(itr: int, i: int = i, kernel: float = kernel) -> float:
                trial = itrs[:i] + [itr] + itrs[i + 1:]
                return vf_merit(sim.rates(t, trial, kernel).vfs[i], kinds[i])

            merits = {itr: merit(itr) for itr in grid}
            for itr in _refine(grid, choose(merits, kinds[i], objective), nic):
                if itr not in merits:
                    merits[itr] = merit(itr)
            best = choose(merits, kinds[i], objective)
            if best != itrs[i]:
                itrs[i], changed = best, True
        if not changed:
            return itrs, rounds, True
    return itrs, MAX_ROUNDS, False


def run_duration(spec: HostSpec) -> float:
    """How long the bench runs a scenario by default: its file's duration_s, else two cycles,
    else STATIONARY_S past the last phase's start."""
    if spec.duration_s:
        return float(spec.duration_s)
    if spec.cycle_s:
        return CYCLES * spec.cycle_s
    return max(p.start_s for p in spec.phases) + STATIONARY_S


def run_samples(spec: HostSpec, duration: float) -> dict[int, list[tuple[float, float]]]:
    """Per phase, the run's simulator steps in it as (step start, weight in seconds): every
    step of the run, or NOISY_SAMPLES of them evenly spread, weighted to the phase's time."""
    steps: dict[int, list[float]] = {}
    n = int(round(duration / RUN_STEP_S))
    for k in range(n):
        t = k * RUN_STEP_S
        steps.setdefault(spec.phase_index(t), []).append(t)
    out = {}
    for phase, ts in steps.items():
        stride = max(1, math.ceil(len(ts) / NOISY_SAMPLES))
        picked = ts[stride // 2::stride] or ts[:1]
        out[phase] = [(t, RUN_STEP_S * len(ts) / len(picked)) for t in picked]
    return out


class _NoisyPhase:
    """One phase judged under the run's noise: each VF's merit over the phase's steps of the
    run, its neighbours held, the host's irq work theirs (one evaluation per rate and step)."""

    def __init__(self, sim: HostSim, samples: list[tuple[float, float]], kinds: list[str]) -> None:
        self.sim, self.samples, self.kinds = sim, samples, kinds
        self.nic = nic_profile(sim.spec.nic)
        self._kernels: dict[tuple[int, ...], list[float]] = {}

    def kernels(self, itrs: list[int]) -> list[float]:
        key = tuple(itrs)
        if key not in self._kernels:
            self._kernels[key] = [self.sim.steady_state(t, itrs, iterations=3).host_kernel_cpu
                                  for t, _ in self.samples]
        return self._kernels[key]

    def merits(self, i: int, itrs: list[int], rates: list[int]) -> dict[int, float]:
        """VF i's merit over the phase's steps at each of `rates` (neighbours at `itrs`)."""
        tallies = {r: Tally() for r in rates}
        trial = list(itrs)
        for (t, weight), kernel in zip(self.samples, self.kernels(itrs)):
            for r in rates:  # the neighbours' rates stay in the simulator's per-second memo
                trial[i] = r
                tallies[r].add(self.sim.rates(t, trial, kernel).vfs[i], weight)
        return {r: tally_merit(tally, self.kinds[i]) for r, tally in tallies.items()}


def _noisy_best(phase: _NoisyPhase, i: int, itrs: list[int], objective: str, grid: list[int]) -> int:
    """VF i's best response under the run's noise, from the steady state's choice outward."""
    kind = phase.kinds[i]
    start = min(grid, key=lambda r: abs(r - itrs[i]))
    at = grid.index(start)
    probes = {itrs[i], *(phase.nic.quantize(r) for r in PEER_RATES)}
    for k in range(NOISY_REACH):
        for j in (at - 2**k, at + 2**k):
            if 0 <= j < len(grid):
                probes.add(grid[j])
    merits = phase.merits(i, itrs, sorted(probes))
    best = choose(merits, kind, objective)
    near = min(grid, key=lambda r: abs(r - best))
    j = grid.index(near)
    local = set(grid[max(0, j - 2):j + 3]) | set(_refine(grid, near, phase.nic))
    merits.update(phase.merits(i, itrs, sorted(local - set(merits))))
    best = choose(merits, kind, objective)
    # The plateau's middle depends on which rates were probed, and they follow the current rate:
    # a VF moves only for a gain beyond TIE, so the rounds reach a fixed point.
    if merits[itrs[i]] >= merits[best] * (1.0 - TIE) and (objective == "throughput" or kind in RESPONSE_KINDS):
        return itrs[i]
    return best


def _joint(phase: _NoisyPhase, itrs: list[int], busy: list[int]) -> dict[int, float]:
    """Every busy VF's merit over the phase's steps with the whole host at `itrs`."""
    tallies = {i: Tally() for i in busy}
    for t, weight in phase.samples:
        rates = phase.sim.steady_state(t, itrs, iterations=3)
        for i in busy:
            tallies[i].add(rates.vfs[i], weight)
    return {i: tally_merit(tallies[i], phase.kinds[i]) for i in busy}


def _pareto(phase: _NoisyPhase, itrs: list[int], busy: list[int]) -> list[int]:
    """A fixed point is no bound where the VFs share a host's cores or a vCPU: each VF's best
    alone is a faster rate, and all of them faster leaves every VF with less (fixed-8000 on 44
    VFs beat it by 2.6%). Plans that move every busy VF together (all at one rate a peer runs,
    or all rates scaled by JOINT_SCALES) replace it where no VF loses more than TIE and the VFs
    gain on average by more than TIE; the best such, for PARETO_PASSES passes."""
    base = _joint(phase, itrs, busy)
    for _ in range(PARETO_PASSES):
        plans = [[phase.nic.quantize(r) if i in busy else itr for i, itr in enumerate(itrs)] for r in PEER_RATES]
        plans += [[phase.nic.quantize(itr * f) if i in busy else itr for i, itr in enumerate(itrs)] for f in JOINT_SCALES]
        best: tuple[float, list[int], dict[int, float]] | None = None
        for plan in plans:
            if plan == itrs:
                continue
            merits = _joint(phase, plan, busy)
            if any(not base[i] > 0 or merits[i] < base[i] * (1.0 - TIE) for i in busy):
                continue
            gain = sum(math.log(merits[i] / base[i]) for i in busy) / len(busy)
            if gain > TIE and (best is None or gain > best[0]):
                best = (gain, plan, merits)
        if best is None:
            break
        itrs, base = best[1], best[2]
    return itrs


def _noisy_fixed_point(phase: _NoisyPhase, itrs: list[int], tunable: list[int], objective: str,
                       grid: list[int]) -> tuple[list[int], int, bool]:
    itrs = list(itrs)
    for rounds in range(1, NOISY_ROUNDS + 1):
        changed = False
        for i in tunable:
            best = _noisy_best(phase, i, itrs, objective, grid)
            if best != itrs[i]:
                itrs[i], changed = best, True
        if not changed:
            return itrs, rounds, True
    return itrs, NOISY_ROUNDS, False


@functools.lru_cache(maxsize=64)
def oracle_plan(scenario: str, seed: int = 0, objective: str = "throughput",
                duration: float | None = None) -> OraclePlan:
    """Per tunable VF and phase, the best fixed ITR under `objective`, judged under the noise of
    a run of `duration` simulated seconds on this seed (default: the bench's run length);
    cached per process."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}")
    get_scenario(scenario)
    spec = build(scenario, seed)
    duration = run_duration(spec) if duration is None else duration
    sim = HostSim(spec, seed, noise=False)
    noisy = HostSim(spec, seed, noise=True)
    grid = candidates(nic_profile(spec.nic))
    samples = run_samples(spec, duration)
    phases = []
    for index, phase in enumerate(spec.phases):
        start, end = spec.phase_bounds(index)
        kinds = [vf_kind(spec.workload(vf, index)) for vf in spec.vfs]
        itrs, rounds, converged = _phase_fixed_point(sim, start, kinds, objective, grid)
        steady = list(itrs)
        noisy_rounds = 0
        tunable = [i for i in tunable_vfs(spec) if kinds[i] not in LEFT_ALONE]
        if index in samples and tunable:
            judge = _NoisyPhase(noisy, samples[index], kinds)
            itrs, noisy_rounds, settled = _noisy_fixed_point(judge, itrs, tunable, objective, grid)
            converged = converged and settled
            if objective == "throughput" and len(tunable) > 1:
                itrs = _pareto(judge, itrs, tunable)
        rates = sim.steady_state(start, itrs)
        vfs = {}
        for i in tunable_vfs(spec):
            r = rates.vfs[i]
            vfs[vf_pci(spec.vfs[i].pf, spec.vfs[i].index)] = OracleVf(
                itrs[i], kinds[i], vf_merit(r, kinds[i]), float(r.delivered_bps))
        phases.append(OraclePhase(start, end, phase.label, vfs, rounds, converged, noisy_rounds,
                                  sum(a != b for a, b in zip(itrs, steady))))
    return OraclePlan(scenario, seed, objective, spec.cycle_s, tuple(phases), duration)


def held_plan(plan: OraclePlan, itr: int) -> OraclePlan:
    """The plan with every tunable VF at `itr` in every phase: one rate held host-wide from t = 0
    (the host delivers it as its NIC's steps allow)."""
    phases = tuple(dataclasses.replace(p, vfs={pci: dataclasses.replace(v, itr=itr) for pci, v in p.vfs.items()})
                   for p in plan.phases)
    return dataclasses.replace(plan, phases=phases)


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
