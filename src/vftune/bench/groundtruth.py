"""The simulated host as the bench runs it: ground truth per VF, and guest-run moderation.

MeasuredSim is the simulator (HostSim) plus two things the bench needs and a host agent never
sees:
- a tally per VF and per phase segment of the run, taken every simulator step from the model's
  own rates: bits the VF's counters count and bits its application gets, seconds, and for request/response traffic the
  transactions and their response time (mean, and p99 as the transaction-weighted mean of each
  step's p99);
- guest-run moderation: a policy that runs inside the guest's driver (ixgbevf's adaptive ITR,
  Linux DIM) acts per interrupt on exact ring counters, not on the host's 2-s VF counter
  refresh. It takes the slot of the guest's adaptive ITR in the simulator (SimVf.adaptive) and
  is fed every step; guest-run pairs step the simulator every GUEST_STEP_S (0.25 s) instead of
  the host's 0.5 s, so the guest reacts within a quarter of a second of a change in load.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vftune.sim.engine import HostSim
from vftune.sim.workload import HostSpec

GUEST_STEP_S = 0.25


@dataclass
class Tally:
    """One VF over one phase segment."""

    seconds: float = 0.0
    bits: float = 0.0  # what the VF's counters count (frames, both directions)
    delivered_bits: float = 0.0  # IP bits that reach the guest's application
    interrupts: float = 0.0
    transactions: float = 0.0
    latency_s: float = 0.0  # sum of mean response time x transactions
    p99_s: float = 0.0  # sum of p99 x transactions
    cpu_s: float = 0.0  # the VF's network CPU: its guest's receive path and the host's irq work
    app_lost_s: float = 0.0  # seconds x the share of its wanted CPU the guest's application did not get

    def add(self, rates: Any, h: float) -> None:
        self.seconds += h
        self.app_lost_s += (1.0 - rates.app_progress) * h
        self.bits += (rates.rx_Bps + rates.tx_Bps) * 8.0 * h
        self.delivered_bits += rates.delivered_bps * h
        self.interrupts += rates.interrupts_per_s * h
        self.cpu_s += (getattr(rates, "guest_cpu", 0.0) + getattr(rates, "host_cpu", 0.0)) * h
        mean = getattr(rates, "latency_mean_s", None)
        if mean:
            n = rates.tx_pps * h  # one response per transaction
            self.transactions += n
            self.latency_s += mean * n
            self.p99_s += (getattr(rates, "latency_p99_s", None) or mean) * n

    @property
    def bps(self) -> float:
        return self.bits / self.seconds if self.seconds else 0.0

    @property
    def latency_mean_s(self) -> float | None:
        return self.latency_s / self.transactions if self.transactions else None

    @property
    def latency_p99_s(self) -> float | None:
        return self.p99_s / self.transactions if self.transactions else None


class MeasuredSim(HostSim):
    def __init__(self, spec: HostSpec, seed: int, segments: list[tuple[float, float]], step: float,
                 patched_counters: bool | None, guest: Callable[[], Any] | None = None) -> None:
        super().__init__(spec, seed, step=step, patched_counters=patched_counters)
        self.segments = segments
        self._starts = [a for a, _ in segments]
        self.tally = [[Tally() for _ in segments] for _ in spec.vfs]
        self.guest_run = []
        if guest is not None:
            for i, vf in enumerate(spec.vfs):
                if vf.guest is not None:
                    self.vfs[i].adaptive = guest()
                    self.guest_run.append(i)

    def _step(self, h: float) -> None:
        k = max(0, bisect.bisect_right(self._starts, self.t + 1e-9) - 1)
        super()._step(h)
        for i, vf in enumerate(self.vfs):
            if vf.last is not None:
                self.tally[i][k].add(vf.last, h)
        for i in self.guest_run:
            observe = getattr(self.vfs[i].adaptive, "observe", None)
            last = self.vfs[i].last
            if observe is not None and last is not None and self.vfs[i].itr_request == 0:
                observe(last, h)
