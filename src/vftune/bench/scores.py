"""What the benchmark measures per (scenario, policy, seed), from the simulator's ground truth.

Scores (the simulator's own rates, not what the agent estimated; groundtruth.Tally):
- vf_geomean, vf_min: each tunable VF's score is its merit over its reference's (reference_cells:
  under throughput its best over the runs of the fixed plans known in advance, the oracle's among them)
  (bulk: bits/s delivered to its application, not the counters' frames, which at high rates
  carry extra ACKs and, for UDP, packets the application never gets; request/response: the oracle's mean response time over
  its own), per phase of the scenario, combined over the phases it is busy in by a
  time-weighted geometric mean; vf_geomean is the geometric mean over the VFs, vf_min the
  lowest VF (a starved small VF shows here, while the port's sum hides it);
- throughput_ratio: bits delivered to all tunable VFs' applications over the run / the oracle's
  (throughput_gbps: the same, in Gb/s);
- cpu: network CPU as a share of the host's cores (guests' receive paths + host irq/softirq),
  the sweep's definition; cpu_per_gbps_vs_default: (cpu / Gb/s) over the default's in the
  same scenario and seed (below 1: cheaper per bit than the guests' own adaptive ITR);
  vf_cpu_per_bit_vs_default (reporting only, no target): the geometric mean over VFs of each
  VF's own CPU per delivered bit (its guest's receive path and the host's irq work for its
  interrupts) over the default's for the same VF. cpu_per_gbps_vs_default counts all VFs
  together, so serving a request/response VF better (more of its costly bits) raises it even
  where no VF's own CPU per bit rose; this figure does not move with that mix;
  cpu_s_per_gbit_by_kind (each run, JSON only): the VFs' own CPU seconds per Gb delivered over
  their bulk phases and their request/response phases apart;
- latency_us_mean, latency_us_p99: request/response VFs only: the transaction-weighted mean
  response time, and the worst VF's p99 (each step's p99, transaction-weighted);
- converge_s / converge_probes (cold) and reconverge_s / reconverge_probes (after each phase
  change): per VF, the time and the number of changes of the host's setting (the ITR request
  the VF fetched, 0 = its adaptive ITR, and the bounds on that) until the setting then stays put
  for HOLD_S, or for half the phase after a change in a phase shorter than two holds; the
  worst VF counts. None = never settled;
- changes_per_min: changes of the host's setting per VF-minute after settling (steady state),
  restarts included; a policy that never settles counts all its changes;
- itr_moves_per_min: changes of the rate the VF delivers per VF-minute over the whole run,
  the guest's adaptive ITR's own moves included (a fixed rate makes none once in force).
A VF without traffic in a phase (< 1 Mbit/s: an idle guest) is left out of that phase's
convergence and change figures, and of the scores.
For vftune the tuner's own records add search_probes_cold (measurements of each VF's first
search, the incumbent's and repeats included; the worst VF) and search_probes_phase (every
measurement from a phase change until the convergence the VF then held), restarts by cause,
and unasked_changes (decisions outside any search; none expected).

Over several seeds (aggregate) each figure is the mean over seeds with a 95% interval
(Student's t over the seeds' values).

A setting is what the host wrote and the VF fetched (SimHost.vf_setting): a guest's adaptive
ITR or DIM moves the delivered rate (SimHost.vf_itr) within one setting, so the policies run in
the guest have no setting changes, and their moves show in itr_moves_per_min only.
"""


from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from vftune.bench.groundtruth import Tally
from vftune.bench.oracle import EFFICIENCY_MARGIN, PEER_RATES, OraclePlan, geomean
from vftune.bench.random_hosts import FAMILIES, family
from vftune.bench.registry import FIXED, FRONTIER, ORACLE
from vftune.control.causes import Cause
from vftune.control.policy import VfPolicy
from vftune.control.tuner import SearchTuner
from vftune.model import ItrDecision, VfSample

IDLE_BPS = 1e6  # below this average a VF is idle in a phase
HOLD_S = 60.0  # an ITR that stays put this long has settled


