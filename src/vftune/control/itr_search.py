"""Golden-section search for a VF's best interrupt rate, as an ask/tell state machine.

Wu & Wang's search ("A Heuristic Interrupt Coalescing Approach for Improving High Performance
Network", Huijun Wu and Jigang Wang) with these changes:

* it maximises (their pseudo-code keeps the wrong end; the literal form is the benchmark's
  `paper` peer, bench/peers/paper.py);
* it reuses the surviving interior point, so each step costs one measurement, not two;
* it searches the logarithm of the rate, so the three decades 956..488281/s cost few steps;
* a difference inside the noise margin is not a decision: the point with fewer samples is
  measured again (bounded), and a tie that survives goes to the lower rate;
* on a plateau it answers the lowest rate whose throughput stays within a margin of the best,
  but never a longer interval than ``max_interval_us`` so latency stays sane;
* on a wide plateau (flat within the noise margin over PLATEAU_WIDTH x of rates), since the
  final bracket is still ``rel_tolerance`` wide, up to ``max_edge_probes`` more probes bisect
  towards the plateau's low edge (fewer interrupts, throughput within ``plateau_margin``);
* a budget: at most ``max_probes`` measurements in all (the incumbent's included); extras
  (repeats, step scans, edge probes, re-checks) are only spent while the budget allows, and
  when it runs out the bracket stops where it is, with one probe kept for the confirmation.
  Two probes may go one beyond it each, unless ``strict_budget``: the incumbent's second
  measurement before it vetoes the result on one window, and an overloaded receiver's lowest
  rate (below);
* interrupts cost CPU: a higher rate than the incumbent's must gain more than the noise
  margin (or ``cost_margin``), or the incumbent stays (the adaptive ITR's rate is the mean
  interrupt rate told with its measurements, when the caller gives none); with ``cpu_worth``
  and CPU measured per probe, a result costing more CPU per bit than the incumbent must gain
  cpu_worth times as much (with cpu_worth inf, CPU per bit first: it must cost less by more
  than the noise margin, or gain more than it at no more CPU per bit);
* a measured value may be told with its scale (the bits the VF received when the value is what
  reached its applications): a difference is noise unless it clears the margin of the larger of
  the two values or their scales, since a small remainder carries the noise of what it is taken
  from; such a value is credited with its mean, not its lowest window (a burst only lifts a
  throughput window, but a remainder swings either way with what the sockets dropped); and a
  receiver whose applications got less than half of what it received (an overloaded guest
  dropping at its sockets) has the lowest rate of the range measured too, which a golden
  section never measures: dropping at the NIC's ring costs the guest nothing (Mogul &
  Ramakrishnan's receive-livelock remedy), so the range's end may be the best; and among
  rates whose remainders tie inside that noise it keeps the fewest interrupts, below the
  plateau's delay bound too (its packets wait at its sockets, not in the coalescing delay),
  unless the plateau margin is 0 (an objective that gives up no throughput for interrupts);
* with ``low_edge`` (off by default), a plateau's walk starts at the range's lowest rate (or
  the delay bound's), measured once: a golden section on a flat merit drops one end of the
  range at its first step, whichever end the windows' noise chose, and a knee at the low end
  is then never measured; one window there settles it, and the walk bisects from it when it
  falls short. It may go one probe beyond the budget, as the overloaded receiver's does;
* with ``knee_z`` (off by default), the plateau rule reads the windows' noise too: a rate whose
  mean log throughput is short of the best's by the plateau margin plus less than knee_z
  standard errors of the difference, the deviation pooled from the search's own repeated
  windows at one rate, is on the plateau, so on a load whose windows
  swing by more than the margin the knee is the lowest such rate, not wherever the bracket
  closed;
* do no harm: it measures the incumbent setting first and keeps it unless the result,
  re-measured at the end, is at least as good; an incumbent that would win on a single
  measurement is measured once more first (one lucky window must not veto a better setting);
  a result that measures worse falls back to the lowest measured rate that holds the
  incumbent's throughput, if any.

What a caller may choose is in one SearchConfig; ``ItrSearch(low, high, tolerance)`` runs with
its defaults. The counts below are the search's own constants.
Pure logic: no clock, no I/O. The caller measures what ask() returns and tell()s the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from vftune.itr import itr_label
from vftune.model import Capabilities

GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0  # 0.618..., the paper's CutRate
OVERLOADED = 0.5  # told values below this share of their scale: the lowest rate is measured too

# Phases of one search, in order.
BASELINE = "baseline"  # measuring the incumbent setting
SEARCH = "search"  # golden-section steps
CONFIRM = "confirm"  # re-measuring the chosen rate
EDGE = "edge"  # walking down a plateau towards its low edge
RECHECK = "recheck"  # measuring the incumbent again before it vetoes the result
DONE = "done"
KNEE_Z = 1.0  # SearchConfig.knee_z as the tuner sets it: one standard error
REPEATS_PER_STEP = 2  # re-measurements of one golden-section comparison inside the noise
CONFIRMS = 2  # re-measurements of a choice measured once (a second choice may take the other)
STEP_SCANS = 2  # hardware steps measured directly when both interior points share one
PLATEAU_WIDTH = 1.5  # a plateau flat over this ratio of rates is walked down towards its edge


@dataclass(frozen=True)
class Probe:
    itr: int
    throughput: float


@dataclass(frozen=True)
class SearchConfig:
    """How one search decides; the defaults are the throughput objective's.

    ``tolerance`` is the paper's accept interval in interrupts/s; the search also stops when the
    bracket's high/low ratio is within ``rel_tolerance``. ``margin`` is the noise margin (smaller
    differences are re-measured, not followed); ``plateau_margin`` picks the lowest rate within
    that share of the best (1%: throughput stays within 1% of the best when measurements are
    exact); ``max_interval_us`` bounds the coalescing delay the plateau rule may add.
    ``cpu_worth`` (None: off) is the CPU rule against an adaptive incumbent: a result that costs
    more CPU per bit than the incumbent is kept only when its throughput gain is at least
    cpu_worth times the relative rise in CPU per bit (see SearchTuner's docstring); inf puts CPU
    per bit first, and a result must then measurably save CPU per bit or gain throughput.
    """

    tolerance: float = 200.0
    rel_tolerance: float = 0.2
    margin: float = 0.02
    plateau_margin: float = 0.01
    harm_margin: float = 0.005
    max_repeats: int = 3
    max_interval_us: float = 250.0
    max_edge_probes: int = 2
    recheck_incumbent: bool = True
    max_probes: int = 15
    pessimistic: bool = True
    quantize: Callable[[float], float] | None = None
    cpu_worth: float | None = None
    strict_budget: bool = False  # True: max_probes is a hard cap (no recheck or low end beyond it)
    # Where measurements tie: False keeps the lower rates (fewer interrupts), True the higher
    # ones (a shorter coalescing delay: the latency objective's tie-break).
    ties_up: bool = False
    # The knee under noise (0: off): a rate is within the plateau margin of the best unless its
    # mean log throughput is below the margin by more than knee_z standard errors of the
    # difference, the deviation pooled from this search's repeated windows (spread()).
    knee_z: float = 0.0
    # A plateau's walk down starts at the range's lowest rate (the delay bound's), once.
    low_edge: bool = False

    def __post_init__(self) -> None:
        if not self.tolerance > 0:
            raise ValueError(f"tolerance must be > 0 interrupts/s, got {self.tolerance!r}")
        for name in ("rel_tolerance", "margin", "plateau_margin", "harm_margin"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if self.max_repeats < 0 or self.max_edge_probes < 0:
            raise ValueError(
                f"repeat and edge probe counts must be >= 0, got {self.max_repeats!r}/{self.max_edge_probes!r}")
        if not (math.isfinite(self.knee_z) and self.knee_z >= 0):
            raise ValueError(f"knee_z must be a finite number >= 0, got {self.knee_z!r}")
        if self.max_probes < 3:
            raise ValueError(
                f"max_probes must be >= 3 (two interior points and a confirmation), got {self.max_probes!r}")
        if not self.max_interval_us > 0:
            raise ValueError(f"max_interval_us must be > 0, got {self.max_interval_us!r}")
        if self.cpu_worth is not None and not self.cpu_worth >= 0:
            raise ValueError(f"cpu_worth must be a number >= 0 (inf: never more CPU per bit), got {self.cpu_worth!r}")


class ItrSearch:
    """Maximise throughput(itr) over [low, high] interrupts/s.

    ``tolerance`` is the paper's accept interval in interrupts/s; the search also stops when
    the bracket's high/low ratio is within ``rel_tolerance`` (high rates are coarse on the
    82599 anyway: 488281/s is one 2.048-us step, 244140/s two) or when both interior points
    fall on the same hardware step.

    With ``quantize`` (e.g. vftune.itr.quantize_itr) only deliverable rates are probed;
    when both interior points land on one hardware step, up to STEP_SCANS other steps
    left inside the bracket are measured directly.

    ``incumbent`` is the rate in force before the search (0 = the VF's own adaptive ITR);
    when given, ask() first returns it so the search can be compared with it at the end.
    """

    def __init__(
        self,
        low: float,
        high: float,
        tolerance: float | None = None,
        config: SearchConfig | None = None,
        *,
        incumbent: float | None = None,
        incumbent_throughput: float | None = None,
        incumbent_cost: float | None = None,
        incumbent_cpu_per_bit: float | None = None,
        cost_margin: float | None = None,
    ) -> None:
        cfg = config or SearchConfig()
        if tolerance is not None:
            cfg = replace(cfg, tolerance=tolerance)
        if not (math.isfinite(low) and low > 0):
            raise ValueError(f"low must be a positive interrupt rate, got {low!r}")
        if not (math.isfinite(high) and high > low):
            raise ValueError(f"high must be above low ({low!r}), got {high!r}")
        if cost_margin is not None and not (math.isfinite(cost_margin) and cost_margin >= 0):
            raise ValueError(f"cost_margin must be a finite number >= 0, got {cost_margin!r}")
        if incumbent is not None and incumbent < 0:
            raise ValueError(f"incumbent must be >= 0 interrupts/s (0 = adaptive), got {incumbent!r}")
        self.config = cfg
        tolerance = cfg.tolerance
        rel_tolerance, margin, plateau_margin = cfg.rel_tolerance, cfg.margin, cfg.plateau_margin
        harm_margin, max_repeats, max_interval_us = cfg.harm_margin, cfg.max_repeats, cfg.max_interval_us
        recheck_incumbent, max_probes, pessimistic = cfg.recheck_incumbent, cfg.max_probes, cfg.pessimistic
        max_edge_probes, quantize = cfg.max_edge_probes, cfg.quantize

        self.low = float(low)
        self.high = float(high)
        self.tolerance = float(tolerance)
        self.rel_tolerance = rel_tolerance
        self.margin = margin
        # What a rate costlier than the incumbent must gain to be adopted (default: the noise
        # margin; a caller that knows gains to be partly illusory asks for more). Never less than
        # the plateau margin: the incumbent is a candidate like any probe, and a cheaper one
        # within that margin of the best is the knee.
        self.cost_margin = max(margin if cost_margin is None else cost_margin, plateau_margin)
        self.plateau_margin = plateau_margin
        self.harm_margin = harm_margin
        self.max_interval_us = max_interval_us
        self._quantize = quantize
        self._repeats_left = max_repeats
        self._step_repeats = 0
        self._confirms_left = CONFIRMS
        self._scans_left = STEP_SCANS
        self._edge_left = 0 if cfg.ties_up else max_edge_probes  # no walk down a plateau
        self._ties_up = cfg.ties_up
        self.max_probes = max_probes
        self.pessimistic = pessimistic
        # Interrupts/s the incumbent runs at, when measured (the adaptive ITR has no fixed rate):
        # given by the caller, or the mean of the rates told with the incumbent's measurements.
        self.incumbent_cost = incumbent_cost
        self._measure_cost = incumbent_cost is None
        self._incumbent_rates: list[float] = []
        self._rates: dict[int, list[float]] = {}  # interrupts/s each probed rate ran at
        self._recheck = recheck_incumbent
        self._incumbent_samples: list[float] = [] if incumbent_throughput is None else [incumbent_throughput]
        # CPU seconds per bit, when the caller measures it: the incumbent's, and per rate.
        self._incumbent_cpb: list[float] = [] if incumbent_cpu_per_bit is None else [incumbent_cpu_per_bit]
        self._cpb: dict[int, list[float]] = {}

        self.incumbent: int | None = None if incumbent is None else int(round(incumbent))
        self.incumbent_throughput: float | None = incumbent_throughput
        self.history: list[Probe] = []
        self._samples: dict[int, list[float]] = {}
        self._scales: dict[int, list[float]] = {}  # per rate: the scale of each value told, when given
        self._incumbent_scales: list[float] = []
        self._low_end_checked = False
        self._low_edge_left = 1 if cfg.low_edge and not cfg.ties_up else 0

        # Bracket [a, b] and interior points c < d, all in ln(rate).
        self._a = math.log(self.low)
        self._b = math.log(self.high)
        self._c = self._b - GOLDEN * (self._b - self._a)
        self._d = self._a + GOLDEN * (self._b - self._a)
        self._choice: int | None = None
        self._best: int | None = None
        self.outcome = ""  # one line: what the search decided and why
        self.phase = BASELINE if self.incumbent is not None and incumbent_throughput is None else SEARCH
        self._pending: int | None = None
        self._advance()

    # ---- public interface -------------------------------------------------------------

    def ask(self) -> int | None:
        """The next rate to measure in interrupts/s (0 = adaptive), or None once converged."""
        return self._pending

    def tell(self, itr: float, throughput: float, cpu_per_bit: float | None = None,
             scale: float | None = None, interrupt_rate: float | None = None) -> None:
        """Record the throughput measured at the rate ask() returned last (and, when known, the
        CPU seconds it cost per bit delivered: the CPU rule needs it; the scale of its noise,
        e.g. the bits received when `throughput` is what of them reached the applications; and
        the interrupts/s it ran at, which for the incumbent is its cost when none was given)."""
        if self._pending is None:
            raise ValueError(f"tell({itr!r}) after the search converged; start a new search")
        if int(round(itr)) != self._pending:
            raise ValueError(f"tell({itr!r}) does not match the rate asked, {self._pending}")
        if not (math.isfinite(throughput) and throughput >= 0):
            raise ValueError(f"throughput must be a finite number >= 0, got {throughput!r}")
        if scale is not None and not (math.isfinite(scale) and scale >= 0):
            raise ValueError(f"scale must be a finite number >= 0, got {scale!r}")
        self.history.append(Probe(self._pending, float(throughput)))
        cpb_ok = cpu_per_bit is not None and math.isfinite(cpu_per_bit) and cpu_per_bit > 0
        if self.phase in (BASELINE, RECHECK):
            if scale is not None:
                self._incumbent_scales.append(float(scale))
            if self._measure_cost and interrupt_rate is not None and math.isfinite(interrupt_rate):
                self._incumbent_rates.append(max(0.0, float(interrupt_rate)))
                self.incumbent_cost = sum(self._incumbent_rates) / len(self._incumbent_rates) or None
            if cpb_ok:
                assert cpu_per_bit is not None
                self._incumbent_cpb.append(cpu_per_bit)
            self._incumbent_samples.append(float(throughput))
            # Judged as the probes are: by its lowest window when pessimistic (else a lucky
            # incumbent window would keep the incumbent against better, re-measured probes).
            self.incumbent_throughput = (min(self._incumbent_samples) if self.pessimistic and not self._incumbent_scales
                                         else sum(self._incumbent_samples) / len(self._incumbent_samples))
            if self.phase == RECHECK:
                self._finish()
                self.phase = DONE
                self._pending = None
                return
            self.phase = SEARCH
        else:
            self._samples.setdefault(self._pending, []).append(float(throughput))
            if scale is not None:
                self._scales.setdefault(self._pending, []).append(float(scale))
            if interrupt_rate is not None and math.isfinite(interrupt_rate):
                self._rates.setdefault(self._pending, []).append(max(0.0, float(interrupt_rate)))
            if cpb_ok:
                assert cpu_per_bit is not None
                self._cpb.setdefault(self._pending, []).append(cpu_per_bit)
        self._advance()

    @property
    def converged(self) -> bool:
        return self.phase == DONE

    @property
    def best(self) -> int | None:
        """The chosen rate once converged; before that the best measured so far."""
        if self.phase == DONE:
            return self._best
        if not self._samples:
            return self.incumbent
        return max(self._samples, key=lambda r: (self.score(r), -r))

    @property
    def probes(self) -> int:
        """Measurements told so far, the incumbent's included."""
        return len(self.history)

    @property
    def bracket(self) -> tuple[float, float]:
        """The current bracket in interrupts/s."""
        return (math.exp(self._a), math.exp(self._b))

    def expected_probes(self) -> int:
        """Probes so far plus the ones a noise-free run still needs (for progress lines)."""
        if self.phase == DONE:
            return self.probes
        steps = self._steps_left()
        remaining = steps + 1  # and the confirmation
        if self.phase == BASELINE:
            remaining += 1 + 2  # the incumbent, then both first interior points
        elif self.phase == SEARCH:
            remaining += sum(1 for p in (self._c, self._d) if self._rate(p) not in self._samples)
        return min(self.max_probes, self.probes + remaining)

    def mean(self, itr: int) -> float:
        values = self._samples[itr]
        return sum(values) / len(values)

    def score(self, itr: int) -> float:
        """What a rate is credited with when choosing: its lowest measurement when
        ``pessimistic`` (a window lifted by a burst or by a neighbour's probe freeing the port
        must not win; re-measuring a point can only make its claim more modest), else its mean;
        always its mean when its values were told with a scale (a remainder swings both ways)."""
        values = self._samples[itr]
        if self.pessimistic and not self._scales.get(itr):
            return min(values)
        return sum(values) / len(values)

    def scores(self) -> dict[int, float]:
        return {r: self.score(r) for r in sorted(self._samples)}

    # ---- internals --------------------------------------------------------------------

    def _rate(self, x: float) -> int:
        rate = math.exp(x)
        if self._quantize is not None:
            rate = self._quantize(rate)
        return int(round(rate))

    @property
    def _delay_floor(self) -> float:
        """The lowest rate the delay bound allows (one interrupt every max_interval_us)."""
        return 1e6 / self.max_interval_us

    def _spare(self, keep: int = 0) -> bool:
        """Whether one more probe fits the budget with `keep` probes still reserved after it."""
        return self.probes + 1 + keep <= self.max_probes

    def _narrow_enough(self) -> bool:
        lo, hi = math.exp(self._a), math.exp(self._b)
        return (
            not self._spare(keep=1)
            or hi - lo <= self.tolerance
            or hi / lo <= 1.0 + self.rel_tolerance
            or self._rate(self._c) == self._rate(self._d)
        )

    def _unmeasured_step(self) -> int | None:
        """When both interior points fall on one hardware step, the bracket may still hold a
        few other steps the cuts never reached (high rates are 1, 2, 3 ... 2.048-us steps):
        measure those nearest the best so far, a bounded number of them."""
        if self._quantize is None or self._rate(self._c) != self._rate(self._d):
            return None
        if self._scans_left <= 0 or not self._spare(keep=1):
            return None
        grid = {self._rate(self._a + (self._b - self._a) * i / 32.0) for i in range(33)}
        lo, hi = math.exp(self._a), math.exp(self._b)
        todo = [r for r in grid if r not in self._samples and lo * 0.999 <= r <= hi * 1.001]
        if not todo:
            return None
        self._scans_left -= 1
        centre = math.log(self.best or self._rate(self._c))
        return min(todo, key=lambda r: abs(math.log(r) - centre))

    def _steps_left(self) -> int:
        if self.phase not in (BASELINE, SEARCH) or self._narrow_enough():
            return 0
        width = self._b - self._a
        centre = math.exp((self._a + self._b) / 2.0)
        # Target log-width: whichever stop rule bites first near the bracket's centre.
        target = max(math.log1p(self.rel_tolerance), math.log1p(self.tolerance / centre))
        if width <= target:
            return 0
        return max(0, math.ceil(math.log(width / target) / -math.log(GOLDEN)) - 1)

    def _advance(self) -> None:
        """Move the state machine on until it needs a measurement or is done."""
        while True:
            if self.phase == BASELINE:
                self._pending = self.incumbent
                return
            if self.phase == SEARCH:
                low_end = self._low_end()
                if low_end is not None:
                    self._pending = low_end
                    return
                if self._narrow_enough():
                    if not self._samples:  # a bracket narrow from the start: measure its middle
                        self._pending = self._rate((self._a + self._b) / 2.0)
                        return
                    gap = self._unmeasured_step()
                    if gap is not None:
                        self._pending = gap
                        return
                    self._choice = self._select()
                    self.phase = CONFIRM
                    continue
                need = self._search_step()
                if need is not None:
                    self._pending = need
                    return
                continue
            if self.phase == CONFIRM:
                assert self._choice is not None
                confirmed = len(self._samples.get(self._choice, ())) >= 2
                if not confirmed and self._confirms_left > 0 and self._spare():
                    self._confirms_left -= 1
                    self._pending = self._choice
                    return
                # The re-measurement may show the choice was a lucky sample: choose again.
                again = self._select()
                if (again != self._choice and self._confirms_left > 0 and len(self._samples[again]) < 2
                        and self._spare()):
                    self._choice = again
                    continue
                self._choice = self._unless_lucky(again, self._choice)
                self.phase = EDGE
                continue
            if self.phase == EDGE:
                assert self._choice is not None
                self._choice = self._unless_lucky(self._select(), self._choice)
                lower = self._low_edge(self._choice)
                if lower is not None:
                    self._pending = lower
                    return
                lower = self._edge_candidate(self._choice)
                if lower is not None and self._edge_left > 0 and self._spare():
                    self._edge_left -= 1
                    self._pending = lower
                    return
                if self._needs_recheck():
                    self.phase = RECHECK
                    self._pending = self.incumbent
                    return
                self.phase = DONE
                self._finish()
                self._pending = None
                return
            self._pending = None
            return

    def _low_edge(self, choice: int) -> int | None:
        """The range's lowest rate (the delay bound's), once, when the choice is on a wide
        plateau and nothing that low was measured; beyond the budget by one if need be."""
        if self._low_edge_left <= 0 or self.plateau_margin <= 0:
            return None
        means = self.scores()
        floor = max(self.low, self._delay_floor)
        rate = self._rate(math.log(floor))
        if rate < floor * 0.999:
            rate = self._rate(math.log(floor) + math.log1p(self.rel_tolerance) / 4)
        if rate >= choice or rate in means or not self._wide_plateau(choice, means, max(means.values())):
            return None
        self._low_edge_left = 0
        if not self._spare():
            if self.config.strict_budget:
                return None
            self.max_probes += 1
        return rate

    def _edge_candidate(self, choice: int) -> int | None:
        """On a plateau, the rate halfway (in log) between the choice and the next measured rate
        below it, or one bracket tolerance below when nothing lower was measured."""
        means = self.scores()
        top = max(means.values())
        floor = max(self.low, self._delay_floor)
        if not self._wide_plateau(choice, means, top):
            return None  # a peak, not a plateau
        below = [r for r in means if r < choice]
        target = math.log(max(below)) if below else math.log(choice / (1.0 + self.rel_tolerance))
        candidate = self._rate((math.log(choice) + max(target, math.log(floor))) / 2.0)
        if candidate >= choice or candidate < floor * 0.999 or candidate in means:
            return None
        return candidate

    def _needs_recheck(self) -> bool:
        """The incumbent would veto the result on one measurement (as better, as as good for
        fewer interrupts, or by the CPU rule as cheaper per bit): measure it once more. An
        adaptive incumbent moves with its own state, so one window of it is the least reliable
        number in the search. When the budget is spent this one probe goes beyond it: a veto
        must not rest on one window."""
        if not self._recheck or self.incumbent is None or self.incumbent_throughput is None:
            return False
        if len(self._incumbent_samples) != 1 or self._choice == self.incumbent:
            return False
        assert self._choice is not None
        value, inc = self.score(self._choice), self.incumbent_throughput
        cost = self.incumbent_cost if self.incumbent_cost else (self.incumbent or None)
        costlier = cost is not None and self._cost(self._choice) > cost * (1.0 + self.margin) and inc > 0
        vetoes = (value < inc * (1.0 - self.harm_margin)
                  or (costlier and value / inc - 1.0 < self.cost_margin)
                  or self._cpu_rule_vetoes(self._choice, inc))
        if vetoes and not self._spare():
            if self.config.strict_budget:
                return False
            self.max_probes += 1
        return vetoes

    def _cost(self, itr: int) -> float:
        """The interrupts/s a probed rate ran at, as the incumbent's cost is measured; the rate
        itself when the host could not count them. A rate is a ceiling: a load that asks for
        fewer interrupts (small packets, request/response) runs below it, and comparing the
        ceiling with the incumbent's measured rate would count interrupts that never came."""
        rates = self._rates.get(itr)
        return sum(rates) / len(rates) if rates else float(itr)

    def _scale(self, itr: int) -> float:
        values = self._scales.get(itr)
        return sum(values) / len(values) if values else 0.0

    def _overloaded(self) -> bool:
        """Whether the incumbent's applications got less than OVERLOADED of what it received."""
        if not self._incumbent_scales or not self._incumbent_samples:
            return False
        scale = sum(self._incumbent_scales) / len(self._incumbent_scales)
        got = sum(self._incumbent_samples) / len(self._incumbent_samples)
        return scale > 0 and got < OVERLOADED * scale

    def _low_end(self) -> int | None:
        """The range's lowest rate, once, for an overloaded receiver (see the module's docstring)."""
        if self._low_end_checked or not self._overloaded():
            return None
        self._low_end_checked = True
        rate = self._rate(math.log(self.low))
        if rate in self._samples or rate == self.incumbent:
            return None
        if self.config.strict_budget:
            return rate if self._spare(keep=3) else None
        self.max_probes += 1  # a candidate beside the golden section's, not one of its steps
        return rate

    def _search_step(self) -> int | None:
        """One golden-section comparison; returns a rate to measure, or None after a cut."""
        rc, rd = self._rate(self._c), self._rate(self._d)
        if rc not in self._samples:
            return rc
        if rd not in self._samples:
            return rd
        mc, md = self.mean(rc), self.mean(rd)
        noise = self._noise(rc, rd, mc, md)
        if md - mc > noise:
            self._cut_low()
        elif mc - md > noise:
            self._cut_high()
        elif (self._step_repeats < REPEATS_PER_STEP and self._repeats_left > 0
              and self._spare(keep=2)):
            # Inside the noise margin: measure again rather than follow noise. The point
            # with fewer samples first; on equal counts the one measured longer ago.
            self._step_repeats += 1
            self._repeats_left -= 1
            return min((rc, rd), key=lambda r: (len(self._samples[r]), self._last_told(r)))
        elif self._ties_up:
            # Still a tie, under the latency objective: keep the upper part, whose shorter
            # coalescing delay the throughput could not show.
            self._cut_low()
        else:
            # Still a tie: a plateau. Keep the lower part, which costs fewer interrupts.
            self._cut_high()
        self._step_repeats = 0
        return None

    def _last_told(self, itr: int) -> int:
        for i in range(len(self.history) - 1, -1, -1):
            if self.history[i].itr == itr:
                return i
        return -1

    def _cut_low(self) -> None:
        """The maximum lies in [c, b]: drop [a, c); d survives as the new c."""
        self._a, self._c = self._c, self._d
        self._d = self._a + GOLDEN * (self._b - self._a)

    def _cut_high(self) -> None:
        """The maximum lies in [a, d]: drop (d, b]; c survives as the new d."""
        self._b, self._d = self._d, self._c
        self._c = self._b - GOLDEN * (self._b - self._a)

    def _select(self) -> int:
        """Lowest measured rate within the plateau margin of the best, above the latency floor."""
        means = self.scores()
        top = max(means.values())
        floor = self._delay_floor
        ties = self._overloaded_ties(means)
        noisy = self._knee_ties(means)
        eligible = [r for r, m in means.items()
                    if ((m >= top * (1.0 - self.plateau_margin) or r in noisy) and r >= floor) or r in ties]
        if not eligible:
            return max(means, key=lambda r: (means[r], -r))
        # Exact measurements keep the result within plateau_margin of the best (never the noise
        # margin, which only decides whether a difference is re-measured).
        return max(eligible) if self._ties_up else min(eligible)

    def _knee_ties(self, scores: dict[int, float]) -> set[int]:
        """The rates short of the plateau margin by less than their noise: each one's mean log
        throughput against the best-scoring rate's, knee_z standard errors of the difference
        with the deviation pooled from the search's repeats. Windows that swing by more than the
        margin cannot tell the knee from the best, and fewer interrupts is the objective's tie."""
        z = self.config.knee_z
        if z <= 0 or self.plateau_margin <= 0 or self._ties_up:
            return set()
        spread = self.spread()
        best = max(scores, key=lambda r: (scores[r], -r))
        theirs = [math.log(v) for v in self._samples[best] if v > 0]
        if spread is None or self._scales.get(best) or not theirs:
            return set()
        top = sum(theirs) / len(theirs) + math.log1p(-self.plateau_margin)
        ties = set()
        for itr in scores:
            ours = [math.log(v) for v in self._samples[itr] if v > 0]
            if itr == best or self._scales.get(itr) or not ours:
                continue
            if top - sum(ours) / len(ours) <= z * spread * math.sqrt(1.0 / len(ours) + 1.0 / len(theirs)):
                ties.add(itr)
        return ties

    def _overloaded_ties(self, scores: dict[int, float]) -> set[int]:
        """On an overloaded receiver, the rates told with a scale (what reached the applications, a
        small remainder of what arrived) that measure the best's throughput within their noise:
        the search's own tie rule, not the plateau's. Between such rates the one with fewer
        interrupts leaves the guest more CPU for its sockets. Only where the objective trades
        throughput for fewer interrupts at all (a plateau margin; `latency` has none)."""
        if self.plateau_margin <= 0 or not self._overloaded():
            return set()
        best = max(scores, key=lambda r: (scores[r], -r))
        top = scores[best]
        return {r for r, ours in scores.items()
                if self._scales.get(r) and top - ours <= self._noise(r, best, ours, top)}

    def _noise(self, a: int, b: int, value_a: float, value_b: float) -> float:
        """What two rates' values must differ by to tell them apart: the noise margin of the smaller
        value, or of the larger scale when values were told with one."""
        return self.margin * max(min(value_a, value_b), self._scale(a), self._scale(b))

    def _unless_lucky(self, again: int, confirmed: int) -> int:
        """`again`, unless it is a single measurement that outscores a confirmed choice by less
        than the noise of values told with a scale (a small remainder of a large count, whose
        windows swing the most): with no budget left to measure it again, one lucky window must
        not displace a rate measured twice (the pessimistic score favours rates measured once).
        Without a scale the choice stands."""
        if again == confirmed or len(self._samples.get(again, ())) >= 2 or len(self._samples.get(confirmed, ())) < 2:
            return again
        if not (self._scales.get(again) or self._scales.get(confirmed)):
            return again
        ours, theirs = self.score(again), self.score(confirmed)
        noise = self._noise(again, confirmed, ours, theirs)
        return confirmed if 0.0 <= ours - theirs <= noise else again

    def _wide_plateau(self, choice: int, scores: dict[int, float], top: float) -> bool:
        """Whether throughput stays within the objective's margin (at least the noise margin) from
        `choice` up to at least PLATEAU_WIDTH times it (a peak's rounded top is narrower)."""
        flat = max(self.margin, self.plateau_margin)
        return any(r >= choice * PLATEAU_WIDTH and m >= top * (1.0 - flat) for r, m in scores.items())

    def _finish(self) -> None:
        assert self._choice is not None
        chosen = self._choice
        inc = self.incumbent_throughput
        if self.incumbent is None or inc is None:
            self._best = chosen
            self.outcome = f"best {chosen}/s"
            return
        if chosen != self.incumbent and self.score(chosen) < inc * (1.0 - self.harm_margin):
            # The plateau rule may reach for an edge that measures just below the incumbent:
            # the lowest rate that holds the incumbent's throughput is still a choice.
            floor = self._delay_floor
            holding = [r for r, m in self.scores().items() if m >= inc * (1.0 - self.harm_margin) and r >= floor]
            if holding:
                chosen = min(holding)
        value = self.score(chosen)
        gain = (value / inc - 1.0) if inc > 0 else math.inf
        cost = self.incumbent_cost if self.incumbent_cost else (self.incumbent or None)
        costlier = cost is not None and self._cost(chosen) > cost * (1.0 + self.margin) and inc > 0
        if costlier and gain < self.cost_margin:
            # More interrupts for a gain inside the noise margin is not a decision: the
            # incumbent keeps the throughput at a lower CPU cost.
            self._best = self.incumbent
            self.outcome = (
                f"kept incumbent {itr_label(self.incumbent)}: {chosen}/s gains only {_pct(gain)} "
                + (f"(inside the {self.margin:.0%} noise margin)" if self.cost_margin == self.margin
                   else f"(more interrupts must gain {self.cost_margin:.0%})")
            )
        elif chosen == self.incumbent or value >= inc * (1.0 - self.harm_margin):
            self._best = chosen
            self.outcome = f"best {chosen}/s ({_pct(gain)} vs incumbent)"
            self._cpu_rule(inc)
        else:
            self._best = self.incumbent
            self.outcome = (
                f"kept incumbent {itr_label(self.incumbent)}: best probe {chosen}/s "
                f"measured {_pct(gain)}"
            )

    def spread(self) -> float | None:
        """The standard deviation of one window's log throughput, pooled over every rate this
        search measured more than once (the incumbent included); None before any repeat. A
        repeat is the same setting at another time, so what differs is the load and the host,
        not the setting: the noise any two rates' comparison carries."""
        groups = [v for v in self._samples.values() if len(v) >= 2]
        if len(self._incumbent_samples) >= 2:
            groups.append(self._incumbent_samples)
        squares, dof = 0.0, 0
        for values in groups:
            logs = [math.log(v) for v in values if v > 0]
            if len(logs) < 2:
                continue
            centre = sum(logs) / len(logs)
            squares += sum((x - centre) ** 2 for x in logs)
            dof += len(logs) - 1
        return math.sqrt(squares / dof) if dof else None

    def cpu_per_bit(self, itr: int) -> float | None:
        """The mean CPU seconds per bit measured at a rate (the incumbent's for its rate), if any."""
        values = self._incumbent_cpb if itr == self.incumbent and itr not in self._cpb else self._cpb.get(itr)
        return sum(values) / len(values) if values else None

    def _cpu_rule(self, inc: float) -> None:
        """A result that costs more CPU per bit than the incumbent (the guest's own adaptive ITR
        when the search started there) must gain throughput worth cpu_worth times the relative
        rise in CPU per bit; otherwise the best measured rate the rule accepts (no more CPU per
        bit, or a gain worth its rise) that holds the incumbent's throughput wins, or the
        incumbent stays."""
        if self._best is None or self.incumbent is None or not self._cpu_rule_vetoes(self._best, inc):
            return
        rise = self._cpu_rise(self._best)
        assert rise is not None
        gain = self.score(self._best) / inc - 1.0
        accepted = [r for r in self._samples if r != self.incumbent and self.cpu_per_bit(r) is not None
                    and self.score(r) >= inc * (1.0 - self.harm_margin) and not self._cpu_rule_vetoes(r, inc)]
        was = self._best
        why = f"{was}/s gains {_pct(gain)} for {_pct(rise)} CPU per bit"
        if rise <= 0:
            why += f" (inside the {self.margin:.0%} noise margin)"
        if accepted:
            self._best = max(accepted, key=lambda r: (self.score(r), -r))
            self.outcome = f"best {self._best}/s: {why} against the incumbent"
        else:
            self._best = self.incumbent
            self.outcome = f"kept incumbent {itr_label(self.incumbent)}: {why}"

    def _cpu_rise(self, itr: int) -> float | None:
        """The relative rise in CPU per bit of a rate over the incumbent's, when both are measured."""
        base = sum(self._incumbent_cpb) / len(self._incumbent_cpb) if self._incumbent_cpb else None
        ours = self.cpu_per_bit(itr)
        return None if base is None or ours is None else ours / base - 1.0

    def _cpu_rule_vetoes(self, choice: int, inc: float) -> bool:
        """Whether the CPU rule would keep the incumbent's CPU per bit against `choice`."""
        worth = self.config.cpu_worth
        if worth is None or self.incumbent is None or choice == self.incumbent or inc <= 0:
            return False
        rise = self._cpu_rise(choice)
        if rise is None:
            return False
        gain = self.score(choice) / inc - 1.0
        if math.isinf(worth):
            # CPU per bit first: a saving or a gain inside the noise margin is not a decision.
            return not (rise <= -self.margin or (rise <= 0 and gain >= self.margin))
        return rise > 0 and gain < worth * rise + self.margin


def _pct(x: float) -> str:
    return "new" if math.isinf(x) else f"{x * 100:+.1f}%"


# ---- brackets ---------------------------------------------------------------------------


def bracket_from_capabilities(caps: Capabilities) -> tuple[int, int]:
    """The VF search bracket: what the host says the tuner may ask for."""
    low, high = int(caps.itr_min), int(caps.itr_max)
    if not 0 < low < high:
        raise ValueError(f"capabilities give an empty ITR bracket: itr_min={low}, itr_max={high}")
    return low, high
