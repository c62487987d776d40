"""One measurement: set the knob, run the load client for a window, return what it saw.

``cpu`` (cores) is what the objectives use: the exact CPU time (/proc/<pid>/schedstat) of the
tasks that do the testbed's work: the load client and server, the ksoftirqd threads and, when
threaded, our veths' NAPI threads. Whole-machine busy, softirq and steal (/proc/stat) are kept
beside it: on a machine shared with other builds, busy time is mostly other people's work.
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

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "rate": self.rate if self.mode == "open" else None, "conns": self.conns,
                "warmup_s": self.warmup_s, "window_s": self.window_s, "size": self.size}


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

    @property
    def lost(self) -> int:
        return max(0, self.sent - self.received)


def measure(tb: Testbed, knob: Knob, load: LoadSpec) -> Measurement:
    tb.apply(knob)
    pids = [tb.server_pid, *tb.napi_thread_pids()]
    argv = ["ip", "netns", "exec", tb.ns_a, *LOADGEN_NICE, sys.executable, "-m", "vftune.testbed.loadgen", "client",
            "--connect", tb.server_addr, "--port", str(SERVER_PORT), "--mode", load.mode,
            "--rate", str(load.rate), "--conns", str(load.conns), "--warmup", str(load.warmup_s),
            "--window", str(load.window_s), "--size", str(load.size), "--pids", ",".join(map(str, pids))]
    budget = load.warmup_s + load.window_s + 30.0
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=budget, check=False)
    except subprocess.TimeoutExpired:
        raise TestbedError(f"load client did not finish within {budget:.0f} s at {knob.label}") from None
    dead = tb.server_error()
    if dead is not None:
        raise TestbedError(f"load server exited during the probe at {knob.label}: {dead}")
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()
        raise TestbedError(f"load client failed at {knob.label}: {err[-1] if err else f'exit {proc.returncode}'}")
    return parse_client_output(knob, proc.stdout)


def parse_client_output(knob: Knob, text: str) -> Measurement:
    try:
        d = json.loads(text)
        cpu = d["cpu"]
        return Measurement(
            knob=knob, p50_us=float(d["latency_us_p50"]), p99_us=float(d["latency_us_p99"]),
            rate=float(d["rate"]), cpu=float(cpu["tasks"]), busy=float(cpu["busy"]),
            softirq=float(cpu["softirq"]), steal=float(cpu["steal"]), sent=int(d["sent"]),
            received=int(d["received"]), series=list(d.get("series", [])))
    except (ValueError, KeyError, TypeError) as exc:
        raise TestbedError(f"load client output unreadable ({exc}): {text[:120]!r}") from None