class Recording(VfPolicy):
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
        search = self.inner.search if isinstance(self.inner, SearchTuner) else None
        if search is not None:
            seen = 0 if search is not self._search else self._probes
            self.told.extend([sample.t] * max(0, search.probes - seen))
            self._search, self._probes = search, search.probes
        return decision

    def state(self) -> dict[str, object]:
        return self.inner.state()

    def at_rest(self) -> bool:
        return self.inner.at_rest()


@dataclass
class Settle:
    at: float | None  # seconds from the segment start; None = never settled
    changes: int  # ITR changes up to settling (all of the segment's when never)
    steady_s: float
    steady_changes: int


def settle(changes: list[float], start: float, end: float, hold_s: float = HOLD_S) -> Settle:
    """When a VF's setting settled in [start, end): the last change before it held for hold_s.

    A phase shorter than two holds cannot show a quiet hold_s after a search, so there half the
    phase is the hold after a change. The quiet stretch before the phase's first change is not
    (a policy that has not acted yet has not settled) unless it lasts a full hold or the phase.
    Changes after the first hold (a periodic restart, a neighbour's search moving this VF's
    best) are the steady state's, not a failure to settle.
    """
    inside = [t for t in changes if start <= t < end]
    marks = [start] + inside
    need = min(hold_s, (end - start) / 2)
    for i, t in enumerate(marks):
        following = marks[i + 1] if i + 1 < len(marks) else end
        held = following - t
        if (held >= need and i > 0) or held >= min(hold_s, end - start):
            later = len(inside) - i
            return Settle(t - start, i, end - t, later)
    return Settle(None, len(inside), end - start, len(inside))


def phase_segments(plan: OraclePlan, duration: float) -> list[tuple[float, float]]:
    """[start, end) of each phase occurrence in the run (one segment when nothing changes)."""
    starts = sorted({p.start_s for p in plan.phases})
    if not plan.cycle_s:
        # Without a cycle each phase occurs once and the last one holds to the end.
        bounds = [0.0] + [s for s in starts if 0.0 < s < duration] + [duration]
        return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
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
class Cell:
    """One VF over every occurrence of one phase in a run."""

    kind: str  # bulk, rr or idle (the scenario's workload in that phase)
    seconds: float = 0.0
    bits: float = 0.0
    delivered_bits: float = 0.0
    transactions: float = 0.0
    latency_s: float = 0.0
    p99_s: float = 0.0
    cpu_s: float = 0.0
    app_lost_s: float = 0.0  # seconds x the share of its wanted CPU the guest's application did not get

    def add(self, t: Tally) -> None:
        self.seconds += t.seconds
        self.app_lost_s += t.app_lost_s
        self.bits += t.bits
        self.delivered_bits += t.delivered_bits
        self.transactions += t.transactions
        self.latency_s += t.latency_s
        self.p99_s += t.p99_s
        self.cpu_s += t.cpu_s

    @property
    def merit(self) -> float:
        """Higher is better: delivered bits/s (bulk), or 1 / mean response time (request/response),
        times the share of its wanted CPU the guest's own application got (app_cpu)."""
        if not self.seconds:
            return 0.0
        progress = 1.0 - self.app_lost_s / self.seconds
        if self.kind == "rr" and self.transactions > 0 and self.latency_s > 0:
            return self.transactions / self.latency_s * progress
        return self.delivered_bits / self.seconds * progress


