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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vftune.agent.objective import Objective

OBJECTIVES = (Objective.EFFICIENCY, Objective.LATENCY)
INFEASIBLE_SCALE = 1e-3  # an infeasible setting's throughput is at most this share of a feasible one's


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

    def __post_init__(self) -> None:
        parse_objective(self.objective)
        limit = self.p99_bound_us if self.objective is Objective.EFFICIENCY else self.cpu_budget
        if limit is None or not (math.isfinite(limit) and limit > 0):
            raise ValueError(f"{self.name}: its constraint must be a positive number, got {limit!r}")

    @property
    def name(self) -> str:
        return self.objective.value

    @property
    def minimises(self) -> str:
        return "cpu" if self.objective is Objective.EFFICIENCY else "p99"

    @property
    def constraint(self) -> str:
        if self.objective is Objective.EFFICIENCY:
            return f"p99 <= {self.p99_bound_us:.0f} us"
        return f"cpu <= {self.cpu_budget:.3f} cores"

    def value(self, p99_us: float, cpu: float) -> float:
        """What the objective minimises (the judge's measure)."""
        return cpu if self.objective is Objective.EFFICIENCY else p99_us

    def feasible(self, p99_us: float, cpu: float) -> bool:
        return self.violation(p99_us, cpu) <= 1.0

    def violation(self, p99_us: float, cpu: float) -> float:
        """Measured over allowed for the constrained quantity (<= 1 when feasible)."""
        if self.objective is Objective.EFFICIENCY:
            assert self.p99_bound_us is not None
            return p99_us / self.p99_bound_us
        assert self.cpu_budget is not None
        return cpu / self.cpu_budget

    def throughput(self, p99_us: float, cpu: float, rate: float) -> float:
        """What the agent's search is told as the throughput of one measurement (see the module)."""
        if not all(math.isfinite(v) and v > 0 for v in (p99_us, cpu, rate)):
            return 0.0
        raw = rate if self.objective is Objective.EFFICIENCY else 1e6 / p99_us
        if self.feasible(p99_us, cpu):
            return raw
        return raw * INFEASIBLE_SCALE / self.violation(p99_us, cpu)

    def ratio(self, best_value: float, choice_value: float) -> float:
        """The choice's score against the best, <= 1 when the best is really better."""
        if choice_value <= 0:
            return 0.0
        return best_value / choice_value

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "minimises": self.minimises, "constraint": self.constraint,
                "p99_bound_us": self.p99_bound_us, "cpu_budget": self.cpu_budget}


def cpu_per_bit(cpu: float, rate: float, size: int) -> float | None:
    """CPU seconds per request bit delivered (what the agent's CPU rule compares), None if unknown."""
    if not all(math.isfinite(v) and v > 0 for v in (cpu, rate)) or size <= 0:
        return None
    return cpu / (rate * size * 8)


def make_objective(name: str | Objective, baseline_p99_us: float, baseline_cpu: float, *, cpu_noise: float = 0.0,
                   latency_bound_us: float | None = None) -> Constrained:
    """An objective with its default constraint from the no-deferral measurement."""
    objective = parse_objective(name)
    if objective is Objective.EFFICIENCY:
        return Constrained(objective, p99_bound_us=latency_bound_us if latency_bound_us else 2.0 * baseline_p99_us)
    return Constrained(objective, cpu_budget=baseline_cpu * (1.0 + max(0.0, cpu_noise)))


def best_point(objective: Constrained, points: list[tuple[object, float, float]]) -> object | None:
    """The key of the best feasible (key, p99_us, cpu) point, or None when none is feasible."""
    feasible = [(objective.value(p, c), i, k) for i, (k, p, c) in enumerate(points) if objective.feasible(p, c)]
    if not feasible:
        return None
    return min(feasible, key=lambda t: (t[0], t[1]))[2]
