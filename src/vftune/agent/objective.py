"""What a VF is tuned for: an operator's objective, per VF or guest, as the policy receives it.

- ``throughput`` (default): most delivered bytes. The plateau rule takes the lowest rate within
  1% of the best, and the CPU rule holds: the result never costs more CPU per Gb than the
  guest's own adaptive ITR (measured as the first probe of every search) unless its throughput
  gain is at least CPU_WORTH times the rise in CPU per Gb, plus the noise margin (+10% CPU per
  Gb must buy +12% throughput: the extra CPU then goes into delivered bytes at least as much as
  into interrupts); otherwise the best measured rate the rule accepts that holds the adaptive ITR's
  throughput wins, or the adaptive ITR stays. On a blind datagram receiver (no return traffic,
  its guest's socket drops unknown) a costlier result must also beat the adaptive ITR by
  BLIND_NOISE_Z standard errors of the search's own window noise (SearchConfig.noise_z).
- ``efficiency``: CPU per Gb first: the lowest interrupt rate whose throughput is within
  EFFICIENCY_MARGIN of the best measured and of the guest's adaptive ITR (a config rule's
  ``throughput_margin`` gives another share), down to a 1 ms coalescing delay, and the CPU rule
  with no exception: never more CPU per Gb than the guest's adaptive ITR (a request/response
  VF whose best throughput needs more interrupts per byte keeps the adaptive ITR's cost), and
  the adaptive ITR stays unless a result measures a CPU per Gb lower by more than the noise
  margin, or more throughput by more than it at no more CPU per Gb: a saving inside the noise
  is not worth leaving the guest's own moderation for (on a kernel where fewer interrupts do not
  mean less CPU, one cheap window would otherwise carry a costlier setting).
- ``latency``: lowest response time for request/response traffic (whose throughput is requests
  in flight over the response time, so the best throughput is the best response time): no
  plateau discount, and the coalescing delay is bounded by ``max_interval_us`` (default 100 us).
  Rates whose throughput ties inside the noise margin are settled towards the higher rate (the
  shorter coalescing delay, which throughput cannot show; ``ties_up``), except on a receive-heavy
  load (the tuner's class mix ``rx``), where more interrupts than it needs risk a livelock that
  its ring counters do not show.
  Every load on such a VF is tuned so: the host cannot tell a web server's large responses
  from bulk transmit by its counters, and the operator asked for response time.
``max_interval_us`` (an operator's bound on the added delay) overrides each objective's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from vftune.agent.itr_search import SearchConfig
from vftune.itr import MAX_RX_USECS
from vftune.rules import THROUGHPUT_MARGIN_RANGE

CPU_WORTH = 1.0  # throughput: a gain must be at least the rise in CPU per Gb
# A blind datagram receiver (no return traffic, socket drops unknown): under `throughput` more
# interrupts must gain two standard errors of the search's own window noise (SearchTuner._begin).
BLIND_NOISE_Z = 2.0
EFFICIENCY_MARGIN = 0.02  # efficiency: throughput within 2% of the best (the noise margin)
EFFICIENCY_CPU_WORTH = math.inf  # efficiency: never more CPU per Gb than the adaptive ITR
LATENCY_MAX_INTERVAL_US = 100.0


class Objective(StrEnum):
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

    objective: Objective = Objective.THROUGHPUT
    max_interval_us: float | None = None  # None: the objective's own bound
    throughput_margin: float | None = None  # efficiency only; None: EFFICIENCY_MARGIN

    def __post_init__(self) -> None:
        if self.max_interval_us is not None and not 2 <= self.max_interval_us <= MAX_RX_USECS:
            raise ValueError(f"max_interval_us must be 2..{MAX_RX_USECS}, got {self.max_interval_us!r}")
        if self.throughput_margin is not None:
            low, high = THROUGHPUT_MARGIN_RANGE
            if self.objective is not Objective.EFFICIENCY:
                raise ValueError(f"throughput_margin {self.throughput_margin!r}: only the efficiency objective "
                                 f"takes one, not {self.objective.value!r}")
            if not low <= self.throughput_margin <= high:
                raise ValueError(f"throughput_margin must be a share of the best throughput in {low:g}..{high:g}, "
                                 f"got {self.throughput_margin!r}")

    @classmethod
    def of(cls, objective: Objective | str, max_interval_us: float | None = None,
           throughput_margin: float | None = None) -> Goal:
        """From a config rule's values (an objective's name, a bound in microseconds or None, the
        efficiency objective's throughput margin or None)."""
        return cls(Objective.parse(objective) if isinstance(objective, str) else objective, max_interval_us,
                   throughput_margin)

    def search_config(self, base: SearchConfig) -> SearchConfig:
        """The search's decision rules under this goal (budget and stop rules from `base`)."""
        if self.objective is Objective.EFFICIENCY:
            # The margin is given up against the best measured rate and against the guest's own
            # adaptive ITR alike: the operator traded that much throughput for fewer interrupts.
            margin = EFFICIENCY_MARGIN if self.throughput_margin is None else self.throughput_margin
            cfg = replace(base, plateau_margin=margin, harm_margin=max(base.harm_margin, margin),
                          cpu_worth=EFFICIENCY_CPU_WORTH, max_interval_us=float(MAX_RX_USECS))
        elif self.objective is Objective.LATENCY:
            cfg = replace(base, plateau_margin=0.0, max_interval_us=LATENCY_MAX_INTERVAL_US, cpu_worth=None,
                          ties_up=True)
        else:
            cfg = replace(base, cpu_worth=CPU_WORTH if base.cpu_worth is None else base.cpu_worth)
        if self.max_interval_us is not None:
            cfg = replace(cfg, max_interval_us=float(self.max_interval_us))
        return cfg

    @property
    def bounds_delay(self) -> bool:
        """Whether the delay bound is hard (probes stay above it), not only the plateau rule's."""
        return self.objective is Objective.LATENCY or self.max_interval_us is not None

    def floor_rate(self) -> float:
        """The lowest interrupt rate this goal accepts (the bound on the added delay)."""
        return 1e6 / self.search_config(SearchConfig()).max_interval_us