MIN_RATIO = 1e-6  # a VF that got nothing scores this, not log(0)
ORACLE_SLACK = 0.01  # a policy above the oracle by more than this (run noise) shows it is wrong
# The oracle is a per-VF bound: no VF of any policy scores above its oracle by more than this.
ORACLE_VF_SLACK = 0.02
SCORES = ("throughput_ratio", "vf_geomean", "vf_min", "cpu", "cpu_per_gbps_vs_default", "vf_cpu_per_bit_vs_default",
          "latency_us_mean", "latency_us_p99", "converge_s", "reconverge_s", "changes_per_min", "itr_moves_per_min",
          "interrupts_per_s", "throughput_gbps")


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
    itr_moves_per_min: float = 0.0
    cells: dict[tuple[str, int], Cell] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    oracle_converged: bool = True
    throughput_ratio: float = math.nan
    vf_geomean: float = math.nan
    vf_min: float = math.nan
    vf_scores: dict[str, float] = field(default_factory=dict)
    cpu_per_gbps_vs_default: float | None = None
    vf_cpu_per_bit_vs_default: float | None = None
    run_s: float = 0.0  # CPU seconds the run took (for the bench's own time budget)

    @property
    def latency_us_mean(self) -> float | None:
        rr = [c for c in self.cells.values() if c.kind == "rr" and c.transactions > 0]
        if not rr:
            return None
        return sum(c.latency_s for c in rr) / sum(c.transactions for c in rr) * 1e6

    @property
    def latency_us_p99(self) -> float | None:
        per_vf: dict[str, list[Cell]] = {}
        for (pci, _), c in self.cells.items():
            if c.kind == "rr" and c.transactions > 0:
                per_vf.setdefault(pci, []).append(c)
        if not per_vf:
            return None
        return max(sum(c.p99_s for c in cs) / sum(c.transactions for c in cs) for cs in per_vf.values()) * 1e6

    @property
    def cpu_s_per_gbit_by_kind(self) -> dict[str, float]:
        """The VFs' own network CPU seconds per Gb delivered, over their bulk phases and over
        their request/response phases apart: where a policy spends, which the host's mix hides."""
        sums: dict[str, list[float]] = {}
        for c in self.cells.values():
            if c.kind != "idle":
                total = sums.setdefault(c.kind, [0.0, 0.0])
                total[0] += c.cpu_s
                total[1] += c.delivered_bits
        return {kind: cpu / bits * 1e9 for kind, (cpu, bits) in sums.items() if bits > 0}

    def as_dict(self) -> dict[str, Any]:
        d = {
            "scenario": self.scenario,
            "family": family(self.scenario),
            "policy": self.policy,
            "seed": self.seed,
            "throughput_ratio": _round(self.throughput_ratio, 4),
            "vf_geomean": _round(self.vf_geomean, 4),
            "vf_min": _round(self.vf_min, 4),
            "cpu": _round(self.cpu, 4),
            "cpu_per_gbps_vs_default": _round(self.cpu_per_gbps_vs_default, 4),
            "vf_cpu_per_bit_vs_default": _round(self.vf_cpu_per_bit_vs_default, 4),
            "latency_us_mean": _round(self.latency_us_mean, 2),
            "latency_us_p99": _round(self.latency_us_p99, 2),
            "interrupts_per_s": _round(self.interrupts_per_s, 0),
            "converge_s": _round(self.converge_s, 0),
            "converge_probes": self.converge_probes,
            "reconverge_s": _round(self.reconverge_s, 0),
            "reconverge_probes": self.reconverge_probes,
            "changes_per_min": _round(self.changes_per_min, 3),
            "itr_moves_per_min": _round(self.itr_moves_per_min, 3),
            "throughput_gbps": _round(self.throughput_bps / 1e9, 4),
            "duration_s": self.duration_s,
            "run_s": round(self.run_s, 2),
            "vfs": {pci: _round(v, 4) for pci, v in self.vf_scores.items()},
            "cpu_s_per_gbit_by_kind": {k: _round(v, 5) for k, v in self.cpu_s_per_gbit_by_kind.items()},
        }
        d.update(self.extra)
        return d


def _round(x: float | None, digits: int) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(x, digits) if digits else float(round(x))


def vf_scores(cells: dict[tuple[str, int], Cell], reference: dict[tuple[str, int], Cell]) -> dict[str, float]:
    """Each VF's merit over the reference's, per phase, time-weighted geometric mean over phases."""
    logs: dict[str, list[tuple[float, float]]] = {}
    for key, ref in reference.items():
        cell = cells.get(key)
        if ref.kind == "idle" or cell is None or not ref.merit > 0 or not cell.seconds > 0:
            continue
        ratio = max(MIN_RATIO, cell.merit / ref.merit)
        logs.setdefault(key[0], []).append((cell.seconds, math.log(ratio)))
    return {pci: math.exp(sum(w * x for w, x in items) / sum(w for w, _ in items))
            for pci, items in logs.items() if sum(w for w, _ in items) > 0}


