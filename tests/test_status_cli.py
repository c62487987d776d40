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

PHASES = re.compile(r"(converged|searching, step \d+ of \d+|searching \d+/\d+|searching|following its own adaptive ITR|"
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
    # The CPU header: the figure once the cost model has a fit, or says it is not known yet.
    assert any(line.startswith(("CPU against adaptive ITR: ", "CPU vs adaptive ITR: not known yet"))
               for line in lines[:3])
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
    # The child exits on Ctrl-C: its end of the pty closes (EIO here) well before the deadline.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        try:
            if ready and not os.read(fd, 65536):
                break
        except OSError:
            break
    done, status = os.waitpid(pid, os.WNOHANG)
    if not done:  # did not stop on SIGINT: fail the test, do not hang the suite
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert seen.count(b"CPU against adaptive ITR") >= 2, "more than one frame drawn"
    # rich's Live moves the cursor up over the previous frame before it draws the next one.
    second = seen.index(b"CPU against adaptive ITR") + 1
    assert b"\x1b[1A" in seen[second:] and b"Traceback" not in seen
    assert os.waitstatus_to_exitcode(status) == 0


def test_at_80_columns_a_searching_vf_with_a_long_guest_name_keeps_its_address_whole():
    import io

    from rich.console import Console

    from vftune.cli.status import render

    vf = {"pci": "0000:03:10.0", "pf": "enp3s0f0", "guest": "a-very-long-guest-name-indeed", "itr": 20345,
          "rx_bps": 3.41e9, "rx_pps": 2.5e5, "tx_bps": 6.4e7, "interrupts_per_s": 11400.0, "guest_cpu": 1.15,
          "state": "searching", "probes": 11, "expected_probes": 14, "objective": "latency", "last_decision": "x"}
    pf = {"name": "enp3s0f0", "pci": "0000:03:00.0", "num_vfs": 1, "total_vfs": 63, "rx_pps": 1e5, "rx_bps": 1e9,
          "mode": "hybrid", "mode_now": "napi", "switches": 3, "controller": "hybrid", "controller_state": {},
          "napi_budget": 2, "last_decision": None}
    host = {"backend": "sim", "detail": "scenario=x", "vf_count": 1, "interval_s": 1.0, "ticks": 10, "pfs": [pf],
            "capabilities": {"itr_min": 956, "itr_max": 488281, "vf_itr": True, "missing": []},
            "cost_model": {"saved_cpu_s_per_s": 0.05}}
    out = io.StringIO()
    Console(file=out, width=80).print(render({"host": host, "vfs": [vf]}, 80))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if line.startswith("0000:03:10.0 "))
    assert row.rstrip().endswith("searching 12/14") and "20.3 k/s" in row and "115%" in row
    assert re.search(r"now NAPI,\s+3\s+DE/NAPI\s+switches", out.getvalue())
    assert "5.0% of one CPU saved" in out.getvalue()


def test_a_rate_on_its_way_shows_beside_the_one_in_force():
    import io

    from rich.console import Console

    from vftune.cli.status import render

    vf = {"pci": "0000:03:10.0", "pf": "enp3s0f0", "guest": "web-1", "itr": 0, "itr_pending": 20345,
          "rx_bps": 3.41e9, "rx_pps": 2.5e5, "tx_bps": 6.4e7, "interrupts_per_s": 11400.0, "guest_cpu": 1.15,
          "state": "searching", "objective": "throughput", "last_decision": "probe: 2 of 11, 20345/s (queued)"}
    pf = {"name": "enp3s0f0", "pci": "0000:03:00.0", "num_vfs": 1, "total_vfs": 63, "rx_pps": 1e5, "rx_bps": 1e9,
          "mode": "napi", "mode_now": "napi", "switches": None, "controller": "stock", "controller_state": {},
          "napi_budget": None, "last_decision": None}
    host = {"backend": "sim", "detail": "scenario=x", "vf_count": 1, "interval_s": 0.5, "ticks": 10, "pfs": [pf],
            "capabilities": {"itr_min": 956, "itr_max": 488281, "vf_itr": True, "missing": []},
            "cost_model": {"saved_cpu_s_per_s": 0.0}}
    for width, shown in ((80, "→20.3 k/s"), (120, "adaptive→20.3 k/s")):
        out = io.StringIO()
        Console(file=out, width=width).print(render({"host": host, "vfs": [vf]}, width))
        row = next(line for line in out.getvalue().splitlines() if line.startswith("0000:03:10.0 "))
        assert shown in row and len(row) <= width


@pytest.mark.parametrize("guest", ["db[/x]", "[bold red]web", "evil\x1b]0;owned\x07\x1b[2J", "a\nb"])
def test_host_strings_show_literally_never_as_markup_or_terminal_controls(guest):
    import io

    from rich.console import Console

    from vftune.cli.status import render

    vf = {"pci": "0000:03:10.0", "pf": "enp3s0f0", "guest": guest, "itr": 20345, "rx_bps": 1e9, "rx_pps": 1e5,
          "tx_bps": 1e6, "interrupts_per_s": 1e4, "guest_cpu": 0.5, "state": "converged", "objective": "latency",
          "last_decision": f"probe for {guest}"}
    pf = {"name": "enp3s0f0", "pci": "0000:03:00.0", "num_vfs": 1, "total_vfs": 63, "rx_pps": 1e5, "rx_bps": 1e9,
          "mode": "hybrid", "mode_now": "napi", "switches": 0, "controller": "hybrid", "controller_state": {},
          "napi_budget": None, "last_decision": f"[red]{guest}"}
    host = {"backend": "sim", "detail": f"scenario={guest}", "vf_count": 1, "interval_s": 1.0, "ticks": 3,
            "pfs": [pf], "capabilities": {"itr_min": 956, "itr_max": 488281, "vf_itr": True, "missing": [guest]},
            "cost_model": {}}
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(render({"host": host, "vfs": [vf]}, 200))
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    shown = guest.replace("\x1b", "\\x1b").replace("\x07", "\\x07").replace("\n", "\\n")
    assert shown in text, text
