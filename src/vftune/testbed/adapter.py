"""The one place the testbed meets the tuner: the agent's search and objectives on the deferral knob.

The search is the agent's (agent.itr_search.ItrSearch) and so are its decision rules: the
SearchConfig comes from ``Goal(objective).search_config(TunerOptions(...).search_config())``,
exactly as agent.tuner.SearchTuner builds it for a VF, and a goal that bounds the added delay
(latency: 100 us) raises the bracket's floor as it does there. What the testbed sets is what a
host's operator would set in TunerOptions (the noise margin of the measured quantity, the probe
budget) and what the knob is physically:

* the axis: gro_flush_timeout is an interval, like an ITR interval, so the search's rate is the
  flush rate 1e6 / gro_flush_timeout_us per second, with napi_defer_hard_irqs = 1, in whole
  microseconds (the knob's steps, as quantize_itr gives the 82599's). "No deferral" (the stock
  setting a host has before the tuner runs) is the search's incumbent, above the axis's top, so
  the agent's do-no-harm rule answers the edge of the range;
* the constraint (objective.Constrained): measured from the incumbent at the start, exactly as
  the agent would see a host (nothing from the sweep), and held ``guard`` inside its limit;
* the modes: defer 0 (GRO holding only) and threaded NAPI are not on the axis, and the agent has
  no rule for them. Once the axis search has chosen, each other (defer, threaded) combination at
  the chosen timeout is measured while the budget lasts, and one replaces the axis's choice only
  by the search's own criteria: more throughput than the noise margin, or the same throughput
  within the harm margin for less CPU per bit by more than the noise margin, and, as the search
  confirms its own choice, again on a second window (worst throughput, mean CPU per bit).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from vftune.control import itr_search
from vftune.control.itr_search import ItrSearch
from vftune.control.objective import Goal, Objective
from vftune.control.tuner import TunerOptions
from vftune.testbed.knob import NO_DEFERRAL, Knob
from vftune.testbed.objective import Constrained, cpu_per_bit, make_objective, parse_objective

NO_DEFERRAL_CODE = 1_000_000  # the incumbent's place on the axis: a 1-us flush, i.e. none

Sample = tuple[float, float, float]  # p99 us, cpu cores, delivered requests/s
# ... and with a competing application, the job's units of work per second
AppSample = tuple[float, float, float, float | None]


@dataclass(frozen=True)
class KnobSearchConfig:
    min_gro_us: int = 5
    max_gro_us: int = 500
    max_probes: int = 12  # all of them: the incumbent's baseline, the axis search, the modes
    baseline_probes: int = 2  # no deferral measured this often before the search (noisy p99)
    mode_probes: int = 3  # kept back from the axis search: one per mode of a deferral choice
    # TunerOptions' noise margin, per objective: what the objective's measured quantity varies by
    # between repeats on the testbed (CPU of the testbed's tasks ~10-14%, a window's p99 ~20-50%).
    cpu_margin: float = 0.10
    p99_margin: float = 0.20
    # The job's progress (competing app) between paired windows at one setting: 2-11% apart
    # with the testbed's CPU group (without it, 40-160%), so the CPU's margin serves.
    app_margin: float = 0.10
    rel_tolerance: float = 0.5  # TunerOptions: stop when the bracket's high/low is within 1 + this
    guard: float = 0.15  # efficiency: the tuner holds the p99 bound this much inside the limit
    request_bytes: int = 64  # for CPU per bit

    def __post_init__(self) -> None:
        if not 0 < self.min_gro_us < self.max_gro_us:
            raise ValueError(f"need 0 < min_gro_us < max_gro_us, got {self.min_gro_us}, {self.max_gro_us}")
        if not 1 <= self.baseline_probes <= self.max_probes - self.mode_probes - 3:
            raise ValueError(f"baseline_probes must be 1..max_probes-mode_probes-3, got {self.baseline_probes}")

    def margin(self, objective: Objective, competing_app: bool = False) -> float:
        if competing_app:
            return self.app_margin
        return self.cpu_margin if objective is Objective.EFFICIENCY else self.p99_margin

    def tuner_options(self, objective: Objective, competing_app: bool = False) -> TunerOptions:
        """The options an operator would give the agent on this host."""
        return TunerOptions(margin=self.margin(objective, competing_app), rel_tolerance=self.rel_tolerance,
                            quantize=False, max_probes=self.max_probes - self.baseline_probes - self.mode_probes)

    def search_config(self, objective: Objective, competing_app: bool = False) -> itr_search.SearchConfig:
        """The agent's SearchConfig for this objective, built as SearchTuner builds it, on this axis."""
        cfg = Goal(objective).search_config(self.tuner_options(objective, competing_app).search_config())
        # The testbed's contract is a hard budget: the agent's extra recheck beyond it is off.
        return replace(cfg, quantize=_quantize, strict_budget=True)

    def bracket(self, objective: Objective) -> tuple[float, float]:
        low, high = 1e6 / self.max_gro_us, 1e6 / self.min_gro_us
        goal = Goal(objective)
        if goal.bounds_delay:  # a bound on the added delay is a hard floor, as in SearchTuner
            low = max(low, math.ceil(goal.floor_rate()))
        return low, high