# The fixed plans known in advance whose runs make each VF's reference under `throughput`
# (oracle.py says why): the oracle's own, the frontier's, every rate a peer runs held host-wide
# (the fixed policies', and the others' as `held-RATE` runs), and per VF the frontier's plan
# with that VF at its oracle rate (GIVE_WAY: one unreported result carrying each VF's cells
# from its own run). The bench always runs them and reports only the registered policies.
BOUND_PLANS: tuple[str, ...] = (ORACLE, FRONTIER, *FIXED)
HELD = "held-"
GIVE_WAY = "give-way"


def held_policies() -> list[str]:
    """The reference runs besides the registered policies: the rates peers run that no fixed
    policy holds already, and the give-way plans."""
    return [f"{HELD}{r}" for r in dict.fromkeys(PEER_RATES) if r not in FIXED.values()] + [GIVE_WAY]


def held_rate(policy: str) -> int | None:
    """The rate a `held-RATE` reference run holds host-wide (None for any other policy)."""
    name, _, rate = policy.partition(HELD)
    return int(rate) if not name and rate.isdigit() else None


def reference_cells(by: dict[str, PairResult], objective: str = "throughput") -> dict[tuple[str, int], Cell]:
    """Each VF's reference per phase: under `throughput` its best figures (merit) over the runs
    of BOUND_PLANS present, over the same seconds of the same noisy run; under the other
    objectives the oracle's own run (its rates give up merit on purpose). Which plan each
    reference came from is counted in the oracle's `reference_from`."""
    oracle = by[ORACLE]
    plans = [r for r in by.values() if r.policy in BOUND_PLANS or r.policy in held_policies()] \
        if objective == "throughput" else [oracle]
    out: dict[tuple[str, int], Cell] = {}
    origin: dict[str, int] = {}
    for key, cell in oracle.cells.items():
        best, name = cell, ORACLE
        for r in plans:
            other = r.cells.get(key)
            if other is not None and other.seconds > 0 and other.merit > best.merit:
                best, name = other, r.policy
        out[key] = best
        if cell.kind != "idle":
            origin[name] = origin.get(name, 0) + 1
    oracle.extra["reference_from"] = origin
    return out


def score(results: list[PairResult], objective: str = "throughput") -> None:
    """Fill in every result's ratios against the oracle and the default of its scenario and seed
    (per-VF scores against reference_cells)."""
    groups: dict[tuple[str, int], dict[str, PairResult]] = {}
    for r in results:
        groups.setdefault((r.scenario, r.seed), {})[r.policy] = r
    for by in groups.values():
        oracle, default = by.get(ORACLE), by.get("default")
        reference = reference_cells(by, objective) if oracle is not None else {}
        for r in by.values():
            if oracle is not None:
                r.throughput_ratio = r.throughput_bps / oracle.throughput_bps if oracle.throughput_bps > 0 else math.nan
                r.vf_scores = vf_scores(r.cells, reference)
                values = list(r.vf_scores.values())
                r.vf_geomean = geomean(values)
                r.vf_min = min(values) if values else math.nan
            # A host that carried next to nothing has no CPU per Gb worth comparing (idle
            # chatter's bits over the agent's own sampling cost).
            if default is not None and r.throughput_bps >= IDLE_BPS and default.throughput_bps >= IDLE_BPS \
                    and default.cpu > 0:
                r.cpu_per_gbps_vs_default = (r.cpu / r.throughput_bps) / (default.cpu / default.throughput_bps)
            if default is not None:
                r.vf_cpu_per_bit_vs_default = vf_cpu_per_bit_ratio(r.cells, default.cells)


def _cpu_per_bit(cells: dict[tuple[str, int], Cell]) -> dict[str, float]:
    """Each VF's network CPU seconds per delivered bit over the whole run (idle VFs left out)."""
    sums: dict[str, list[float]] = {}
    for (pci, _), c in cells.items():
        total = sums.setdefault(pci, [0.0, 0.0, 0.0])
        total[0] += c.cpu_s
        total[1] += c.delivered_bits
        total[2] += c.seconds
    return {pci: cpu / bits for pci, (cpu, bits, seconds) in sums.items()
            if cpu > 0 and seconds > 0 and bits / seconds >= IDLE_BPS}


