"""``paper``: Wu & Wang's golden-section ITR search as printed.

Two fresh measurements per step in linear rate space, and their wrong-end bug kept (LABELLED:
it keeps High=TestHigh when the high point is better, so it walks away from a maximum),
restarted every 1000 interrupts.

Counters: these algorithms run per interrupt in a driver with exact counters; here they see
one VfSample per tick. They are fed only on samples whose counters were refreshed, with the
counts accumulated since the previous refresh, so stale per-VF counters do not fool them.
"""

from __future__ import annotations

from vftune.control.policy import VfPolicy
from vftune.control.tuner import WindowMeter
from vftune.itr import quantize_itr, same_itr
from vftune.model import Capabilities, ItrDecision, VfSample

CUT_RATE = 0.618


class PaperSearch:
    """Wu & Wang's HEURISTIC INTERRUPT COALESCING ALGORITHM line by line, as ask/tell.

    PAPER BUG KEPT ON PURPOSE: ``if ThptLow < ThptHigh then High = TestHigh`` discards the
    better (upper) side, so on a unimodal curve it converges away from the maximum. This
    class exists only as a labelled baseline; vftune's search is itr_search.ItrSearch.
    """

    literal_bug = "keeps High=TestHigh when ThptLow < ThptHigh (wrong end for a maximisation)"

    def __init__(self, low: float, high: float, accept_interval: float) -> None:
        if not 0 < low < high:
            raise ValueError(f"need 0 < low < high, got low={low!r}, high={high!r}")
        if not accept_interval > 0:
            raise ValueError(f"accept_interval must be > 0, got {accept_interval!r}")
        self.low, self.high, self.accept = float(low), float(high), float(accept_interval)
        self.probes = 0
        self._results: dict[str, float] = {}
        self._tests: tuple[int, int] | None = None
        self.best: int | None = None
        self._plan()

    def _plan(self) -> None:
        interval = self.high - self.low
        if interval > self.accept:
            test_low = self.low + (1 - CUT_RATE) * interval
            test_high = self.low + CUT_RATE * interval
            self._tests = (int(round(test_low)), int(round(test_high)))
            self._results = {}
        else:
            self._tests = None
            self.best = int(round((self.low + self.high) / 2))

    def ask(self) -> int | None:
        if self._tests is None:
            return None
        return self._tests[0] if "low" not in self._results else self._tests[1]

    def tell(self, itr: float, throughput: float) -> None:
        asked = self.ask()
        if asked is None or int(round(itr)) != asked:
            raise ValueError(f"tell({itr!r}) does not match the rate asked, {asked}")
        self.probes += 1
        self._results["low" if "low" not in self._results else "high"] = throughput
        if len(self._results) < 2:
            return
        assert self._tests is not None
        if self._results["low"] < self._results["high"]:
            self.high = self._tests[1]  # the paper's line, wrong end kept (see class doc)
        else:
            self.low = self._tests[0]
        self._plan()

    @property
    def converged(self) -> bool:
        return self._tests is None


class PaperPolicy(VfPolicy):
    """The paper's search on a VF, restarted every ``restart_interrupts`` interrupts."""

    name = "paper"

    def __init__(
        self,
        pci: str,
        caps: Capabilities,
        accept_interval: float = 1000.0,
        restart_interrupts: int = 1000,
        restart_intervals: int = 600,
        settle_s: float = 1.0,
        window_s: float = 2.0,
    ) -> None:
        self.pci = pci
        self.low, self.high = caps.itr_min, caps.itr_max
        self.accept = accept_interval
        self.restart_interrupts = restart_interrupts
        self.restart_intervals = restart_intervals
        self.settle_s = settle_s
        self.meter = WindowMeter(max(window_s, caps.counter_refresh_s))
        self.search: PaperSearch | None = None
        self.probe: int | None = None
        self.held = 0
        self.held_intervals = 0
        self.searches = 0

    def step(self, s: VfSample) -> ItrDecision | None:
        if self.search is None:
            return self._start(s)
        if self.search.converged:
            self.held_intervals += 1
            self.held += s.interrupts or 0
            if (s.interrupts is not None and self.held >= self.restart_interrupts) or (
                self.held_intervals >= self.restart_intervals
            ):
                return self._start(s)
            return None
        assert self.probe is not None
        w = self.meter.add(s)
        if w is None:
            return None
        self.search.tell(self.probe, w.bps)
        return self._next(s)

    def _start(self, s: VfSample) -> ItrDecision | None:
        self.search = PaperSearch(self.low, self.high, self.accept)
        self.searches += 1
        return self._next(s)

    def _next(self, s: VfSample) -> ItrDecision | None:
        assert self.search is not None
        itr = self.search.ask()
        if itr is None:
            best = self.search.best
            assert best is not None
            self.held, self.held_intervals = 0, 0
            if same_itr(best, s.itr):
                return None
            return ItrDecision(best, f"paper-literal converged: {best}/s after {self.search.probes} probes")
        # Tell the search the rate it asked for; the hardware runs the nearest step.
        self.probe = itr
        moved = not same_itr(quantize_itr(itr), s.itr)
        self.meter.start(s.t, self.settle_s if moved else 0.0)
        if moved:
            return ItrDecision(itr, f"paper-literal probe {self.search.probes + 1}: {itr}/s")
        return None
