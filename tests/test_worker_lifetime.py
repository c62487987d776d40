"""`vftune bench` workers end with their parent: SIGTERM or SIGKILL of the bench leaves no
worker burning CPU (they are forked pool processes; the kernel's parent-death signal ends them)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from waiting import wait_for

from conftest import VFTUNE


def children(pid: int) -> set[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return set()
    return {int(p) for p in text.split()}


def cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_bench_workers_end_with_their_parent(sig):
    # A week of simulated time per pair: each task runs for minutes, far beyond the wait below,
    # so a worker gone within it was ended by its parent's death, not by running out of work.
    bench = subprocess.Popen([*VFTUNE, "bench", "--scenario", "paper-1vm", "--seeds", "0-1", "--jobs", "2",
                              "--duration", "604800"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # Busy workers (a second of CPU each): a worker between tasks ends by itself when the
        # pool's pipe closes; one inside a task ran on until the task was done.
        workers = wait_for(lambda: children(bench.pid) if len(children(bench.pid)) >= 2
                           and all(cpu_ticks(w) >= os.sysconf("SC_CLK_TCK") for w in children(bench.pid)) else None,
                           "two busy pool workers", timeout=120)
        os.kill(bench.pid, sig)
        bench.wait(60)
        deadline = time.monotonic() + 20
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [w for w in workers if alive(w)], "a worker outlived the bench"
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
