"""What reading one guest's socket drops costs, beside one tick of the fixture host.

A read is what the guest's poller does every --interval (guest_agent/socket_drops.py): for
/proc/net/snmp and /proc/net/snmp6, guest-file-open, guest-file-read (until eof) and
guest-file-close, each preceded by the channel's guest-sync handshake, over the agent's UNIX
socket. The agent is the wire-protocol fake of the tests (tests/fixtures/fake_qga.py, in this
process) and, where installed, a real qemu-ga serving the same fixture files. The tick is
LinuxHost.snapshot() on the fixture tree (two 82599 PFs x 63 VFs), the reader off.

    .venv/bin/python bench/guest_drops_read.py [--reads N]

Wall-clock medians: the read runs on the guest's poller thread, never the tick's, so its wall
time is what a guest's count lags by; its CPU (client side, real qemu-ga) is what it costs here.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
import hosttree
from fake_qga import FakeQga
from netlink_wire import CountingHost
from qga_process import QGA, qga_argv, start_qga_process, stop_qga_process

from vftune.hostdriver.linux.guest_agent import UnixSocketChannel, socket_connector
from vftune.hostdriver.linux.guest_agent.socket_drops import GuestDropsReader
from vftune.hostdriver.linux.host import LinuxHost
from vftune.hostdriver.linux.netlink_vfstats import ReplaySource

NET = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "guest_net"


def timed(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of n calls (one warm-up call first)."""
    fn()
    wall, cpu = [], []
    for _ in range(n):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def three_calls(channel: UnixSocketChannel, path: str) -> Callable[[], None]:
    def run() -> None:
        handle = channel.command("guest-file-open", {"path": path, "mode": "r"})
        try:
            while not channel.command("guest-file-read", {"handle": handle, "count": 65536})["eof"]:
                pass
        finally:
            channel.command("guest-file-close", {"handle": handle})
    return run


def start_qga(tmp: Path) -> subprocess.Popen[bytes] | None:
    if QGA is None:
        return None
    (tmp / "qga-state").mkdir()
    return start_qga_process(qga_argv(tmp / "qga.sock", tmp / "qga-state", tmp / "qga.pid"), tmp / "qga.sock",
                             tmp / "qga.log")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=200, help="reads to time per agent (default 200)")
    args = parser.parse_args()
    if args.reads < 1:
        parser.error(f"--reads {args.reads}: must be at least 1")
    logging.disable(logging.WARNING)
    files = {"/proc/net/snmp": (NET / "snmp").read_bytes(), "/proc/net/snmp6": (NET / "snmp6").read_bytes()}
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="vftune-bench-") as name:
        tmp = Path(name)
        root = hosttree.build_tree(tmp / "host")
        pfs = {hosttree.PF0[1]: (hosttree.PF0[2], 63), hosttree.PF1[1]: (hosttree.PF1[2], 63),
               hosttree.PF_IDLE[1]: (hosttree.PF_IDLE[2], 0)}
        host = LinuxHost(root / "sys", root / "proc", None, ReplaySource(CountingHost(pfs, seed=1)))
        host.inventory()
        rows.append(("one tick: LinuxHost.snapshot(), 126 VFs", *timed(host.snapshot, args.reads)))
        host.close()

        fake = FakeQga(tmp / "fake.sock", files)
        chan = UnixSocketChannel(fake.path, "fake")
        rows.append(("fake agent: open+read+close of /proc/net/snmp", *timed(three_calls(chan, "/proc/net/snmp"),
                                                                             args.reads)))
        chan.close()
        reader = GuestDropsReader(socket_connector(lambda _g: fake.path))
        rows.append(("fake agent: one guest's read (connect, guest-info, both files)",
                     *timed(lambda: reader.read_now("vm"), args.reads)))
        fake.close()

        proc = start_qga(tmp)
        if proc is not None:
            for f in ("snmp", "snmp6"):
                (tmp / f).write_bytes(files[f"/proc/net/{f}"])
            chan = UnixSocketChannel(tmp / "qga.sock", "qga")
            rows.append(("qemu-ga: open+read+close of snmp", *timed(three_calls(chan, str(tmp / "snmp")), args.reads)))
            chan.close()
            reader = GuestDropsReader(socket_connector(lambda _g: tmp / "qga.sock"),
                                      paths=(str(tmp / "snmp"), str(tmp / "snmp6")))
            rows.append(("qemu-ga: one guest's read (connect, guest-info, both files)",
                         *timed(lambda: reader.read_now("vm"), args.reads)))
            stop_qga_process(proc)
    tick = rows[0][1]
    print(f"{'what (median of ' + str(args.reads) + ')':<64} {'wall ms':>8} {'CPU ms':>8} {'x tick':>7}")
    for what, wall, cpu in rows:
        print(f"{what:<64} {wall:8.3f} {cpu:8.3f} {wall / tick:7.2f}")
    if len(rows) < 5:
        print("(qemu-ga is not installed: the real agent's rows are missing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
