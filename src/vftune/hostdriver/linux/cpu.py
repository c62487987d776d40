"""CPU time: the host's irq + softirq from /proc/stat, and each guest's QEMU process.

On the real /proc the QEMU process is read through psutil; under another procfs root
(a fixture tree, a container's view) the same numbers come from <root>/<pid>/stat, because
psutil can only be pointed elsewhere through a process-wide global.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import psutil

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.sysfs_io import read_source

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_COUNT = re.compile(r"[0-9]{1,20}")


@dataclass(frozen=True)
class HostCpu:
    irq_seconds: float  # irq + softirq over all CPUs
    cpus: int


def _count(text: str, what: str) -> int:
    if not _COUNT.fullmatch(text):
        raise HostError(f"{what}: {text[:30]!r} is not a count")
    return int(text)


def parse_proc_stat(text: str, where: str = "/proc/stat") -> HostCpu:
    """Raises HostError naming `where` and the problem; nothing else."""
    irq = None
    cpus = 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = line.split()
            if len(fields) < 8:
                raise HostError(f"{where}: aggregate 'cpu' line has {len(fields) - 1} fields, not >= 7")
            # user nice system idle iowait irq softirq ...
            irq = (_count(fields[6], f"{where} irq") + _count(fields[7], f"{where} softirq")) / CLOCK_TICKS
        elif line.startswith("cpu"):
            cpus += 1
    if irq is None:
        raise HostError(f"{where}: no aggregate 'cpu' line")
    return HostCpu(irq, max(cpus, 1))


def parse_pid_stat(text: str, where: str = "stat") -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (comm may hold spaces and parens).
    Raises HostError naming `where` and the problem; nothing else."""
    head, paren, tail = text.rpartition(")")
    after_comm = tail.split()
    # Fields after comm start at field 3 (state); utime and stime are fields 14 and 15.
    if not paren or len(after_comm) < 13:
        raise HostError(f"{where}: not a /proc/<pid>/stat line")
    return (_count(after_comm[11], f"{where} utime") + _count(after_comm[12], f"{where} stime")) / CLOCK_TICKS


class ProcessCpu:
    def __init__(self, procfs_root: Path) -> None:
        self.procfs_root = procfs_root
        self._use_psutil = os.path.realpath(procfs_root) == "/proc"
        self._procs: dict[int, psutil.Process] = {}

    def seconds(self, pid: int) -> float:
        if self._use_psutil:
            try:
                proc = self._procs.get(pid)
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                t = proc.cpu_times()
                return float(t.user + t.system)
            except psutil.Error as exc:
                self._procs.pop(pid, None)
                raise HostError(f"process {pid}: {exc.__class__.__name__}") from None
        path = self.procfs_root / str(pid) / "stat"
        return parse_pid_stat(read_source(path), str(path))
