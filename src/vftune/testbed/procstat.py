"""Whole-machine CPU time from /proc/stat, as the testbed measures it around a window.

The aggregate ``cpu`` line holds ticks since boot: user nice system idle iowait irq softirq
steal guest guest_nice (later kernels may add fields; older ones have fewer). Busy time is all
but idle and iowait; steal is kept apart because on a shared virtual machine it is CPU another
tenant took, not work this host did.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


class ProcStatError(ValueError):
    """The text is not a /proc/stat this parser understands."""


@dataclass(frozen=True)
class CpuTicks:
    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int
    cpus: int

    @property
    def busy(self) -> int:
        return self.user + self.nice + self.system + self.irq + self.softirq

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.iowait + self.steal


@dataclass(frozen=True)
class CpuUse:
    """CPU over a window in cores (1.0 = one CPU busy for the whole window)."""

    busy: float
    softirq: float
    steal: float
    cpus: int

    def as_dict(self) -> dict[str, float]:
        return {"busy": round(self.busy, 4), "softirq": round(self.softirq, 4), "steal": round(self.steal, 4)}


def parse_proc_stat(text: str) -> CpuTicks:
    """The aggregate line and the number of per-CPU lines of a /proc/stat text."""
    agg: list[int] | None = None
    cpus = 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            parts = line.split()[1:]
            if len(parts) < 4:
                raise ProcStatError(f"/proc/stat: aggregate cpu line has {len(parts)} fields, need 4")
            try:
                agg = [int(p) for p in parts]
            except ValueError:
                raise ProcStatError(f"/proc/stat: non-numeric field in {line.strip()!r}") from None
            if any(v < 0 for v in agg):
                raise ProcStatError(f"/proc/stat: negative tick count in {line.strip()!r}")
        elif line.startswith("cpu") and line[3:4].isdigit():
            cpus += 1
    if agg is None:
        raise ProcStatError("/proc/stat: no aggregate 'cpu' line")
    user, nice, system, idle, iowait, irq, softirq, steal = (agg + [0] * len(_FIELDS))[: len(_FIELDS)]
    return CpuTicks(user, nice, system, idle, iowait, irq, softirq, steal, cpus=max(cpus, 1))


def cpu_use(before: CpuTicks, after: CpuTicks) -> CpuUse:
    """Cores busy, in softirq and stolen between two readings (shares of elapsed ticks times CPUs)."""
    total = after.total - before.total
    if total <= 0:
        return CpuUse(0.0, 0.0, 0.0, after.cpus)
    scale = after.cpus / total
    return CpuUse(
        busy=max(0, after.busy - before.busy) * scale,
        softirq=max(0, after.softirq - before.softirq) * scale,
        steal=max(0, after.steal - before.steal) * scale,
        cpus=after.cpus,
    )


def read_proc_stat(path: str = "/proc/stat") -> CpuTicks:
    with open(path, encoding="ascii") as f:
        return parse_proc_stat(f.read())
