"""`vftune status` as an operator reads it: the terminal's width, the PF's DE/NAPI state, VF
phases in words, units on the numbers, and --watch redrawing in place on a real pty."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import VFTUNE

PHASES = re.compile(r"(converged|searching, step \d+ of \d+|searching|following its own adaptive ITR|"
                    r"own adaptive ITR|excluded by config|pinned)\s*$")


def _status(url: str, columns: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb"}
    return subprocess.run([*VFTUNE, "status", "--url", url, *args], capture_output=True, text=True, env=env,
                          timeout=60)


@pytest.mark.parametrize("columns", [80, 120])
def test_status_fits_the_terminal_and_says_what_each_vf_does(shared_sim_agent, columns):
    out = _status(shared_sim_agent.url, columns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert any(line.startswith("CPU against adaptive ITR: ") for line in lines[:3])
    pf_lines = [line for line in lines if line.startswith("enp3s0f")]
    assert len(pf_lines) == 2 and all(re.search(r"now (DE|NAPI)", line) for line in pf_lines)
    rows = [line for line in lines if re.match(r"^0000:03:1\d\.\d ", line)]
    assert len(rows) == 17, out.stdout
    assert all(PHASES.search(row) for row in rows), out.stdout
    # Units on every number: rates carry /s, CPU its percent sign; a bare number is a bug.
    for row in rows:
        cells = re.split(r"\s{2,}", row.strip())
        numbers = [c for c in cells[2:-1] if c not in ("-", "adaptive")]
        assert numbers and all(re.fullmatch(r"[\d.]+ [kMG]?(b/s|p/s|/s)|\d+%", c) for c in numbers), row


def test_status_json_is_the_api_records_plus_state_and_objective(shared_sim_agent):
    out = _status(shared_sim_agent.url, 80, "--json")
    state = json.loads(out.stdout)
    assert set(state) == {"host", "vfs"}
    vf = state["vfs"][0]
    assert {"pci", "itr", "phase", "rx_bps", "state", "objective"} <= set(vf)
    pf = state["host"]["pfs"][0]
    assert pf["mode_now"] in ("de", "napi") and isinstance(pf["switches"], int)


def test_status_watch_redraws_in_place_until_ctrl_c(shared_sim_agent):
    pid, fd = pty.fork()
    if pid == 0:  # the child: vftune status --watch on a terminal of 100 columns
        os.environ.update(COLUMNS="100", LINES="60", TERM="xterm")
        os.execvp(VFTUNE[0], [*VFTUNE, "status", "--watch", "--every", "0.3", "--url", shared_sim_agent.url])
    seen = b""
    deadline = time.monotonic() + 60
    while seen.count(b"CPU against adaptive ITR") < 2 and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    os.kill(pid, signal.SIGINT)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert seen.count(b"CPU against adaptive ITR") >= 2, "more than one frame drawn"
    # rich's Live moves the cursor up over the previous frame before it draws the next one.
    second = seen.index(b"CPU against adaptive ITR") + 1
    assert b"\x1b[1A" in seen[second:] and b"Traceback" not in seen
    assert os.waitstatus_to_exitcode(status) == 0
