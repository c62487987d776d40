"""kill -9 on the Linux backend leaves nothing mis-set: the journal in the history file puts every
host file back, at the next start or with `vftune restore`.

The agent runs as `vftune run` does (tests/fixtures/agent_on_tree.py) on a fixture host tree
with a patched PF (per-VF ITR, rxmode/) and a stock one (napi_defer_hard_irqs,
gro_flush_timeout, net.core.netdev_budget); a fixed ITR is set as soon as a VF is found.
Each test waits for the writes, so it takes a few seconds of agent start-up each.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from linux_host import host_files, make_tree
from waiting import unit_stop_timeout_s

from conftest import VFTUNE

pytest.importorskip("libvirt")
FIXTURES = Path(__file__).parent / "fixtures"
# Deadlines from the contracts, never a guess at how fast a loaded machine is: a stop has the unit's
# TimeoutStopSec; the agent's start-up and first writes, and a killed process's exit, have none
# of their own, so they get a generous one (a pass never waits it out).
UNIT_STOP_TIMEOUT_S = unit_stop_timeout_s()
NO_CONTRACT_S = 180.0


def changed(before: dict[str, str], root: Path) -> set[str]:
    now = host_files(root)
    return {k for k in before if now.get(k) != before[k]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_agent_left_behind():
    """A failing test must not leave its agent running."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class TreeAgent:
    def __init__(self, root: Path, db: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc = subprocess.Popen(
            # A cliff of 1 packet/s: the stock PFs switch to NAPI at once (napi_defer_hard_irqs,
            # gro_flush_timeout and the host-wide netdev_budget written).
            [sys.executable, str(FIXTURES / "agent_on_tree.py"), str(root), str(db), str(self.port),
             "pf_mode=hybrid:1"],
            stdout=subprocess.DEVNULL, stderr=log.open("a"), env={**os.environ, "PYTHONUNBUFFERED": "1"})
        STARTED.append(self.proc)

    def wait(self, condition, what: str, timeout: float = NO_CONTRACT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"agent exited {self.proc.returncode}: {self.log.read_text()}"
            try:
                if condition():
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"agent never got to: {what}\n{self.log.read_text()}")

    def ticks(self) -> int:
        # A slow answer on a loaded machine is retried by wait() until its deadline, not a failure.
        return int(httpx.get(f"{self.url}/healthz", timeout=NO_CONTRACT_S).json()["ticks"])


def _written(pristine: dict[str, str], root: Path) -> bool:
    diff = changed(pristine, root)
    itr = any(k.endswith("itr_usecs") for k in diff)
    pf = any("rxmode/" in k or k.endswith(("napi_defer_hard_irqs", "gro_flush_timeout", "netdev_budget"))
             for k in diff)
    return itr and pf


def _crash_after_writes(tmp_path: Path) -> tuple[Path, Path, dict[str, str], set[str]]:
    root, db = tmp_path / "host", tmp_path / "vftune.db"
    make_tree(root)
    pristine = host_files(root)
    agent = TreeAgent(root, db, tmp_path / "agent1.log")
    agent.wait(lambda: _written(pristine, root), "ITRs and PF settings written")
    agent.proc.kill()  # SIGKILL: no handler runs
    agent.proc.wait(NO_CONTRACT_S)
    left = changed(pristine, root)
    assert left, "the crash left the host's files as the agent set them"
    return root, db, pristine, left


def test_kill_9_then_restart_restores_every_file_and_says_so(tmp_path):
    root, db, pristine, left = _crash_after_writes(tmp_path)
    again = TreeAgent(root, db, tmp_path / "agent2.log")
    again.wait(lambda: again.ticks() >= 3, "three ticks after the restart")
    log = (tmp_path / "agent2.log").read_text()
    assert "WARNING" in log and "did not stop cleanly; restored" in log
    again.proc.terminate()
    assert again.proc.wait(UNIT_STOP_TIMEOUT_S) == 0
    assert changed(pristine, root) == set(), "every file back to its original after the clean stop"
    con = sqlite3.connect(db)
    reasons = [r[0] for r in con.execute("SELECT reason FROM decisions WHERE reason LIKE 'restore after unclean%'")]
    assert len(reasons) >= len(left), "each restore after the crash is recorded"
    assert con.execute("SELECT COUNT(*) FROM journal").fetchone()[0] == 0
    ends = [r[0] for r in con.execute("SELECT end_state FROM runs ORDER BY id")]
    assert ends[0].startswith("unclean") and ends[1] == "clean"


def test_kill_9_then_vftune_restore_puts_the_host_back_without_the_agent(tmp_path):
    root, db, pristine, left = _crash_after_writes(tmp_path)
    out = subprocess.run([*VFTUNE, "restore", "--db", str(db), "--sysfs-root", str(root / "sys"),
                          "--procfs-root", str(root / "proc"), "--libvirt-uri", "none"],
                         capture_output=True, text=True, timeout=NO_CONTRACT_S)
    assert out.returncode == 0, out.stderr
    assert changed(pristine, root) == set()
    assert f"{len(left)} setting(s) put back, 0 left in the journal" in out.stdout or "put back" in out.stdout
    again = subprocess.run([*VFTUNE, "restore", "--db", str(db), "--sysfs-root", str(root / "sys"),
                            "--procfs-root", str(root / "proc"), "--libvirt-uri", "none"],
                           capture_output=True, text=True, timeout=NO_CONTRACT_S)
    assert again.returncode == 0 and "journal" in again.stdout and "empty" in again.stdout


def test_sigterm_restores_and_exits_within_the_units_stop_timeout(tmp_path):
    """How fast the stop is (5 s, 1 s with no client) is a speed target that bench/footprint.py
    measures; here the contract: restored, exit 0, before systemd would kill the process."""
    root, db = tmp_path / "host", tmp_path / "vftune.db"
    make_tree(root)
    pristine = host_files(root)
    agent = TreeAgent(root, db, tmp_path / "agent.log")
    agent.wait(lambda: _written(pristine, root), "ITRs and PF settings written")
    agent.proc.terminate()
    assert agent.proc.wait(UNIT_STOP_TIMEOUT_S) == 0  # raises TimeoutExpired past the deadline
    assert changed(pristine, root) == set()


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # a thread that ended meanwhile
            continue
    return out


def _environ(pid: int) -> list[bytes] | None:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # a page worker that exited meanwhile
        return None


def test_the_agents_processes_on_a_real_host_hold_no_memory_for_nothing(tmp_path):
    """numpy is the simulator's (its scenarios' jitter): ~12 MB of resident memory on every host
    if the agent loaded it only to read the scenario names its config may give. The API process
    runs with glibc's arenas capped (7 MB of freed memory kept at 20 clients otherwise)."""
    root, db = tmp_path / "host", tmp_path / "vftune.db"
    make_tree(root)
    pristine = host_files(root)
    agent = TreeAgent(root, db, tmp_path / "agent.log")
    agent.wait(lambda: _written(pristine, root), "ITRs and PF settings written")
    maps = Path(f"/proc/{agent.proc.pid}/maps").read_text()
    environs = [env for pid in _children(agent.proc.pid) if (env := _environ(pid)) is not None]
    agent.proc.terminate()
    assert agent.proc.wait(UNIT_STOP_TIMEOUT_S) == 0
    assert "/numpy/" not in maps
    assert environs and all(b"MALLOC_ARENA_MAX=2" in env for env in environs)
