"""The competing application: a CPU-bound job pinned to the receiver's CPU that counts its own work.

    python -m vftune.testbed.appjob --counter PATH --cpu N [--nice K]

It pins itself to CPU ``N``, prints ``ready`` and then does fixed units of work forever, storing
how many it has done as a little-endian u64 at the start of the file ``PATH`` (created and
sized by ``AppCounter``) after each one. The load client reads that counter at the edges of its
window (``read_counter``), so the job's progress is counted by the job and measured over exactly
the window the latency and CPU are measured over; a job that stops counting shows as 0 ops/s.

One unit of work is a SHA-256 over a 16 KiB buffer (a few tens of microseconds of C, with a
working set in L1/L2 as an application's is): interrupt and softirq work on its CPU costs the
job both the time they take and the cache they evict.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import mmap
import os
import signal
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

_COUNT = struct.Struct("<Q")
WORK_BYTES = 16 * 1024
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class AppSpec:
    """The competing application: its CPU (shared with the server) and the load client's CPU."""

    cpu: int = 1
    client_cpu: int = 0
    # Inside the testbed's CPU group (cpugroup.py) the job runs at nice -10, below the server
    # (nice -20): a request's wakeup still preempts the job, and that is the cost measured.
    nice: int = -10

    def __post_init__(self) -> None:
        if self.cpu == self.client_cpu or min(self.cpu, self.client_cpu) < 0:
            raise ValueError(f"the job's CPU and the client's must be two CPUs, got {self.cpu} and {self.client_cpu}")

    def as_dict(self) -> dict[str, object]:
        return {"job_and_server_cpu": self.cpu, "client_cpu": self.client_cpu, "job_nice": self.nice}


class CounterReader:
    """Reads the job's count with one aligned 8-byte load (a file read() could see a store torn)."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "r+b")  # noqa: SIM115 - closed in close()
        self._map = mmap.mmap(self._file.fileno(), _COUNT.size)
        self._value = ctypes.c_uint64.from_buffer(self._map)

    def read(self) -> int:
        return int(self._value.value)

    def close(self) -> None:
        del self._value
        self._map.close()
        self._file.close()


@dataclass
class AppCounter:
    """The shared counter file, created empty (0 units) before the job starts."""

    path: Path

    @classmethod
    def create(cls, directory: str) -> AppCounter:
        path = Path(directory, f"vftune-appjob-{os.getpid()}-{os.urandom(3).hex()}")
        path.write_bytes(_COUNT.pack(0))
        return cls(path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _die_with_parent(parent: int) -> None:
    """A job left behind by a killed testbed would hold its CPU at the group's weight: the kernel
    kills it when its parent goes (prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the parent went before the prctl took hold
        raise SystemExit(1)


def run_job(counter: str, cpu: int, nice: int, parent: int | None = None) -> None:
    _die_with_parent(os.getppid() if parent is None else parent)
    os.sched_setaffinity(0, {cpu})
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    buf = os.urandom(WORK_BYTES)
    with open(counter, "r+b") as f, mmap.mmap(f.fileno(), _COUNT.size) as mm:
        count = ctypes.c_uint64.from_buffer(mm)  # an aligned 8-byte store: never seen torn
        print("ready", flush=True)
        while True:
            hashlib.sha256(buf).digest()
            count.value += 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vftune.testbed.appjob")
    p.add_argument("--counter", required=True, help="file holding the u64 count of units done")
    p.add_argument("--cpu", type=int, required=True, help="the CPU the job is pinned to")
    p.add_argument("--nice", type=int, default=0)
    p.add_argument("--parent", type=int, default=None, help="the starting process: the job dies with it")
    args = p.parse_args(argv)
    try:
        run_job(args.counter, args.cpu, args.nice, args.parent)
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"appjob: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
