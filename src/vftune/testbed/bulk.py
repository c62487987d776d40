"""Bulk TCP through the testbed with iperf3 (Debian's package): throughput and CPU at one knob."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass

from vftune.testbed.knob import Knob
from vftune.testbed.netns import Testbed, TestbedError

IPERF_PORT = 7201


@dataclass(frozen=True)
class BulkResult:
    knob: Knob
    gbit_s: float
    sender_cpu_pct: float  # iperf3's own view of its process CPU, % of one core
    receiver_cpu_pct: float

    def as_dict(self) -> dict[str, object]:
        return {"knob": self.knob.as_dict(), "gbit_s": round(self.gbit_s, 3),
                "sender_cpu_pct": round(self.sender_cpu_pct, 1), "receiver_cpu_pct": round(self.receiver_cpu_pct, 1)}


def iperf3_available() -> bool:
    return shutil.which("iperf3") is not None


def parse_iperf3(knob: Knob, text: str) -> BulkResult:
    try:
        doc = json.loads(text)
        end = doc["end"]
        cpu = end.get("cpu_utilization_percent", {})
        return BulkResult(knob, float(end["sum_received"]["bits_per_second"]) / 1e9,
                          float(cpu.get("host_total", 0.0)), float(cpu.get("remote_total", 0.0)))
    except (ValueError, KeyError, TypeError) as exc:
        raise TestbedError(f"iperf3 output unreadable ({exc}): {text[:120]!r}") from None


def bulk(tb: Testbed, knob: Knob, seconds: float = 3.0) -> BulkResult:
    tb.apply(knob)
    server = subprocess.Popen(["ip", "netns", "exec", tb.ns_b, "iperf3", "-s", "-1", "--forceflush", "-B",
                               tb.server_addr, "-p", str(IPERF_PORT)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout is not None
        banner = ""
        while "listening" not in banner.lower():  # readiness: iperf3 says so once it listens
            line = server.stdout.readline()
            if not line:
                raise TestbedError(f"iperf3 server did not start: {banner.strip()[-120:] or 'no output'}")
            banner += line
        proc = subprocess.run(["ip", "netns", "exec", tb.ns_a, "iperf3", "-c", tb.server_addr, "-p",
                               str(IPERF_PORT), "-t", str(seconds), "-J"],
                              capture_output=True, text=True, timeout=seconds + 30, check=False)
        if proc.returncode != 0:
            err = (proc.stdout + proc.stderr).strip().splitlines()
            raise TestbedError(f"iperf3 failed at {knob.label}: {err[-1] if err else proc.returncode}")
        return parse_iperf3(knob, proc.stdout)
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(timeout=5)
