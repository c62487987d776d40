"""``bayesopt``: a black-box Bayesian optimiser of one VF's ITR, BayOp-style (Dong et al., 2025).

The strongest generic tuner a user could pick off the shelf: it knows nothing about interrupts,
only that throughput is some smooth function of the rate. It runs on the host, on the same
measurements as vftune (WindowMeter: a window between two fresh counter reads, at least
max(2 s, the counters' refresh period), after 1 s of settling), and:

1. measures the rate in force and INITIAL_POINTS rates spread evenly over log(rate);
2. fits a Gaussian process to throughput over x = ln(rate) (squared-exponential kernel; the
   length scale of the three in LENGTH_SCALES with the highest marginal likelihood; throughput
   scaled by its largest measurement; a noise term of NOISE_SD);
3. measures next the deliverable rate of highest expected improvement, until, after at least
   MIN_PROBES measurements, that improvement is below STOP_EI of the best measured throughput,
   or MAX_PROBES measurements are spent;
4. holds the measured rate whose posterior mean is highest, and starts again when the VF's
   throughput moves by more than LOAD_CHANGE from what it held (the median of its first
   REFERENCE_WINDOWS windows; CHANGE_WINDOWS windows running, the same way) or every RESTART_S
   seconds, as vftune's periodic restart does.
"""

from __future__ import annotations

import math

import numpy as np

from vftune.control.policy import VfPolicy
from vftune.control.tuner import WindowMeter
from vftune.itr import same_itr
from vftune.model import Capabilities, ItrDecision, VfSample
from vftune.sim.nic import I82599, NicProfile, profile_for_range
from vftune.sim.sweep import default_grid

INITIAL_POINTS = 3
MIN_PROBES = 8  # the budget BayOp-style tuners spend before they may stop early
MAX_PROBES = 12
STOP_EI = 0.001
NOISE_SD = 0.02
LENGTH_SCALES = (0.5, 1.0, 2.0)
LOAD_CHANGE = 0.3
CHANGE_WINDOWS = 3  # windows in a row beyond LOAD_CHANGE: neighbours' probes last one or two
REFERENCE_WINDOWS = 3
RESTART_S = 600.0
SETTLE_S = 1.0
WINDOW_S = 2.0
MIN_BPS = 1e6  # below this the VF is idle: nothing to tune


def _kernel(a: np.ndarray, b: np.ndarray, length: float) -> np.ndarray:
    out: np.ndarray = np.exp(-0.5 * ((a[:, None] - b[None, :]) / length) ** 2)
    return out


class GaussianProcess:
    """Zero-mean GP regression on standardised data, the length scale by marginal likelihood."""

    def __init__(self, x: list[float], y: list[float], noise_sd: float = NOISE_SD) -> None:
        self.x = np.asarray(x, dtype=float)
        y_arr = np.asarray(y, dtype=float)
        self.mean = float(y_arr.mean())
        self.y = y_arr - self.mean
        self.noise = noise_sd ** 2
        fits = [self._fit(length) for length in LENGTH_SCALES]
        self.length, self._chol, self._alpha, _ = max(fits, key=lambda f: f[3])

    def _fit(self, length: float) -> tuple[float, np.ndarray, np.ndarray, float]:
        k = _kernel(self.x, self.x, length) * self._signal() + self.noise * np.eye(len(self.x))
        chol = np.linalg.cholesky(k)
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, self.y))
        loglik = -0.5 * float(self.y @ alpha) - float(np.log(np.diag(chol)).sum())
        return length, chol, alpha, loglik

    def _signal(self) -> float:
        return max(float(np.var(self.y)), self.noise)

    def predict(self, xs: list[float]) -> tuple[np.ndarray, np.ndarray]:
        xq = np.asarray(xs, dtype=float)
        ks = _kernel(xq, self.x, self.length) * self._signal()
        mu = ks @ self._alpha + self.mean
        v = np.linalg.solve(self._chol, ks.T)
        var = np.maximum(self._signal() - (v * v).sum(axis=0), 1e-12)
        return mu, np.sqrt(var)


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    z = (mu - best) / sd
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    out: np.ndarray = (mu - best) * cdf + sd * pdf
    return out


