"""CPU time of one Linux-backend sampling pass over 126 VFs, and the backend's resident memory.

The host is the fixture tree (two 82599 PFs x 63 VFs, tests/fixtures/hosttree.py) and the
netlink replies are wire-exact RTM_NEWLINK dumps built with pyroute2's encoder; the pass
decodes them, reads /proc/interrupts, /proc/stat, the patched rxmode files and the guests'
QEMU stat files, and runs the stale/posted-interrupt detection.

    .venv/bin/python bench/linux_sampling.py [--passes N]

Targets: <= 5 ms CPU per pass, < 80 MB resident for the agent's process (the API's own process
is printed beside it).
"""

from __future__ import annotations

import argparse
import logging
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
import hosttree
from netlink_wire import CountingHost

from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import pf_controller, vf_policy
from vftune.api.process import ApiProcess, ApiSettings
from vftune.hostdriver.linux.host import LinuxHost
from vftune.hostdriver.linux.netlink_vfstats import (
    ReplaySource,
    decode_reply,
    parse_link,
    vfinfo_pyroute2,
)
from vftune.store.db import Store

CPU_TARGET_MS = 5.0
RSS_TARGET_MB = 80.0
AGENT_TICKS = 120


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def process_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def pss_mb(pid: int | str) -> float:
    """Proportional set size: shared pages (the interpreter, libraries) split between the
    processes that map them, so two processes' PSS add up to what they hold together."""
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def agent_child(root: Path) -> None:
    """LinuxHost + the tick loop + a SQLite store over the fixture tree, with the API in its
    process as `vftune run` starts it; print both RSS."""
    pfs = {hosttree.PF0[1]: (hosttree.PF0[2], 63), hosttree.PF1[1]: (hosttree.PF1[2], 63),
           hosttree.PF_IDLE[1]: (hosttree.PF_IDLE[2], 0)}
    host = LinuxHost(root / "sys", root / "proc", None, ReplaySource(CountingHost(pfs, seed=2)))
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "vftune.db")
        agent = Agent(host, store, vf_policy("search"), pf_controller("hybrid"), AgentConfig(fit_every_s=15.0))
        sock = socket.create_server(("127.0.0.1", 0))
        api = ApiProcess(sock, ApiSettings(db=str(store.path), token_for_reads=False, log_level="warning",
                                           log_format="text", drain_s=1.0), "bench-token", agent, store)
        agent.start("bench")
        for _ in range(AGENT_TICKS):
            agent.tick()
            api.tick()
        # The API process has its first view and serves: a request makes it build what it keeps.
        port = sock.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(b"GET /v1/vfs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while conn.recv(65536):
                pass
        rss = rss_mb()
        api_rss = process_rss_mb(api._child.proc.pid)
        together = pss_mb("self") + pss_mb(api._child.proc.pid)
        api.drain(2.0)
        agent.shutdown()
        store.close()
    print(f"{rss:.1f} {api_rss:.1f} {together:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=200, help="sampling passes to time (default 200)")
    parser.add_argument("--agent-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent_child:
        logging.disable(logging.WARNING)
        agent_child(args.agent_child)
        return 0
    if args.passes < 1:
        parser.error(f"--passes {args.passes}: must be at least 1")
    rss_before = rss_mb()  # interpreter + imports, before any host state exists
    with tempfile.TemporaryDirectory(prefix="vftune-bench-") as tmp:
        root = hosttree.build_tree(Path(tmp))
        pfs = {hosttree.PF0[1]: (hosttree.PF0[2], 63), hosttree.PF1[1]: (hosttree.PF1[2], 63)}
        counting = CountingHost(pfs, seed=1)
        # Pre-build the dumps so the timing covers the backend, not the fixture encoder.
        dumps = {name: [counting(name) for _ in range(args.passes + 1)] for name in pfs}
        calls = {name: 0 for name in pfs}

        def reply(ifname: str) -> bytes:
            if ifname not in dumps:
                return counting(ifname)
            calls[ifname] += 1
            return dumps[ifname][calls[ifname] - 1]

        hosttree_idle = hosttree.PF_IDLE[1]
        counting.pfs[hosttree_idle] = (hosttree.PF_IDLE[2], 0)
        host = LinuxHost(root / "sys", root / "proc", None, ReplaySource(reply))
        inv = host.inventory()
        n_vfs = len(inv.vfs())
        first = host.snapshot()  # warm-up: file handles, decoder caches
        assert len(first.vfs) == n_vfs == 126, (len(first.vfs), first.errors)
        samples = []
        for _ in range(args.passes):
            t0 = time.process_time()
            snap = host.snapshot()
            samples.append((time.process_time() - t0) * 1000)
        assert len(snap.vfs) == 126 and not snap.errors, snap.errors
        rss = rss_mb()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        host.close()
        # Side by side on the same dumps: the VF-list walker the backend uses vs pyroute2 objects.
        walker, objects = [], []
        for name in dumps:
            for dump in dumps[name][: min(50, args.passes)]:
                t0 = time.process_time()
                parse_link(dump, name)
                t1 = time.process_time()
                for msg in decode_reply(dump, name):
                    vfinfo_pyroute2(msg)
                t2 = time.process_time()
                walker.append((t1 - t0) * 1000)
                objects.append((t2 - t1) * 1000)
        # The whole agent in a process of its own, so the timing data above is not counted.
        child = subprocess.run([sys.executable, __file__, "--agent-child", str(root)],
                               capture_output=True, text=True, check=True)
        agent_rss, api_rss, together = (float(x) for x in child.stdout.split()[-3:])
    median = statistics.median(samples)
    p95 = sorted(samples)[int(0.95 * (len(samples) - 1))]
    print(f"sampling pass, {n_vfs} VFs, {args.passes} passes: CPU median {median:.2f} ms, "
          f"p95 {p95:.2f} ms (target <= {CPU_TARGET_MS:g} ms)")
    print(f"resident memory with LinuxHost and {n_vfs} VFs: {rss:.1f} MB now, {peak:.1f} MB peak "
          f"(target < {RSS_TARGET_MB:g} MB); the interpreter with the same imports: {rss_before:.1f} MB "
          f"({rss / rss_before:.2f}x)")
    w, o = statistics.median(walker), statistics.median(objects)
    print(f"one PF's netlink reply (63 VFs), side by side: backend parse {w:.2f} ms, pyroute2 object "
          f"decoding {o:.2f} ms ({w / o:.2f}x)")
    print(f"resident memory of the agent (LinuxHost + loop + store) after {AGENT_TICKS} ticks "
          f"over {n_vfs} VFs: {agent_rss:.1f} MB (target < {RSS_TARGET_MB:g} MB); its API process (FastAPI, "
          f"uvicorn, the view): {api_rss:.1f} MB; both together (PSS, shared pages counted once) {together:.1f} MB")
    ok = median <= CPU_TARGET_MS and agent_rss < RSS_TARGET_MB
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
