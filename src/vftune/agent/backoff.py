"""Failing writes back off: per (target, setting), a capped exponential delay between tries.

A write the host refuses (a VF whose driver never negotiated per-VF ITR, a read-only sysfs
file) would otherwise be retried every tick, with a WARNING line and a decision row each time.
Here the first failure is reported, retries wait 5 s, 10 s, 20 s ... up to 15 min on the host's
clock, and only a change of state (ok -> failing, failing -> ok) is reported again.
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_S = 5.0
CAP_S = 900.0


@dataclass
class _Failing:
    failures: int
    retry_at: float
    error: str | None


class WriteBackoff:
    def __init__(self, base_s: float = BASE_S, cap_s: float = CAP_S) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self._failing: dict[tuple[str, str], _Failing] = {}

    def may_try(self, target: str, setting: str, now: float) -> bool:
        state = self._failing.get((target, setting))
        return state is None or now >= state.retry_at

    def failed(self, target: str, setting: str, now: float, error: str | None) -> bool:
        """Record a failure; True if it is news (the first one, or a different error)."""
        key = (target, setting)
        state = self._failing.get(key)
        failures = 1 if state is None else state.failures + 1
        delay = min(self.cap_s, self.base_s * 2 ** min(failures - 1, 30))
        self._failing[key] = _Failing(failures, now + delay, error)
        return state is None or state.error != error

    def succeeded(self, target: str, setting: str) -> bool:
        """Record a success; True if the setting had been failing (a change of state)."""
        return self._failing.pop((target, setting), None) is not None

    def failing(self) -> dict[tuple[str, str], int]:
        """(target, setting) -> consecutive failures, for the API and tests."""
        return {key: state.failures for key, state in self._failing.items()}