def vf_cpu_per_bit_ratio(cells: dict[tuple[str, int], Cell], default: dict[tuple[str, int], Cell]) -> float | None:
    """Geometric mean over VFs of each VF's CPU per delivered bit over the default's (None: no VF
    busy under both)."""
    ours, theirs = _cpu_per_bit(cells), _cpu_per_bit(default)
    ratios = [ours[pci] / theirs[pci] for pci in ours if pci in theirs]
    return geomean(ratios) if ratios else None


T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def mean_interval(values: list[float]) -> tuple[float, float | None]:
    """Mean and the half-width of its 95% interval (Student's t; None for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, T_975.get(n - 1, 1.96) * sd / math.sqrt(n)


def aggregate(results: list[PairResult]) -> list[dict[str, Any]]:
    """One row per (scenario, policy): each score's mean over seeds and its 95% interval.

    A figure that is None in any seed (never settled, no request/response VF) is None."""
    groups: dict[tuple[str, str], list[PairResult]] = {}
    for r in results:
        groups.setdefault((r.scenario, r.policy), []).append(r)
    rows = []
    for (scenario, policy), rs in groups.items():
        dicts = [r.as_dict() for r in rs]
        row: dict[str, Any] = {"scenario": scenario, "family": family(scenario), "policy": policy,
                               "seeds": [r.seed for r in rs]}
        interval: dict[str, list[float] | None] = {}
        for name in SCORES:
            values = [d[name] for d in dicts]
            if any(v is None for v in values):
                row[name] = None
                continue
            mean, half = mean_interval([float(v) for v in values])
            row[name] = round(mean, 4)
            interval[name] = None if half is None else [round(mean - half, 4), round(mean + half, 4)]
        if policy.startswith("vftune"):
            for key in ("search_probes_cold", "search_probes_phase", "unasked_changes", "restarts_load"):
                values = [d.get(key) for d in dicts if d.get(key) is not None]
                row[key] = max(values) if values else None
        row["ci95"] = interval
        rows.append(row)
    return rows


def families(rows: list[dict[str, Any]], beaten: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The headline: per family of scenarios (built-in, random, file) and policy, over the
    family's aggregated rows: the mean per-VF geomean, the lowest per-VF min (and where), the
    mean CPU per Gb against the default and against the frontier of the same scenario, and how
    many VFs scored above their oracle by more than the slack (`beaten`, oracle_beaten's)."""
    frontier = {r["scenario"]: r for r in rows if r["policy"] == FRONTIER}
    out = []
    for name in FAMILIES:
        mine = [r for r in rows if r["family"] == name]
        for policy in dict.fromkeys(r["policy"] for r in mine):
            rs = [r for r in mine if r["policy"] == policy]
            gm = [r["vf_geomean"] for r in rs if r["vf_geomean"] is not None]
            lows = [r for r in rs if r["vf_min"] is not None]
            low = min(lows, key=lambda r: r["vf_min"]) if lows else None
            cpu = [r["cpu_per_gbps_vs_default"] for r in rs if r["cpu_per_gbps_vs_default"] is not None]
            vs_frontier = [r["cpu_per_gbps_vs_default"] / f["cpu_per_gbps_vs_default"] for r in rs
                           if (f := frontier.get(r["scenario"])) is not None and r["cpu_per_gbps_vs_default"]
                           is not None and f["cpu_per_gbps_vs_default"]]
            out.append({
                "family": name, "policy": policy, "scenarios": len(rs),
                "vf_geomean": round(sum(gm) / len(gm), 4) if gm else None,
                "vf_min": low["vf_min"] if low else None, "vf_min_scenario": low["scenario"] if low else None,
                "cpu_per_gbps_vs_default": round(sum(cpu) / len(cpu), 4) if cpu else None,
                "cpu_per_gbps_vs_frontier": round(sum(vs_frontier) / len(vs_frontier), 4) if vs_frontier else None,
                "vfs_above_oracle": sum(1 for b in beaten or () if b["family"] == name and b["policy"] == policy),
            })
    return out


