"""What a VF is tuned for: an operator's objective, per VF or guest, as the policy receives it.

Every objective is defined like the bench's frontier: per VF, the lowest interrupt rate whose
merit (what its application gets: bits delivered, or response time for request/response) is
within a margin of the best measured, the guest's adaptive ITR counted as a candidate at the
rate it ran. Fewer interrupts cost less CPU. The search's plateau rule takes that knee among
its probes, a rate short of the margin by less than its windows' noise counting as within it
(SearchConfig.knee_z); against the adaptive ITR a costlier rate must gain more than the margin
(ItrSearch.cost_margin).

- ``balanced`` (default): margin BALANCED_MARGIN (3%), intervals up to the NIC's longest; no
  CPU rule: fewer interrupts are the CPU it saves (its ablation: docs/tuning-history.md,
  "seventeenth round").
- ``throughput``: the noise only (TunerOptions.plateau_margin, 0.5%), intervals up to 250 us
  (SearchConfig.max_interval_us), with the CPU rule: a
  result costing more CPU per Gb than the adaptive ITR must gain at least CPU_WORTH times the
  rise (+10% CPU per Gb must buy +10% throughput, plus the noise margin).
- ``efficiency``: margin EFFICIENCY_MARGIN (10%), intervals up to 1 ms, and never more CPU per
  Gb than the adaptive ITR unless a result measures cheaper per Gb, or faster at no more CPU
  per Gb, by more than the noise margin.
- ``latency``: lowest response time (request/response throughput is requests in flight over
  the response time): no margin, the interval bounded by ``max_interval_us`` (default 100 us);
  ties inside the noise go to the higher rate (the shorter delay), except on a receive-heavy
  load, where more interrupts than it needs risk a livelock its ring counters do not show.
  A load read as bulk has no response time to guard: it is tuned as under ``balanced``, unless
  the operator set ``max_interval_us``.

A rule's ``margin`` replaces the objective's own (not under latency); ``max_interval_us`` (an
operator's bound on the added delay) replaces each objective's own bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from vftune.control.itr_search import SearchConfig
from vftune.control.memory import Kind
from vftune.itr import ITR_MIN_RATE, MAX_RX_USECS

CPU_WORTH = 1.0  # throughput: a gain must be at least the rise in CPU per Gb
BALANCED_MARGIN = 0.03  # balanced (the default): the lowest rate within 3% of the VF's best
EFFICIENCY_MARGIN = 0.10  # efficiency: merit within 10% of the best
EFFICIENCY_CPU_WORTH = math.inf  # efficiency: never more CPU per Gb than the adaptive ITR
LATENCY_MAX_INTERVAL_US = 100.0
MARGIN_RANGE = (0.0, 0.5)  # a rule's margin: a share of the VF's best merit given up


class Objective(StrEnum):
    BALANCED = "balanced"
    THROUGHPUT = "throughput"
    EFFICIENCY = "efficiency"
    LATENCY = "latency"

    @classmethod
    def parse(cls, value: str) -> Objective:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"objective {value!r}: choose from {', '.join(o.value for o in cls)}") from None


@dataclass(frozen=True)
class Goal:
    """An objective and its bound on the added delay, as one VF's policy is given them."""

    objective: Objective = Objective.BALANCED
    max_interval_us: float | None = None  # None: the objective's own bound
    margin: float | None = None  # a share of the VF's best merit given up; None: the objective's own

    def __post_init__(self) -> None:
        if self.max_interval_us is not None and not 2 <= self.max_interval_us <= MAX_RX_USECS:
            raise ValueError(f"max_interval_us must be 2..{MAX_RX_USECS}, got {self.max_interval_us!r}")
        if self.margin is not None:
            low, high = MARGIN_RANGE
            if self.objective is Objective.LATENCY:
                raise ValueError(f"margin {self.margin!r}: the latency objective takes none (response time first)")
            if not low <= self.margin <= high:
                raise ValueError(f"margin must be a share of the VF's best merit in {low:g}..{high:g}, "
                                 f"got {self.margin!r}")

    @classmethod
    def of(cls, objective: Objective | str, max_interval_us: float | None = None,
           margin: float | None = None) -> Goal:
        """From a config rule's values (an objective's name, a bound in microseconds or None, a
        margin or None)."""
        return cls(Objective.parse(objective) if isinstance(objective, str) else objective, max_interval_us,
                   margin)

    def search_config(self, base: SearchConfig, longest_us: float = 1e6 / ITR_MIN_RATE) -> SearchConfig:
        """The search's decision rules under this goal (budget and stop rules from `base`), on a
        NIC whose longest interrupt interval is `longest_us` (default: the 82599's)."""
        if self.objective is Objective.BALANCED:
            # The knee: the lowest rate within the margin of the best measured (the guest's own
            # adaptive ITR included). No CPU rule: switched off it moved no scenario of either
            # family beyond the seeds' interval (docs/tuning-history.md, "seventeenth round").
            margin = BALANCED_MARGIN if self.margin is None else self.margin
            # No bound on the interval beyond the NIC's: the merit measures what a longer one
            # costs (response time, bits lost to a full ring). The search's 250-us bound kept
            # the paper's hosts at 1.2x the frontier's CPU per Gb for no score
            # (docs/tuning-history.md, "Tuner v3, second round").
            cfg = replace(base, plateau_margin=margin, harm_margin=max(base.harm_margin, margin),
                          cpu_worth=None, max_interval_us=longest_us)
        elif self.objective is Objective.EFFICIENCY:
            # The margin is given up against the best measured rate and against the guest's own
            # adaptive ITR alike: the operator traded that much throughput for fewer interrupts.
            margin = EFFICIENCY_MARGIN if self.margin is None else self.margin
            cfg = replace(base, plateau_margin=margin, harm_margin=max(base.harm_margin, margin),
                          cpu_worth=EFFICIENCY_CPU_WORTH, max_interval_us=longest_us)
        elif self.objective is Objective.LATENCY:
            cfg = replace(base, plateau_margin=0.0, max_interval_us=LATENCY_MAX_INTERVAL_US, cpu_worth=None,
                          ties_up=True)
        else:
            cfg = replace(base, cpu_worth=CPU_WORTH if base.cpu_worth is None else base.cpu_worth)
            if self.margin is not None:
                cfg = replace(cfg, plateau_margin=self.margin)
        if self.max_interval_us is not None:
            cfg = replace(cfg, max_interval_us=float(self.max_interval_us))
        return cfg

    def for_load(self, kind: Kind | None) -> Goal:
        """The goal a load of this kind (None: not known yet) is tuned for."""
        if kind == "bulk" and self.objective is Objective.LATENCY and self.max_interval_us is None:
            return Goal()
        return self

    @property
    def trades_merit(self) -> bool:
        """Whether the objective gives up a margin of merit for fewer interrupts (beyond the noise)."""
        return self.objective in (Objective.BALANCED, Objective.EFFICIENCY)

    @property
    def bounds_delay(self) -> bool:
        """Whether the delay bound is hard (probes stay above it), not only the plateau rule's."""
        return self.objective is Objective.LATENCY or self.max_interval_us is not None

    def floor_rate(self) -> float:
        """The lowest interrupt rate this goal accepts (the bound on the added delay)."""
        return 1e6 / self.search_config(SearchConfig()).max_interval_us
