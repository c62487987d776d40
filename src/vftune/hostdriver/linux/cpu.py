"""CPU time: the host's irq + softirq from /proc/stat, and each guest's QEMU process.

On the real /proc the QEMU process is read through psutil; under another procfs root
(a fixture tree, a container's view) the same numbers come from <root>/<pid>/stat, because
psutil can only be pointed elsewhere through a process-wide global.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.sysfs_io import describe_oserror

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class HostCpu:
    irq_seconds: float  # irq + softirq over all CPUs
    cpus: int


def parse_proc_stat(text: str) -> HostCpu:
    irq = None
    cpus = 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = line.split()
            # user nice system idle iowait irq softirq ...
            irq = (int(fields[6]) + int(fields[7])) / CLOCK_TICKS
        elif line.startswith("cpu"):
            cpus += 1
    if irq is None:
        raise HostError("/proc/stat: no aggregate 'cpu' line")
    return HostCpu(irq, max(cpus, 1))


def parse_pid_stat(text: str) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (comm may hold spaces and parens)."""
    after_comm = text[text.rindex(")") + 2:].split()
    # Fields after comm start at field 3 (state); utime and stime are fields 14 and 15.
    return (int(after_comm[11]) + int(after_comm[12])) / CLOCK_TICKS


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
        try:
            return parse_pid_stat(path.read_text())
        except OSError as exc:
            raise HostError(describe_oserror(path, exc)) from None
        except (ValueError, IndexError):
            raise HostError(f"{path}: unexpected format") from None
