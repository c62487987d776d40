"""Shared fixtures: a real `vftune run` process on a free port, and its API client."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

VFTUNE = [sys.executable, "-m", "vftune"]


@dataclass
class RunningAgent:
    proc: subprocess.Popen
    url: str
    db: Path
    log: Path

    @property
    def token(self) -> str:
        """The bearer token the agent created beside its history file."""
        return (self.db.parent / "token").read_text().strip()

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def stop(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def wait_ticks(self, ticks: int, timeout: float = 60.0) -> dict:
        """Poll /healthz until the agent has ticked this often (a condition, not a fixed sleep)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            # The first answer waits for the API process to start: on a loaded machine, seconds.
            body = httpx.get(f"{self.url}/healthz", timeout=max(5.0, deadline - time.monotonic())).json()
            if body["ticks"] >= ticks:
                return body
            time.sleep(0.05)
        raise AssertionError(f"agent did not reach {ticks} ticks: {self.log.read_text()}")


def start_agent(tmp_path: Path, *args: str) -> RunningAgent:
    """Start `vftune run` on port 0 and learn the port from its log line."""
    db, log = tmp_path / "vftune.db", tmp_path / "agent.log"
    err = log.open("w")
    listen = [] if "--listen" in args else ["--listen", "127.0.0.1:0"]
    proc = subprocess.Popen([*VFTUNE, "run", *args, "--db", str(db), *listen,
                             "--log-level", "info"], stderr=err, stdout=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = re.search(r"listening on (http://[\d.]+:\d+)", log.read_text())
        if match:
            return RunningAgent(proc, match.group(1), db, log)
        if proc.poll() is not None:
            raise AssertionError(f"vftune run exited {proc.returncode}: {log.read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"vftune run did not start: {log.read_text()}")


@pytest.fixture(scope="module")
def shared_sim_agent(tmp_path_factory):
    """One agent for a module's read-only tests, after 80 ticks (40 simulated s); stopped when the module ends."""
    agent = start_agent(tmp_path_factory.mktemp("agent"), "--sim", "mixed-host", "--speed", "50")
    agent.wait_ticks(80)
    yield agent
    if agent.proc.poll() is None:
        agent.stop()


@pytest.fixture
def sim_agent(tmp_path):
    agent = start_agent(tmp_path, "--sim", "mixed-host", "--speed", "50")
    yield agent
    if agent.proc.poll() is None:
        agent.proc.kill()
        agent.proc.wait()
