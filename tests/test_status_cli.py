"""`vftune status` as an operator reads it: the terminal's width, the PF's DE/NAPI state, VF
phases in words, units on the numbers, and --watch redrawing in place on a real pty."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from many_vfs import write_host

from conftest import VFTUNE, start_agent

PHASES = re.compile(r"(converged|searching, step \d+ of \d+|searching \d+/\d+|searching|following its own adaptive ITR|"
                    r"adaptive|excluded by config|pinned)\s*$")
BOUGHT = "Bought against adaptive ITR: "


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
    # Nothing is cut: every line is whole (a long one broke between phrases instead).
    assert not any(line.rstrip().endswith("…") for line in lines), out.stdout
    # What the set rates bought, or that nothing is measured yet, near the top.
    assert any(line.startswith(BOUGHT) for line in lines[:4])
    pf_lines = [i for i, line in enumerate(lines) if line.startswith("enp3s0f")]
    assert len(pf_lines) == 2
    # The port's mode follows on its header's lines, never split inside "now DE, 3 DE/NAPI switches".
    for i in pf_lines:
        block = "\n".join(lines[i:i + 3])
        assert re.search(r"now (DE|NAPI), \d+ DE/NAPI switch(es)?( |$)", block, re.M), block
    address = r"0000:03:1\d\.\d" if columns >= 110 else r"03:1\d\.\d"
    rows = [line for line in lines if re.match(rf"^{address} ", line)]
    assert len(rows) == 17, out.stdout
    assert all(PHASES.search(row) for row in rows), out.stdout
    # Units on every number: rates carry /s, merit and CPU per Gb a signed percent.
    for row in rows:
        tokens = row.split()[2:]  # after the address and the guest
        numbers = [i for i, t in enumerate(tokens) if re.match(r"^[+-]?\d", t)]
        assert numbers, row
        for i in numbers:
            shown = tokens[i] if tokens[i].endswith("%") else f"{tokens[i]} {tokens[i + 1] if i + 1 < len(tokens) else ''}"
            assert re.fullmatch(r"[\d.]+ [kMG]?(b/s|p/s|/s)|[+-]\d+%", shown), (shown, row)


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
    while seen.count(b"Bought against adaptive ITR") < 2 and time.monotonic() < deadline:
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
    assert seen.count(b"Bought against adaptive ITR") >= 2, "more than one frame drawn"
    # rich's Live moves the cursor up over the previous frame before it draws the next one.
    second = seen.index(b"Bought against adaptive ITR") + 1
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
            "cost_model": {"saved_cpu_s_per_s": 0.05},
            "vs_adaptive": {"vfs": 1, "merit_change": 0.12, "cpu_change_cores": 0.4,
                            "text": "+12% throughput on 1 VF, for 0.40 CPU (measured 3 min ago)"}}
    vf["vs_adaptive"] = {"merit": "throughput", "merit_change": 0.12, "cpu_per_gbit_change": -0.05,
                         "cpu_change_cores": 0.4, "age_s": 180.0}
    out = io.StringIO()
    Console(file=out, width=80).print(render({"host": host, "vfs": [vf]}, 80))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if line.startswith("03:10.0 "))
    assert row.rstrip().endswith("searching 12/14") and "20.3 k/s" in row
    assert re.search(r"\+12% tput +-5% ", row)
    assert "now NAPI, 3 DE/NAPI switches" in out.getvalue()
    # Broken between its phrases: the host line's second phrase on a line of its own.
    assert "Bought against adaptive ITR: +12% throughput on 1 VF\n  for 0.40 CPU (measured 3 min ago)\n" in out.getvalue()


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
        row = next(line for line in out.getvalue().splitlines() if line.startswith(("0000:03:10.0 ", "03:10.0 ")))
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


def _pty_frames(argv: list[str], columns: int, lines: int, until: bytes, count: int) -> bytes:
    """Run argv on a real pty of columns x lines until `until` appeared `count` times (or it exits)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update(COLUMNS=str(columns), LINES=str(lines), TERM="xterm")
        os.execvp(argv[0], argv)
    seen = b""
    deadline = time.monotonic() + 90
    try:
        while seen.count(until) < count and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 20
        reaped = False
        while time.monotonic() < deadline and not reaped:
            reaped = os.waitpid(pid, os.WNOHANG)[0] != 0
            if not reaped:
                time.sleep(0.1)
        if not reaped:  # did not stop on SIGINT: end it, do not hang the suite
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    return seen


def _screen(raw: bytes) -> list[str]:
    """The text of what was drawn, escape sequences out."""
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", raw).decode("utf-8", "replace")
    return re.split(r"\r\n|\n|\r", text)


@pytest.fixture(scope="module")
def agent_126(tmp_path_factory):
    """126 VFs on two ports (tests/fixtures/many_vfs.py) after 60 ticks."""
    tmp = tmp_path_factory.mktemp("agent126")
    agent = start_agent(tmp, "--scenario-file", str(write_host(tmp / "host-126vf.toml")), "--speed", "20")
    agent.wait_ticks(60, timeout=120)
    yield agent
    if agent.proc.poll() is None:
        agent.stop()


def test_at_80_columns_126_vfs_read_as_a_summary_and_the_vfs_that_matter(agent_126):
    raw = _pty_frames([*VFTUNE, "status", "--url", agent_126.url], 80, 40, b"more VFs", 2)
    lines = [line for line in _screen(raw) if line.strip()]
    assert max(len(line) for line in lines) <= 80
    assert re.match(r"^  126 VFs: ", lines[1]) or any(re.search(r"\b126 VFs: \d+ ", line) for line in lines[:3])
    rows = [line for line in lines if re.match(r"^03:[12]\w\.\d ", line)]
    assert 20 <= len(rows) <= 30, "a page of the VFs that matter, not all 126"
    more = [line for line in lines if "more VFs" in line]
    assert len(more) == 2 and all(re.search(r"\.\.\. \d+ more VFs \(", line) for line in more)
    # Each port's table starts with what matters: a search, or the worst merit, before VFs idling.
    first = [i for i, line in enumerate(lines) if line.startswith("VF ")]
    for i in first:
        assert "adaptive" not in lines[i + 1].split()[-1:] or all("adaptive" in r for r in lines[i + 1:i + 3])
    # --pf shows one port whole, --guest a few guests.
    one = _status(agent_126.url, 80, "--pf", "enp3s0f1", "--all")
    assert one.returncode == 0 and "enp3s0f0" not in one.stdout
    assert len([line for line in one.stdout.splitlines() if re.match(r"^03:", line)]) == 63
    few = _status(agent_126.url, 80, "--guest", "tenant-0[12]")
    rows = [line for line in few.stdout.splitlines() if re.match(r"^03:", line)]
    assert len(rows) == 4 and all("tenant-0" in row for row in rows)


def test_watch_at_80x40_with_126_vfs_shows_every_port(agent_126):
    raw = _pty_frames([*VFTUNE, "status", "--watch", "--every", "0.5", "--url", agent_126.url], 80, 40,
                      b"Bought against adaptive ITR", 2)
    # The last whole frame: from the start of the one before the last header to the last header.
    start = raw.rindex(b"vftune sim", 0, raw.rindex(b"vftune sim"))
    frame = _screen(raw[start:raw.rindex(b"vftune sim")])
    assert any(line.startswith("enp3s0f0 ") for line in frame)
    assert any(line.startswith("enp3s0f1 ") for line in frame), "the second port is on the screen too"
    assert len([line for line in frame if line.strip()]) <= 40 + 2
    assert max(len(line) for line in frame) <= 80, [line for line in frame if len(line) > 80]
