"""One measurement: set the knob, run the load client for a window, return what it saw.

``cpu`` (cores) is what the objectives use: the exact CPU time (/proc/<pid>/schedstat) of the
tasks that do the testbed's work: the load client and server, the ksoftirqd threads and, when
threaded, our veths' NAPI threads. Whole-machine busy, softirq and steal (/proc/stat) are kept
beside it: on a machine shared with other builds, busy time is mostly other people's work.

With a competing application (``AppSpec``), the echo server and a CPU-bound job (appjob) share
one CPU, the receiver's, and the load client runs on another, as the sending host would; the
job is started for each probe and stopped after it, and ``app_ops_per_s`` is its own count of
work done over the window.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from vftune.testbed.knob import Knob
from vftune.testbed.netns import LOADGEN_NICE, SERVER_PORT, Testbed, TestbedError


@dataclass(frozen=True)
class LoadSpec:
    mode: str = "open"  # open: fixed offered rate; closed: ping-pong
    rate: float = 5000.0  # offered requests/s over all connections (open loop)
    conns: int = 8
    warmup_s: float = 0.4  # after the knob is written and connections opened; not measured
    window_s: float = 2.5
    size: int = 64
    tick_s: float = 0.001  # open loop: what is due is sent every tick, in a burst

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "rate": self.rate if self.mode == "open" else None, "conns": self.conns,
                "warmup_s": self.warmup_s, "window_s": self.window_s, "size": self.size, "tick_s": self.tick_s}


@dataclass(frozen=True)
class Measurement:
    knob: Knob
    p50_us: float
    p99_us: float
    rate: float
    cpu: float  # cores: the testbed's own tasks
    busy: float  # cores: the whole machine
    softirq: float
    steal: float
    sent: int
    received: int
    series: list[list[Any]] = field(default_factory=list, compare=False, repr=False)
    app_ops_per_s: float | None = None  # the competing job's units of work per second, if one ran

    @property
    def lost(self) -> int:
        return max(0, self.sent - self.received)


def measure(tb: Testbed, knob: Knob, load: LoadSpec) -> Measurement:
    tb.apply(knob)
    app = tb.app
    pids = [tb.server_pid, *tb.napi_thread_pids()]
    argv = ["ip", "netns", "exec", tb.ns_a, *LOADGEN_NICE, sys.executable, "-m", "vftune.testbed.loadgen", "client",
            "--connect", tb.server_addr, "--port", str(SERVER_PORT), "--mode", load.mode,
            "--rate", str(load.rate), "--conns", str(load.conns), "--warmup", str(load.warmup_s),
            "--window", str(load.window_s), "--size", str(load.size), "--tick", str(load.tick_s),
            "--pids", ",".join(map(str, pids))]
    budget = load.warmup_s + load.window_s + 30.0
    if app is not None:
        argv += ["--cpu", str(app.client_cpu)]
        if tb.counter is not None:
            argv += ["--app-counter", str(tb.counter.path)]
    tb.job_running(True)
    try:
        proc = _run_client(tb, argv, budget, knob)
    finally:
        tb.job_running(False)
    dead = tb.server_error()
    if dead is not None:
        raise TestbedError(f"load server exited during the probe at {knob.label}: {dead}")
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()
        raise TestbedError(f"load client failed at {knob.label}: {err[-1] if err else f'exit {proc.returncode}'}")
    return parse_client_output(knob, proc.stdout)


def _run_client(tb: Testbed, argv: list[str], budget: float, knob: Knob) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        tb.add_to_group(proc.pid)  # `ip netns exec` and nice exec: the pid is the client's
        out, err = proc.communicate(timeout=budget)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise TestbedError(f"load client did not finish within {budget:.0f} s at {knob.label}") from None
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def parse_client_output(knob: Knob, text: str) -> Measurement:
    try:
        d = json.loads(text)
        cpu = d["cpu"]
        return Measurement(
            knob=knob, p50_us=float(d["latency_us_p50"]), p99_us=float(d["latency_us_p99"]),
            rate=float(d["rate"]), cpu=float(cpu["tasks"]), busy=float(cpu["busy"]),
            softirq=float(cpu["softirq"]), steal=float(cpu["steal"]), sent=int(d["sent"]),
            received=int(d["received"]), series=list(d.get("series", [])),
            app_ops_per_s=float(d["app_ops_per_s"]) if "app_ops_per_s" in d else None)
    except (ValueError, KeyError, TypeError) as exc:
        raise TestbedError(f"load client output unreadable ({exc}): {text[:120]!r}") from None