class BayesSearch:
    """Ask/tell: which rate to measure next, and the answer once done."""

    def __init__(self, low: int, high: int, incumbent: int | None = None, nic: NicProfile = I82599) -> None:
        self.candidates = [r for r in default_grid(nic=nic) if low <= r <= high]
        logs = np.linspace(math.log(low), math.log(high), INITIAL_POINTS + 2)[1:-1]
        first = [nic.quantize(math.exp(v)) for v in logs]
        if incumbent and low <= incumbent <= high:
            first.insert(0, nic.quantize(incumbent))
        self._queue = list(dict.fromkeys(first))
        self.measured: dict[int, float] = {}
        self.best: int | None = None

    @property
    def probes(self) -> int:
        return len(self.measured)

    def ask(self) -> int | None:
        if self.best is not None:
            return None
        if self._queue:
            return self._queue[0]
        top = max(self.measured.values())
        scale = top if top > 0 else 1.0
        gp = self._gp(scale)
        untried = [r for r in self.candidates if r not in self.measured]
        if untried and self.probes < MAX_PROBES:
            mu, sd = gp.predict([math.log(r) for r in untried])
            ei = expected_improvement(mu, sd, 1.0)
            pick = int(np.argmax(ei))
            if ei[pick] >= STOP_EI or self.probes < MIN_PROBES:
                return untried[pick]
        rates = list(self.measured)
        mu, _ = gp.predict([math.log(r) for r in rates])
        self.best = rates[int(np.argmax(mu))]
        return None

    def _gp(self, scale: float) -> GaussianProcess:
        rates = list(self.measured)
        return GaussianProcess([math.log(r) for r in rates], [self.measured[r] / scale for r in rates])

    def tell(self, itr: int, throughput: float) -> None:
        if self._queue and self._queue[0] == itr:
            self._queue.pop(0)
        self.measured[itr] = throughput


class BayesOptPolicy(VfPolicy):
    name = "bayesopt"

    def __init__(self, pci: str, caps: Capabilities) -> None:
        self.pci = pci
        # The host's own NIC: its range and steps (a pro1000 reaches delays the 82599 cannot).
        self.nic = profile_for_range(caps.itr_min, caps.itr_max)
        self.low, self.high = self.nic.quantize(caps.itr_min), self.nic.quantize(caps.itr_max)
        self.meter = WindowMeter(max(WINDOW_S, caps.counter_refresh_s))
        self.search: BayesSearch | None = None
        self.probe: int | None = None
        self.searches = 0
        self._held_since = 0.0
        self._reference: list[float] = []
        self._moved: list[int] = []

    def step(self, s: VfSample) -> ItrDecision | None:
        if self.search is None or self.search.best is not None:
            return self._hold(s)
        w = self.meter.add(s)
        if w is None:
            return None
        assert self.probe is not None
        self.search.tell(self.probe, w.bps)
        return self._next(s)

    def _hold(self, s: VfSample) -> ItrDecision | None:
        if self.search is None:
            if s.throughput_bps < MIN_BPS:
                return None
            return self._start(s)
        w = self.meter.add(s)
        if s.t - self._held_since >= RESTART_S:
            return self._start(s)
        if w is None:
            return None
        if len(self._reference) < REFERENCE_WINDOWS:
            self._reference.append(w.bps)
            return None
        reference = sorted(self._reference)[len(self._reference) // 2]
        change = w.bps - reference
        way = (change > 0) - (change < 0) if abs(change) > LOAD_CHANGE * max(reference, MIN_BPS) else 0
        self._moved = self._moved + [way] if way and (not self._moved or self._moved[-1] == way) else ([way] if way else [])
        return self._start(s) if len(self._moved) >= CHANGE_WINDOWS else None

    def _start(self, s: VfSample) -> ItrDecision | None:
        self.search = BayesSearch(self.low, self.high, s.itr or None, self.nic)
        self.searches += 1
        return self._next(s)

    def _next(self, s: VfSample) -> ItrDecision | None:
        assert self.search is not None
        itr = self.search.ask()
        if itr is None:
            best = self.search.best
            assert best is not None
            self._held_since, self._reference, self._moved = s.t, [], []
            self.meter.start(s.t, SETTLE_S)
            if same_itr(best, s.itr):
                return None
            return ItrDecision(best, f"bayesopt: holds {best}/s after {self.search.probes} probes")
        self.probe = itr
        moved = not same_itr(itr, s.itr)
        self.meter.start(s.t, SETTLE_S if moved else 0.0)
        if moved:
            return ItrDecision(itr, f"bayesopt probe {self.search.probes + 1}: {itr}/s")
        return None

    def state(self) -> dict[str, object]:
        search = self.search
        return {"searches": self.searches, "probes": search.probes if search else 0,
                "best": search.best if search else None}

