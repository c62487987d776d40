"""The testbed on the real kernel: the load generator on loopback (any user), and as root a
smoke run in two network namespaces (one point, one probe), SIGINT cleanup, and the non-root
refusal."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from vftune.cli import cli

VFTUNE = [sys.executable, "-m", "vftune"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_loadgen_answers_every_request_at_the_offered_rate() -> None:
    from vftune.testbed.loadgen import run_client

    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "vftune.testbed.loadgen", "server", "--bind", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        res = run_client("127.0.0.1", port, "open", 1000.0, 4, 0.1, 0.5, 64)
        # 1000/s for 0.5 s, paced by the timer whatever the answers do; a stall of this process
        # across the window's edge moves a few sends out of it.
        assert 475 <= res["sent"] <= 525  # type: ignore[operator]
        assert res["received"] == res["sent"]
        assert 0 < res["latency_us_p50"] <= res["latency_us_p99"]  # type: ignore[operator]
        closed = run_client("127.0.0.1", port, "closed", 0.0, 1, 0.1, 0.3, 64)
        assert closed["received"] == closed["sent"] and closed["received"] > 0  # type: ignore[operator]
    finally:
        server.terminate()
        server.wait(timeout=5)


def test_not_root_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = CliRunner().invoke(cli, ["testbed", "--objective", "latency"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == ["vftune: testbed needs root (network namespaces, veth and sysfs "
                                                  "NAPI knobs)"]


def test_bad_values_are_usage_errors() -> None:
    for args in (["--objective", "throughput"], ["--latency-bound-us", "-5"], ["--latency-bound-us", "nan"],
                 ["--rate", "0"]):
        result = CliRunner().invoke(cli, ["testbed", *args])
        assert result.exit_code == 2, args
        assert "Traceback" not in result.output




def _netns_works() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"vftb-probe-{os.getpid()}"
    proc = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"cannot create a network namespace here: {proc.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], check=False)
    return None


@pytest.mark.root
def test_smoke_one_point_one_probe() -> None:
    why = _netns_works()
    if why:
        pytest.skip(why)
    from vftune.testbed.adapter import KnobSearch, KnobSearchConfig
    from vftune.testbed.knob import NO_DEFERRAL, Knob
    from vftune.testbed.measure import LoadSpec, measure
    from vftune.testbed.netns import Testbed

    load = LoadSpec(rate=1000.0, conns=2, warmup_s=0.2, window_s=0.5)
    with Testbed() as tb:
        names = {tb.ns_a, tb.ns_b}
        assert names <= _netns_names()
        before = tb.xdp_packets()
        point = measure(tb, Knob(1, 50_000), load)  # the one sweep point
        assert tb.xdp_packets() - before >= point.received > 0  # veth's NAPI path carried them
        assert point.lost == 0 and 0 < point.p50_us <= point.p99_us and point.cpu > 0
        search = KnobSearch("efficiency", KnobSearchConfig(baseline_probes=1))
        knob = search.ask()
        assert knob == NO_DEFERRAL  # cold start: the stock setting first
        probe = measure(tb, knob, load)  # the one tuner probe
        search.tell(knob, probe.p99_us, probe.cpu, probe.rate)
        assert search.probes == 1 and search.ask() not in (None, NO_DEFERRAL)
    assert not names & _netns_names()  # removed on exit


@pytest.mark.root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_removes_the_namespaces(sig: signal.Signals) -> None:
    why = _netns_works()
    if why:
        pytest.skip(why)
    proc = subprocess.Popen([*VFTUNE, "testbed", "--objective", "latency", "--repeats", "1", "--runs", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # the first progress line names the namespaces once they exist
    match = re.search(r"namespaces (\S+)/(\S+),", line)
    assert match, line
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig
    assert "interrupted" in err and "Traceback" not in err
    assert not {match.group(1), match.group(2)} & _netns_names()


@pytest.mark.root
def test_competing_app_one_probe_counts_the_job_and_cleans_up() -> None:
    why = _netns_works()
    if why:
        pytest.skip(why)
    if (os.cpu_count() or 1) < 2:
        pytest.skip("the competing job and the client need two CPUs")
    from vftune.testbed.appjob import AppSpec
    from vftune.testbed.knob import Knob
    from vftune.testbed.measure import LoadSpec, measure
    from vftune.testbed.netns import Testbed, TestbedError

    load = LoadSpec(rate=2000.0, conns=2, warmup_s=0.2, window_s=0.5, tick_s=0.0001)
    try:
        tb = Testbed(app=AppSpec(cpu=1, client_cpu=0)).__enter__()
    except TestbedError as exc:  # e.g. no cgroup cpu controller on this machine
        pytest.skip(str(exc))
    try:
        assert tb.group is not None and tb.job is not None and tb.counter is not None
        group, job_pid, counter = tb.group.path, tb.job.pid, tb.counter.path
        assert {tb.server_pid, job_pid} <= set(tb.group.pids())
        assert os.sched_getaffinity(tb.server_pid) == os.sched_getaffinity(job_pid) == {1}
        rps = tb.ns_exec(tb.ns_b, ["cat", f"/sys/class/net/{tb.dev_b}/queues/rx-0/rps_cpus"])
        assert int(rps.strip().replace(",", ""), 16) == 0b10  # the server's receive work on its CPU
        point = measure(tb, Knob(1, 200_000), load)
        assert point.app_ops_per_s is not None and point.app_ops_per_s > 0
        assert point.lost == 0 and point.received > 0
        state = Path(f"/proc/{job_pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "T"  # stopped between probes: the job takes the CPU only while measured
        knob_a = tb.ns_exec(tb.ns_a, ["cat", f"/sys/class/net/{tb.dev_a}/gro_flush_timeout"]).strip()
        assert knob_a == "0"  # the knob is the receiver's: the client's end keeps the stock setting
    finally:
        tb.__exit__(None, None, None)
    assert not group.exists() and not counter.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(job_pid, 0)