def oracle_warnings(results: list[PairResult], objective: str = "throughput") -> list[str]:
    """Where a policy scored above the oracle by more than the noise, or the oracle's rounds did
    not reach a fixed point: either means the reference is wrong, and the bench says so. Under
    `efficiency` (and `latency`, for bulk VFs) the oracle takes the cheapest rate within
    EFFICIENCY_MARGIN of the best on purpose, so only a policy beyond that shows it wrong."""
    slack = ORACLE_SLACK + (EFFICIENCY_MARGIN if objective != "throughput" else 0.0)
    out = []
    for r in results:
        if r.policy == ORACLE:
            if not r.oracle_converged:
                out.append(f"{r.scenario} seed {r.seed}: the oracle's best responses did not reach a fixed point")
            continue
        above = [f"{name} {getattr(r, name):.4f}" for name in ("vf_geomean", "throughput_ratio")
                 if math.isfinite(getattr(r, name)) and getattr(r, name) > 1.0 + slack]
        if above:
            out.append(f"{r.scenario} seed {r.seed}: {r.policy} {' and '.join(above)} > 1 + {slack:g}: "
                       "the oracle is not an upper bound here")
    return list(dict.fromkeys(out))


def vf_slack(objective: str) -> float:
    """How far above its oracle a VF may score before the oracle is no bound for it: the run
    noise, and under `efficiency` (and `latency`, for bulk VFs) the margin the oracle gives up on
    purpose."""
    return ORACLE_VF_SLACK + (EFFICIENCY_MARGIN if objective != "throughput" else 0.0)


def oracle_beaten(results: list[PairResult], objective: str = "throughput") -> dict[str, Any]:
    """The oracle as a per-VF bound: the highest score any VF of any other policy got against it
    (where), and every VF above it by more than vf_slack (scenario, seed, policy, VF, score)."""
    slack = vf_slack(objective)
    worst: tuple[float, str, int, str, str] | None = None
    beaten: list[dict[str, Any]] = []
    for r in results:
        if r.policy == ORACLE:
            continue
        for pci, value in r.vf_scores.items():
            if worst is None or value > worst[0]:
                worst = (value, r.scenario, r.seed, r.policy, pci)
            if value > 1.0 + slack:
                # The run's per-VF geomean says whether the VF gained what its neighbours lost
                # (below 1: a trade between VFs that one plan cannot be the best of for each) or
                # the oracle's plan is beaten outright.
                beaten.append({"scenario": r.scenario, "family": family(r.scenario), "seed": r.seed,
                               "policy": r.policy, "vf": pci, "score": round(value, 4),
                               "run_vf_geomean": _round(r.vf_geomean, 4)})
    beaten.sort(key=lambda b: -b["score"])
    top = None if worst is None else {"score": round(worst[0], 4), "scenario": worst[1], "seed": worst[2],
                                      "policy": worst[3], "vf": worst[4]}
    return {"slack": slack, "worst": top, "beaten": beaten}


# From a decision to the VF running it: the patched VF's slow fetch (2 s) and a tick.
SETTING_LAG_S = 2.5


def tuner_figures(made: dict[str, Recording], segments: list[tuple[float, float]],
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
            # The converged setting is in force from its fetch by the VF, up to SETTING_LAG_S
            # after the decision; a search that converged on the rate in force needs no fetch.
            settled_from = start if i == 0 else start + st.at - SETTING_LAG_S
            done = next((c.t for c in tuner.convergences if settled_from <= c.t < end), None)
            if done is None:
                continue
            probes = sum(1 for t in rec.told if start <= t <= done)
            (cold_probes if i == 0 else phase_probes).append(probes)
        for cause, n in tuner.restarts.items():
            restarts[cause] = restarts.get(cause, 0) + n
        restarts["recall"] = restarts.get("recall", 0) + tuner.recalls
        unasked += unasked_changes(rec)
    return {
        "search_probes_cold": max(cold_probes) if cold_probes else None,
        "search_probes_phase": max(phase_probes) if phase_probes else None,
        "restarts_periodic": restarts.get("periodic", 0),
        # Every change a load change asked for: searches (a held rate that came to livelock the
        # guest's included), recalls of a remembered class.
        "restarts_load": sum(restarts.get(k, 0) for k in ("load", "starved", "recall")),
        "restarts_in_search": restarts.get("in_search", 0),
        "unasked_changes": unasked,
    }


def unasked_changes(rec: Recording) -> int:
    """Decisions vftune took with no cause of the tuner's (should be none)."""
    return sum(1 for _, d in rec.decisions if Cause.of_reason(d.reason) is None or d.cause is None)