def knob_for(code: int) -> Knob:
    """The knob a search rate stands for."""
    if code >= NO_DEFERRAL_CODE:
        return NO_DEFERRAL
    return Knob(defer=1, gro_ns=max(1, round(1e6 / code)) * 1000)


def _quantize(rate: float) -> float:
    """Whole microseconds of gro_flush_timeout, like the 2-us steps of an ITR register."""
    return 1e6 / max(1, round(1e6 / rate))


def mode_variants(choice: Knob, threaded: bool = True) -> list[Knob]:
    """The settings off the axis next to the axis's choice: threaded flipped first (the sweep's
    other half), then defer 0 at the same timeout, with and without threads; without
    ``threaded`` (a competing app's sweep leaves threads out) only defer 0."""
    if not threaded:
        return [] if choice.no_deferral else [Knob(0, choice.gro_ns, choice.threaded)]
    if choice.no_deferral:
        return [Knob(0, 0, not choice.threaded)]
    return [Knob(choice.defer, choice.gro_ns, not choice.threaded), Knob(0, choice.gro_ns, choice.threaded),
            Knob(0, choice.gro_ns, not choice.threaded)]


class KnobSearch:
    """Ask for a knob, tell a measurement (p99 us, cpu cores, delivered requests/s and, with a
    competing app, the job's units of work per second); ``choice`` once done.

    ``objective`` with ``latency_bound_us`` (efficiency only; default twice the incumbent's p99)
    or a CPU budget (latency; default the incumbent's CPU plus the noise margin).
    ``competing_app`` (efficiency): the job's progress in place of CPU, and the incumbent's
    goodput held (objective.py). ``threaded``: whether the modes stage may try threaded NAPI.
    """

    def __init__(self, objective: str | Objective, cfg: KnobSearchConfig = KnobSearchConfig(),
                 latency_bound_us: float | None = None, competing_app: bool = False, threaded: bool = True) -> None:
        self.cfg = cfg
        self.goal_objective = parse_objective(objective)
        if competing_app and self.goal_objective is not Objective.EFFICIENCY:
            raise ValueError(f"a competing app's progress is efficiency's measure, not {self.goal_objective.value}'s")
        self.competing_app = competing_app
        self.threaded = threaded and not competing_app
        self.objective_name = self.goal_objective.value
        self.latency_bound_us = latency_bound_us
        self.objective: Constrained | None = None  # known after the baseline
        self._inner: Constrained | None = None  # the same, held `guard` inside (what the search sees)
        self.search_config = cfg.search_config(self.goal_objective, competing_app)
        self._baseline: list[AppSample] = []
        self._search: ItrSearch | None = None
        self._axis_choice: Knob | None = None
        self._modes: list[Knob] = []
        self._mode_samples: dict[Knob, list[tuple[float, float | None]]] = {}
        self._modes_judged: set[Knob] = set()
        self._mode_best: tuple[Knob, float, float | None] = (NO_DEFERRAL, 0.0, None)  # set with the modes
        self._final: Knob | None = None
        self._verdict = ""
        self.trace: list[dict[str, object]] = []

    # ---- ask/tell ---------------------------------------------------------------------

    def ask(self) -> Knob | None:
        if self._search is None:
            return NO_DEFERRAL
        code = self._search.ask()
        if code is not None:
            return knob_for(code)
        if self._final is not None:
            return None
        pending = self._mode_pending()
        if pending is None:
            self._decide_modes()
            return None
        return pending

    def tell(self, knob: Knob, p99_us: float, cpu: float, rate: float, app_ops: float | None = None) -> None:
        if self.competing_app and (app_ops is None or not math.isfinite(app_ops)):
            raise ValueError(f"competing app: the job's progress at {knob.label} is missing")
        seen: dict[str, object] = {"knob": knob.label, "p99_us": p99_us, "cpu": cpu, "rate": rate}
        if self.competing_app:
            seen["app_ops_per_s"] = app_ops
        if self._search is None:
            if knob != NO_DEFERRAL:
                raise ValueError(f"baseline probe must be no deferral, got {knob.label}")
            self._baseline.append((p99_us, cpu, rate, app_ops))
            self.trace.append({**seen, "phase": "baseline"})
            if len(self._baseline) >= self.cfg.baseline_probes:
                self._start_search()
            return
        assert self._inner is not None
        code = self._search.ask()
        tp = self._throughput(p99_us, cpu, rate)
        cpb = cpu_per_bit(self._inner.search_cost(cpu, app_ops), rate, self.cfg.request_bytes)
        if code is None:
            if knob != self._mode_pending():
                raise ValueError(f"tell({knob.label}) does not match the probe asked")
            self._mode_samples.setdefault(knob, []).append((tp, cpb))
            self.trace.append({**seen, "throughput": round(tp, 3), "phase": "mode"})
            self._judge_mode(knob)
            return
        if knob != knob_for(code):
            raise ValueError(f"tell({knob.label}) does not match the probe asked")
        self.trace.append({**seen, "throughput": round(tp, 3), "phase": self._search.phase})
        self._search.tell(code, tp, cpb)

    @property
    def converged(self) -> bool:
        return self._final is not None

    @property
    def probes(self) -> int:
        return len(self.trace)

    @property
    def choice(self) -> Knob:
        if self._final is not None:
            return self._final
        return self._axis_now()

    @property
    def axis_choice(self) -> Knob | None:
        """What the agent's search chose on its axis (None until it has converged)."""
        return self._axis_choice

    @property
    def outcome(self) -> str:
        if self._search is None:
            return "baseline only"
        return self._search.outcome + (f"; {self._verdict}" if self._verdict else "")

    # ---- internals --------------------------------------------------------------------

    def _start_search(self) -> None:
        # The better of the baseline windows, for the constraint and for the incumbent: a hiccup
        # in one window must neither loosen the bound nor make every setting look better than
        # the stock one (a costly first minute once made a mediocre timeout look 71% better).
        p99 = min(p for p, _, _, _ in self._baseline)
        cpu = min(c for _, c, _, _ in self._baseline)
        rate = max(r for _, _, r, _ in self._baseline)
        app_ops = max((a for _, _, _, a in self._baseline if a is not None), default=None)
        # Latency's CPU budget allows the CPU's own noise margin over the incumbent's CPU.
        self.objective = make_objective(self.goal_objective, p99, cpu, cpu_noise=self.cfg.cpu_margin,
                                        latency_bound_us=self.latency_bound_us,
                                        baseline_rate=rate if self.competing_app else None)
        # The tuner's own constraint sits `guard` inside the limit: its final choice is judged
        # on fresh windows whose p99 can land above what the search saw.
        if self.objective.objective is Objective.EFFICIENCY and self.objective.p99_bound_us is not None:
            self._inner = replace(self.objective, p99_bound_us=self.objective.p99_bound_us * (1.0 - self.cfg.guard))
        else:
            self._inner = self.objective
        low, high = self.cfg.bracket(self.goal_objective)
        self._search = ItrSearch(
            low, high, config=self.search_config, incumbent=NO_DEFERRAL_CODE,
            incumbent_throughput=self._throughput(p99, cpu, rate),
            incumbent_cpu_per_bit=cpu_per_bit(self._inner.search_cost(cpu, app_ops), rate, self.cfg.request_bytes),
        )

    def _throughput(self, p99_us: float, cpu: float, rate: float) -> float:
        assert self._inner is not None
        return self._inner.throughput(p99_us, cpu, rate)

    def _axis_now(self) -> Knob:
        best = self._search.best if self._search is not None else None
        return NO_DEFERRAL if best is None else knob_for(best)

    def _budget_left(self) -> int:
        return self.cfg.max_probes - self.probes

    def _mode_pending(self) -> Knob | None:
        """The next mode to measure (a new one, or a winner's confirmation), or None when all are
        judged or the budget is spent."""
        if self._axis_choice is None:
            self._axis_choice = self._axis_now()
            self._modes = mode_variants(self._axis_choice, threaded=self.threaded)
            self._mode_best = (self._axis_choice, *self._axis_result())
        if self._final is not None:
            return None
        for knob in self._modes:
            if knob not in self._modes_judged:
                return knob if self._budget_left() > 0 else None
        return None

    def _axis_result(self) -> tuple[float, float | None]:
        """The axis choice as the search credits it: its score and its CPU per bit."""
        assert self._search is not None and self._axis_choice is not None
        code = self._search.best
        assert code is not None
        if code in self._search.scores():
            return self._search.score(code), self._search.cpu_per_bit(code)
        assert self._search.incumbent_throughput is not None
        return self._search.incumbent_throughput, self._search.cpu_per_bit(code)

    def _judge_mode(self, knob: Knob) -> None:
        """A mode beats the best so far by the search's margins: more throughput than the noise
        margin, or the same within the harm margin at a CPU per bit lower by more than the noise
        margin. Like the search's own choice, a winner is measured again and judged by its
        worst throughput and mean CPU per bit; without the budget for that it is not taken."""
        assert self._search is not None
        cfg = self._search.config
        samples = self._mode_samples[knob]
        tp = min(t for t, _ in samples)
        cpbs = [c for _, c in samples if c is not None]
        cpb = sum(cpbs) / len(cpbs) if cpbs else None
        _best, best_tp, best_cpb = self._mode_best
        better = tp > best_tp * (1.0 + cfg.margin)
        cheaper = (tp >= best_tp * (1.0 - cfg.harm_margin) and cpb is not None and best_cpb is not None
                   and cpb < best_cpb * (1.0 - cfg.margin))
        if not (better or cheaper):
            self._modes_judged.add(knob)
        elif len(samples) >= 2:
            self._mode_best = (knob, tp, cpb)
            self._modes_judged.add(knob)
        elif self._budget_left() <= 0:
            self._modes_judged.add(knob)  # a winner on one window only: not taken

    def _decide_modes(self) -> None:
        assert self._axis_choice is not None
        best = self._mode_best[0]
        self._final = best
        tried = sum(1 for k in self._modes if k in self._mode_samples)
        if best != self._axis_choice:
            self._verdict = f"mode {best.label} beat the axis's {self._axis_choice.label}, confirmed"
        elif tried:
            self._verdict = f"{tried} mode(s) tried, none beat {self._axis_choice.label} twice"
        else:
            self._verdict = "no budget left for the modes"


def run_search(search: KnobSearch, measure: Callable[[Knob], Sample | AppSample]) -> Knob:
    """Drive a search to convergence with ``measure(knob) -> (p99_us, cpu, rate[, app_ops])``."""
    while True:
        knob = search.ask()
        if knob is None:
            return search.choice
        sample = measure(knob)
        p99, cpu, rate = sample[:3]
        app_ops = sample[3] if len(sample) > 3 else None
        if not (math.isfinite(p99) and math.isfinite(cpu) and math.isfinite(rate)):
            raise ValueError(f"measurement at {knob.label} is not finite: p99={p99}, cpu={cpu}, rate={rate}")
        search.tell(knob, p99, cpu, rate, app_ops)
