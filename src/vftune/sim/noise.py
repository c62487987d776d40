"""Seeded noise and burstiness, a pure function of (seed, stream, second).

Each stream (a VF or a PF's host traffic) gets per-second factors: a log-normal jitter of the
CPU capacity its receive path sees (other guest work, cache and frequency effects) and of its
offered load, times a two-state burst process (Markov, per second) on the load. Values are
generated in chunks keyed by (seed, stream, chunk), so they do not depend on how the clock was
stepped: the same seed gives the same numbers whatever the step or the agent's interval.
"""

from __future__ import annotations

import numpy as np

CHUNK_S = 256
BURST_ENTER = 0.03  # per second
BURST_LEAVE = 0.25


INCAST_STREAM = 20_000  # burst streams shared by an incast group start here


class NoiseStream:
    """`burst_stream`: draw the burst states from this stream instead of the VF's own, so the
    VFs of one incast group burst in the same seconds (their jitter stays their own)."""

    def __init__(self, seed: int, stream: int, sigma: float, burst_gain: float,
                 burst_stream: int | None = None) -> None:
        self.seed, self.stream = seed, stream
        self.burst_stream = burst_stream
        self.sigma, self.burst_gain = sigma, burst_gain
        self._chunk = -1
        self._capacity: list[float] = []
        self._load: list[float] = []

    def _fill(self, chunk: int) -> None:
        rng = np.random.default_rng([self.seed, self.stream, chunk])
        capacity = np.exp(self.sigma * rng.standard_normal(CHUNK_S) - self.sigma**2 / 2)
        load = np.exp(self.sigma * rng.standard_normal(CHUNK_S) - self.sigma**2 / 2)
        draws = rng.random(CHUNK_S)
        stationary = BURST_ENTER / (BURST_ENTER + BURST_LEAVE)
        bursting = bool(rng.random() < stationary)
        if self.burst_stream is not None:
            shared = np.random.default_rng([self.seed, self.burst_stream, chunk])
            draws = shared.random(CHUNK_S)
            bursting = bool(shared.random() < stationary)
        gains = np.empty(CHUNK_S)
        for i in range(CHUNK_S):
            bursting = draws[i] >= BURST_LEAVE if bursting else draws[i] < BURST_ENTER
            gains[i] = self.burst_gain if bursting else 1.0
        self._capacity = capacity.tolist()
        self._load = (load * gains).tolist()
        self._chunk = chunk

    def at(self, t: float) -> tuple[float, float]:
        """(capacity factor, load factor) for the second containing t."""
        second = int(t) if t >= 0 else 0
        chunk, offset = divmod(second, CHUNK_S)
        if chunk != self._chunk:
            self._fill(chunk)
        return self._capacity[offset], self._load[offset]


class NoNoise:
    """The expected values: what the steady-state sweep evaluates."""

    def at(self, t: float) -> tuple[float, float]:
        return 1.0, 1.0
