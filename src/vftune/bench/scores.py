"""What the benchmark measures per (scenario, policy) pair, from the simulator's ground truth.

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
from dataclasses import dataclass, field
from typing import Any

from vftune.agent.policy import VfPolicy
from vftune.agent.tuner import SearchTuner
from vftune.bench.oracle import OraclePlan
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


def phase_segments(plan: OraclePlan, duration: float) -> list[tuple[float, float]]:
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
            settled_from = start if i == 0 else start + st.at - 1e-6
            done = next((c.t for c in tuner.convergences if settled_from <= c.t < end), None)
            if done is None:
                continue
            probes = sum(1 for t in rec.told if start <= t <= done)
            (cold_probes if i == 0 else phase_probes).append(probes)
        for cause, n in tuner.restarts.items():
            restarts[cause] = restarts.get(cause, 0) + n
        unasked += unasked_changes(rec)
    return {
        "search_probes_cold": max(cold_probes) if cold_probes else None,
        "search_probes_phase": max(phase_probes) if phase_probes else None,
        "restarts_periodic": restarts.get("periodic", 0),
        "restarts_load": restarts.get("load", 0),
        "restarts_in_search": restarts.get("in_search", 0),
        "unasked_changes": unasked,
    }


def unasked_changes(rec: Recording) -> int:
    """Decisions vftune took that belong to no search and no restart (should be none)."""
    return sum(1 for _, d in rec.decisions
               if not d.reason.startswith(("start:", "restart:", "probe", "converged", "abort"))
               and "probe not applied" not in d.reason and "idle during probe" not in d.reason)
