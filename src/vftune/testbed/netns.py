"""Two network namespaces joined by a veth pair, with the echo server running in one of them.

Names are unique per run (pid and a random suffix), so runs and other engineers' tests do not
collide. Teardown removes both namespaces (which deletes the veth pair) and stops the server;
it runs on normal exit, on failure, and from the SIGINT/SIGTERM handlers the CLI installs.
sysfs shows a namespace's devices only to a process that mounted it from inside, so knob writes
go through `ip netns exec`, which does exactly that.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from vftune.testbed.appjob import AppCounter, AppSpec
from vftune.testbed.knob import Knob

if TYPE_CHECKING:
    from vftune.testbed.cpugroup import CpuGroup

SERVER_PORT = 7100
# The load client and server run at nice -20: on a machine shared with other work, EEVDF
# otherwise lets a woken load process wait out another task's slice, and multi-ms stalls of the
# load generator itself would fill the p99. The kernel's own threads (ksoftirqd, NAPI threads)
# keep their priority: how they fare under contention is part of what is measured.
LOADGEN_NICE = ["nice", "-n", "-20"]
_CLIENT_ADDR = "10.231.0.1"
_SERVER_ADDR = "10.231.0.2"


class TestbedError(RuntimeError):
    """The testbed could not be built or driven; the message names what and why."""

    __test__ = False  # not a pytest class, whatever its name


def _run(argv: list[str], timeout: float = 30.0) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TestbedError(f"{' '.join(argv)}: {exc}") from None
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise TestbedError(f"{' '.join(argv)}: {err[-1] if err else f'exit {proc.returncode}'}")
    return proc.stdout


def missing_prerequisites() -> str | None:
    """Why the testbed cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth and sysfs NAPI knobs)"
    for tool in ("ip", "ethtool"):
        if not any(Path(d, tool).exists() for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin")):
            return f"needs {tool} (Debian package {'iproute2' if tool == 'ip' else tool})"
    return None


@dataclass
class Testbed:
    """Client namespace A and server namespace B, veth ``a`` in A and ``b`` in B."""

    tag: str = field(default_factory=lambda: f"{os.getpid()}{secrets.token_hex(2)}")
    ns_a: str = ""
    ns_b: str = ""
    dev_a: str = ""
    dev_b: str = ""
    client_addr: str = _CLIENT_ADDR
    server_addr: str = _SERVER_ADDR
    server: subprocess.Popen[str] | None = None
    _server_log: IO[str] | None = None
    _created: list[str] = field(default_factory=list)
    app: AppSpec | None = None  # a competing job on the server's CPU (and the client on another)
    job: subprocess.Popen[str] | None = None
    counter: AppCounter | None = None
    group: CpuGroup | None = None

    def __post_init__(self) -> None:
        self.ns_a, self.ns_b = f"vftb-{self.tag}-a", f"vftb-{self.tag}-b"
        # IFNAMSIZ is 16 with the NUL: keep device names short.
        self.dev_a, self.dev_b = f"vtb{self.tag[-6:]}a", f"vtb{self.tag[-6:]}b"

    # ---- lifecycle --------------------------------------------------------------------

    def setup(self) -> None:
        from pyroute2 import IPRoute, netns

        for ns in (self.ns_a, self.ns_b):
            netns.create(ns)
            self._created.append(ns)
            # No IPv6 chatter (router solicitations, MLD) on the new links: only our packets.
            self.ns_exec(ns, ["sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; "
                                          "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6"])
        # The pair is made in this namespace and each end moved; inside the namespaces `ip -n`
        # configures them (pyroute2's netns sockets fork a helper, which would inherit our
        # signal handlers).
        with IPRoute() as ipr:
            ipr.link("add", ifname=self.dev_a, kind="veth", peer=self.dev_b)
            try:
                ipr.link("set", index=ipr.link_lookup(ifname=self.dev_a)[0], net_ns_fd=self.ns_a)
                ipr.link("set", index=ipr.link_lookup(ifname=self.dev_b)[0], net_ns_fd=self.ns_b)
            except Exception:
                for dev in (self.dev_a, self.dev_b):
                    for idx in ipr.link_lookup(ifname=dev):
                        ipr.link("del", index=idx)
                raise
        for ns, dev, addr in ((self.ns_a, self.dev_a, self.client_addr), (self.ns_b, self.dev_b, self.server_addr)):
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
            _run(["ip", "-n", ns, "link", "set", dev, "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            # With TSO on, veth hands packets to netif_rx and no NAPI knob has any effect;
            # GRO on gives each veth receive queue its NAPI instance.
            self.ns_exec(ns, ["ethtool", "-K", dev, "tso", "off", "gro", "on"])
        self.start_server()
        if self.app is not None:
            self.start_job(self.app)

    def start_job(self, app: AppSpec) -> None:
        """The competing job on the server's CPU, both in the testbed's CPU group; stopped
        (SIGSTOP) except during probes, so it takes the CPU only while it is measured."""
        from vftune.testbed.cpugroup import CpuGroup

        if max(app.cpu, app.client_cpu) >= (os.cpu_count() or 1):
            raise TestbedError(f"the competing job needs CPUs {app.cpu} and {app.client_cpu}; "
                               f"this machine has {os.cpu_count()}")
        # Receive processing where a NIC's interrupt would put it: veth runs a queue's NAPI on
        # the sending CPU, so RPS steers each end's received packets to its own side's CPU (an
        # IPI per NAPI poll, the receiver's "interrupt") and the knob is set on the server's
        # end only (the receiver's NIC; the client stands for remote senders).
        for (ns, dev), cpu in zip(self.ends(), (app.client_cpu, app.cpu)):
            path = f"/sys/class/net/{dev}/queues/rx-0/rps_cpus"
            got = self.ns_exec(ns, ["sh", "-c", f"echo {1 << cpu:x} > {path}; cat {path}"]).strip()
            if int(got.replace(",", ""), 16) != 1 << cpu:
                raise TestbedError(f"{path}: wrote {1 << cpu:x}, read back {got}")
        self.group = CpuGroup.create(f"vftb-{self.tag}")
        self.pin_server(app.cpu)
        self.group.add(self.server_pid)
        self.counter = AppCounter.create("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
        self.job = subprocess.Popen([sys.executable, "-m", "vftune.testbed.appjob", "--counter", str(self.counter.path),
                                     "--cpu", str(app.cpu), "--nice", str(app.nice), "--parent", str(os.getpid())],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.job.stdout is not None and self.job.stderr is not None
        self.group.add(self.job.pid)
        line = self.job.stdout.readline()  # "ready" once pinned and counting
        if line.strip() != "ready":
            self.job.wait(timeout=5)
            err = self.job.stderr.read().strip().splitlines()
            raise TestbedError(f"competing job did not start: {err[-1] if err else line.strip() or 'no output'}")
        self.job.send_signal(signal.SIGSTOP)

    def job_running(self, on: bool) -> None:
        """Let the competing job run (a probe starts) or stop it (the probe is over)."""
        if self.job is None:
            return
        if self.job.poll() is not None:
            raise TestbedError(f"the competing job exited (status {self.job.returncode})")
        self.job.send_signal(signal.SIGCONT if on else signal.SIGSTOP)

    def add_to_group(self, pid: int) -> None:
        if self.group is not None:
            self.group.add(pid)

    def start_server(self) -> None:
        self._server_log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - lives as long as the server
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.ns_b, *LOADGEN_NICE, sys.executable, "-m", "vftune.testbed.loadgen", "server",
             "--bind", self.server_addr, "--port", str(SERVER_PORT)],
            stdout=subprocess.PIPE, stderr=self._server_log, text=True)
        assert self.server.stdout is not None
        line = self.server.stdout.readline()  # "ready" once it listens: the readiness condition
        if line.strip() != "ready":
            raise TestbedError(f"load server did not start: {self.server_error() or line.strip()}")

    def server_error(self) -> str | None:
        """The server's last stderr line once it has exited, else None."""
        if self.server is None or self._server_log is None or self.server.poll() is None:
            return None
        self._server_log.seek(0)
        lines = self._server_log.read().strip().splitlines()
        return lines[-1] if lines else f"exit {self.server.returncode}"

    def teardown(self) -> None:
        """Idempotent: stop the job and the server, remove the CPU group, delete both namespaces
        (and with them the veth pair)."""
        if self.job is not None:
            if self.job.poll() is None:
                self.job.kill()  # SIGKILL ends a stopped process too
                self.job.wait(timeout=5)
            self.job = None
        if self.counter is not None:
            self.counter.remove()
            self.counter = None
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait(timeout=5)
        self.server = None
        if self._server_log is not None:
            self._server_log.close()
            self._server_log = None
        if self.group is not None:
            self.group.remove()
            self.group = None
        from pyroute2 import netns

        while self._created:
            ns = self._created.pop()
            with contextlib.suppress(OSError):
                netns.remove(ns)

    def __enter__(self) -> Testbed:
        try:
            self.setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    # ---- driving ----------------------------------------------------------------------

    def ns_exec(self, ns: str, argv: list[str], timeout: float = 30.0) -> str:
        return _run(["ip", "netns", "exec", ns, *argv], timeout=timeout)

    def ends(self) -> tuple[tuple[str, str], ...]:
        return ((self.ns_a, self.dev_a), (self.ns_b, self.dev_b))

    def apply(self, knob: Knob) -> None:
        """Write the knob on both veth ends (with a competing job: the server's end) and read it
        back; a mismatch is an error."""
        for ns, dev in self.ends()[1:] if self.app is not None else self.ends():
            base = f"/sys/class/net/{dev}"
            attrs = knob.sysfs()
            script = "; ".join(f"echo {v} > {base}/{k}" for k, v in attrs.items())
            script += "; " + "; ".join(f"cat {base}/{k}" for k in attrs)
            got = self.ns_exec(ns, ["sh", "-c", script]).split()
            want = list(attrs.values())
            if got != want:
                raise TestbedError(f"{dev}: wrote {dict(zip(attrs, want))}, read back {got}")

    def xdp_packets(self) -> int:
        """rx_queue_0_xdp_packets summed over both ends: grows only when veth's NAPI path runs."""
        total = 0
        for ns, dev in self.ends():
            out = self.ns_exec(ns, ["ethtool", "-S", dev])
            m = re.search(r"rx_queue_0_xdp_packets:\s*(\d+)", out)
            if m is None:
                raise TestbedError(f"ethtool -S {dev}: no rx_queue_0_xdp_packets counter")
            total += int(m.group(1))
        return total

    def napi_thread_pids(self) -> list[int]:
        """Kernel threads polling our veths' NAPI (threaded mode): napi/<dev>-<id>."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith(("napi/" + self.dev_a, "napi/" + self.dev_b, "ksoftirqd/")):
                pids.append(int(entry.name))
        return pids

    def pin_server(self, cpu: int) -> None:
        """Keep the echo server on one CPU (the competing application's)."""
        try:
            os.sched_setaffinity(self.server_pid, {cpu})
        except OSError as exc:
            raise TestbedError(f"cannot pin the load server to CPU {cpu}: {exc}") from None

    @property
    def server_pid(self) -> int:
        """The echo server's pid (`ip netns exec` execs into the command, so it is the Popen's)."""
        assert self.server is not None
        return self.server.pid
