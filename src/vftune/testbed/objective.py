"""What the testbed adds to the agent's objectives: a fixed offered rate, and a constraint.

The objectives are the agent's own (agent.objective.Objective; the tuner's decision rules come
from agent.objective.Goal). What is specific to a testbed that offers a fixed request rate is
only this module:

* the constraint, set from the no-deferral measurement (the stock setting a host starts from):
  efficiency holds p99 under a bound (default twice the no-deferral p99; BayOp's form), latency
  holds CPU under a budget (default the no-deferral CPU, plus that CPU's measured repeat spread
  so that the default is not infeasible by noise);
* what the agent's search is told as throughput at a fixed offered rate (``throughput``):
  efficiency: the requests/s delivered (the same at every setting that keeps up, so the agent's
  own rules decide: the fewest interrupts on the throughput plateau, and no deferral unless a
  setting measures cheaper per bit by more than the noise margin); latency: 1e6 / p99, the
  responses/s one connection carries at that response time (the agent's latency objective reads
  a request/response VF's throughput as requests in flight over the response time). A setting
  that breaks the constraint delivers nothing the objective accepts: its throughput is scaled
  down to a small number that still grows as the violation shrinks, so a search among
  infeasible settings is pulled towards the feasible side;
* the judge's definitions (``value``, ``feasible``, ``ratio``, ``best_point``) that score a
  choice against the sweep: efficiency minimises CPU, latency minimises p99.

With a competing application (``vftune testbed --competing-app``: the server and a CPU-bound job
share the receiver's CPU), efficiency values the job's progress and the server's goodput
together: it maximises the job's units of work per second (``app_ops_per_s``, counted by the
job) among the settings that keep the server's goodput (delivered requests/s) within 2% of what
no deferral delivers. The job's progress is what the network work on that CPU leaves it, so this
is "least CPU" measured where the CPU is contended, in the application's own units; the goodput
floor keeps a setting from buying the job's progress with the server's service. The delay a
setting adds is bounded by the knob's range (gro_flush_timeout up to 500 us, the search's
bracket) and reported, not constrained: with the server's CPU shared, the p99 of a window is the
scheduler's (1.2-4.2 ms at one setting in the sweeps here) and a bound on it would decide by noise;
``--latency-bound-us`` adds one when an operator gives it. The search is told, in place of CPU
per bit, the job's seconds per unit of work per bit delivered: at the same goodput it leaves no
deferral only for job progress higher by more than its noise margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vftune.control.objective import Objective

OBJECTIVES = (Objective.EFFICIENCY, Objective.LATENCY)
INFEASIBLE_SCALE = 1e-3  # an infeasible setting's throughput is at most this share of a feasible one's
GOODPUT_MARGIN = 0.02  # competing app: a setting may deliver this much less than no deferral


def parse_objective(name: str | Objective) -> Objective:
    """The agent's objective for a testbed objective name (throughput has no meaning here: the
    offered rate is fixed)."""
    objective = Objective.parse(name) if isinstance(name, str) else name
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)} at a fixed offered rate, "
                         f"got {objective.value!r}")
    return objective


@dataclass(frozen=True)
class Constrained:
    """One of the agent's objectives at a fixed offered rate, with the testbed's constraint."""

    objective: Objective
    p99_bound_us: float | None = None  # efficiency's constraint
    cpu_budget: float | None = None  # latency's constraint, cores
    min_rate: float | None = None  # competing app: the goodput (delivered requests/s) to keep
    app: bool = False  # competing app (efficiency): maximise the job's progress instead of least CPU

    def __post_init__(self) -> None:
        parse_objective(self.objective)
        limit = self.p99_bound_us if self.objective is Objective.EFFICIENCY else self.cpu_budget
        if self.app and limit is None:
            limit = self.min_rate  # the goodput floor is the competing app's own constraint
        if limit is None or not (math.isfinite(limit) and limit > 0):
            raise ValueError(f"{self.name}: its constraint must be a positive number, got {limit!r}")
        if self.app and self.objective is not Objective.EFFICIENCY:
            raise ValueError(f"{self.name}: the job's progress is efficiency's measure, not {self.name}'s")
        if self.min_rate is not None and not (math.isfinite(self.min_rate) and self.min_rate >= 0):
            raise ValueError(f"{self.name}: min_rate must be a number >= 0, got {self.min_rate!r}")

    @property
    def name(self) -> str:
        return self.objective.value

    @property
    def minimises(self) -> str:
        if self.app:
            return "1/app_ops_per_s"
        return "cpu" if self.objective is Objective.EFFICIENCY else "p99"

    @property
    def constraint(self) -> str:
        if self.objective is Objective.EFFICIENCY:
            parts = [f"p99 <= {self.p99_bound_us:.0f} us"] if self.p99_bound_us is not None else []
            parts += [f"goodput >= {self.min_rate:.0f}/s"] if self.min_rate is not None else []
            return ", ".join(parts)
        return f"cpu <= {self.cpu_budget:.3f} cores"

    def value(self, p99_us: float, cpu: float, app_ops: float | None = None) -> float:
        """What the objective minimises (the judge's measure): with a competing app, the job's
        seconds per unit of work (so the judge's ratio is the job's progress over the best's)."""
        if self.app:
            return 1.0 / app_ops if app_ops is not None and app_ops > 0 else math.inf
        return cpu if self.objective is Objective.EFFICIENCY else p99_us

    def search_cost(self, cpu: float, app_ops: float | None = None) -> float:
        """What the search's CPU rule reads as CPU: the testbed's CPU, or with a competing app
        the job's seconds per unit of work (NaN when unknown)."""
        if self.app:
            return 1.0 / app_ops if app_ops is not None and app_ops > 0 else math.nan
        return cpu

    def feasible(self, p99_us: float, cpu: float, rate: float | None = None) -> bool:
        return self.violation(p99_us, cpu, rate) <= 1.0

    def violation(self, p99_us: float, cpu: float, rate: float | None = None) -> float:
        """Measured over allowed for the constrained quantity (<= 1 when feasible); with a goodput
        floor, the worse of the p99's and the goodput's (floor over delivered)."""
        if self.objective is Objective.EFFICIENCY:
            worst = p99_us / self.p99_bound_us if self.p99_bound_us is not None else 0.0
            if self.min_rate is not None and rate is not None:
                worst = max(worst, self.min_rate / rate if rate > 0 else math.inf)
            return worst
        assert self.cpu_budget is not None
        return cpu / self.cpu_budget

    def throughput(self, p99_us: float, cpu: float, rate: float) -> float:
        """What the agent's search is told as the throughput of one measurement (see the module)."""
        if not all(math.isfinite(v) and v > 0 for v in (p99_us, cpu, rate)):
            return 0.0
        raw = rate if self.objective is Objective.EFFICIENCY else 1e6 / p99_us
        if self.feasible(p99_us, cpu, rate):
            return raw
        return raw * INFEASIBLE_SCALE / self.violation(p99_us, cpu, rate)

    def ratio(self, best_value: float, choice_value: float) -> float:
        """The choice's score against the best, <= 1 when the best is really better."""
        if choice_value <= 0:
            return 0.0
        return best_value / choice_value

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "minimises": self.minimises, "constraint": self.constraint,
                "p99_bound_us": self.p99_bound_us, "cpu_budget": self.cpu_budget, "min_rate": self.min_rate,
                "competing_app": self.app}


def cpu_per_bit(cpu: float, rate: float, size: int) -> float | None:
    """CPU seconds per request bit delivered (what the agent's CPU rule compares), None if unknown."""
    if not all(math.isfinite(v) and v > 0 for v in (cpu, rate)) or size <= 0:
        return None
    return cpu / (rate * size * 8)


def make_objective(name: str | Objective, baseline_p99_us: float, baseline_cpu: float, *, cpu_noise: float = 0.0,
                   latency_bound_us: float | None = None, baseline_rate: float | None = None) -> Constrained:
    """An objective with its default constraint from the no-deferral measurement; with
    ``baseline_rate`` (the no-deferral goodput), efficiency is the competing app's."""
    objective = parse_objective(name)
    if objective is Objective.EFFICIENCY:
        if baseline_rate is not None:
            return Constrained(objective, p99_bound_us=latency_bound_us, min_rate=baseline_rate * (1.0 - GOODPUT_MARGIN),
                               app=True)
        return Constrained(objective, p99_bound_us=latency_bound_us if latency_bound_us else 2.0 * baseline_p99_us)
    return Constrained(objective, cpu_budget=baseline_cpu * (1.0 + max(0.0, cpu_noise)))


PointValues = tuple[object, float, float] | tuple[object, float, float, float, float | None]


def best_point(objective: Constrained, points: list[PointValues]) -> object | None:
    """The key of the best feasible (key, p99_us, cpu[, rate, app_ops]) point, or None when none
    is feasible."""
    feasible = []
    for i, (k, p, c, *rest) in enumerate(points):
        rate, app_ops = (rest[0], rest[1]) if rest else (None, None)
        if objective.feasible(p, c, rate):
            feasible.append((objective.value(p, c, app_ops), i, k))
    if not feasible:
        return None
    return min(feasible, key=lambda t: (t[0], t[1]))[2]
