"""The two objectives at a fixed offered rate, with their constraints.

* efficiency: the least CPU whose p99 latency stays under a bound (default: twice the
  no-deferral p99; BayOp's form);
* latency: the lowest p99 whose CPU stays under a budget (default: the no-deferral CPU, plus
  the no-deferral CPU's own measured repeat spread so that the default is not infeasible by noise).

``search_score`` turns a measurement into the one number a maximising search compares: the
reference value over the measured one when feasible (1.0 = as good as the reference), and when
infeasible a small number that still grows as the violation shrinks, so a search standing among
infeasible settings is pulled towards the feasible side instead of along a flat zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OBJECTIVES = ("efficiency", "latency")
INFEASIBLE_SCALE = 1e-3  # every feasible score is far above this (values stay within 100x of the reference)


@dataclass(frozen=True)
class Objective:
    name: str
    p99_bound_us: float | None = None  # efficiency's constraint
    cpu_budget: float | None = None  # latency's constraint, cores

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.name!r}")
        limit = self.p99_bound_us if self.name == "efficiency" else self.cpu_budget
        if limit is None or not (math.isfinite(limit) and limit > 0):
            raise ValueError(f"{self.name}: its constraint must be a positive number, got {limit!r}")

    @property
    def minimises(self) -> str:
        return "cpu" if self.name == "efficiency" else "p99"

    @property
    def constraint(self) -> str:
        if self.name == "efficiency":
            return f"p99 <= {self.p99_bound_us:.0f} us"
        return f"cpu <= {self.cpu_budget:.3f} cores"

    def value(self, p99_us: float, cpu: float) -> float:
        """What the objective minimises."""
        return cpu if self.name == "efficiency" else p99_us

    def feasible(self, p99_us: float, cpu: float) -> bool:
        if self.name == "efficiency":
            assert self.p99_bound_us is not None
            return p99_us <= self.p99_bound_us
        assert self.cpu_budget is not None
        return cpu <= self.cpu_budget

    def violation(self, p99_us: float, cpu: float) -> float:
        """Measured over allowed for the constrained quantity (<= 1 when feasible)."""
        if self.name == "efficiency":
            assert self.p99_bound_us is not None
            return p99_us / self.p99_bound_us
        assert self.cpu_budget is not None
        return cpu / self.cpu_budget

    def search_score(self, p99_us: float, cpu: float, reference: float) -> float:
        """Higher is better: reference/value when feasible, else a graded small number."""
        if not (math.isfinite(p99_us) and math.isfinite(cpu)) or p99_us <= 0 or cpu <= 0:
            return 0.0
        if self.feasible(p99_us, cpu):
            return reference / self.value(p99_us, cpu)
        return INFEASIBLE_SCALE / self.violation(p99_us, cpu)

    def ratio(self, best_value: float, choice_value: float) -> float:
        """The choice's score against the best, <= 1 when the best is really better."""
        if choice_value <= 0:
            return 0.0
        return best_value / choice_value

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "minimises": self.minimises, "constraint": self.constraint,
                "p99_bound_us": self.p99_bound_us, "cpu_budget": self.cpu_budget}


def make_objective(name: str, baseline_p99_us: float, baseline_cpu: float, *, cpu_noise: float = 0.0,
                   latency_bound_us: float | None = None) -> Objective:
    """An objective with its default constraint from the no-deferral measurement."""
    if name == "efficiency":
        return Objective(name, p99_bound_us=latency_bound_us if latency_bound_us else 2.0 * baseline_p99_us)
    return Objective(name, cpu_budget=baseline_cpu * (1.0 + max(0.0, cpu_noise)))


def best_point(objective: Objective, points: list[tuple[object, float, float]]) -> object | None:
    """The key of the best feasible (key, p99_us, cpu) point, or None when none is feasible."""
    feasible = [(objective.value(p, c), i, k) for i, (k, p, c) in enumerate(points) if objective.feasible(p, c)]
    if not feasible:
        return None
    return min(feasible, key=lambda t: (t[0], t[1]))[2]
