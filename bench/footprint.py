"""The agent's own footprint on the 126-VF fixture host, printed against the targets of the issue
"The agent's own footprint".

The agent runs as `vftune run` does (tests/fixtures/agent_on_tree.py: journal, restore, API
process, page workers, signals) on the fixture tree with its libvirt test driver, at 4 ticks a
second, for each policy and load:
  steady   replayed netlink counters at a fixed rate per VF;
  changing rates that alternate between 1x and 3x every 5 s, each VF at its own phase;
  idle     counters that do not move (no traffic).
Printed per run: CPU share of the agent's process and of its children (the API process and its
page workers) from /proc/PID/stat over --seconds after --warmup, with no client connected; RSS
of each; and how long after the restore a SIGTERM with no client leaves the process.

Beside them, in this process (no API, no signals): the per-tick breakdown from a cProfile run of
the same agent on the same tree, with no view wanted, as the service runs with no client (its
API process gets a heartbeat every 2 s; the tick's CPU back to back and after a real sleep of the
interval, as the service's ticks come; shares of the tick's wall time in the profile, from its caller
table: sample = the backend's snapshot + rate derivation; tuner = the VF policies' step, state and
measured window; PF = the PF controllers; writes = ITR and mode writes, read-backs, inventory;
record = the row recorder and the store; loop = the rest, the tick's own bookkeeping), the CPU of
one view (the copy of 126 VFs the API process gets, built and pickled) and of the policies'
states a view copies (what a tick adds when a reader takes a view after every one), the
sampling pass alone (the backend's snapshot, median of --passes) as the in-run reference, and
the tuner's top functions by their own time (--top). --ticks-only prints this part alone, for
the steady and the idle load.

Then, on the search/changing run, 20 clients for --load-seconds: each asks a 1000-row page of a
VF's history (a history file pre-filled with one hour of per-second rows and seven days of
1-minute rows for every VF) or /v1/vfs, with one client polling /healthz beside them; p50/p99
of each, the clients' own CPU, and the highest memory while they run (agent RSS, summed RSS and
PSS: the page workers are up then). The memory verdicts take the worse of that and no client.

    .venv/bin/python bench/footprint.py [--seconds 30] [--warmup 12] [--policy search] [--load idle]
                                        [--ticks-only] [--top 10]

The machine this runs on is part of every figure: the script prints the load average, and a
PASS from a machine that was not quiet says so.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import os
import pickle
import pstats
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
import hosttree
from agent_on_tree import ChangingHost
from linux_host import ManualClock, fixture_replies, make_tree
from netlink_wire import CountingHost

from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import pf_controller, vf_policy
from vftune.hostdriver.linux.host import LinuxHost
from vftune.hostdriver.linux.netlink_vfstats import ReplaySource
from vftune.store.db import Store

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
INTERVAL_S = 0.25
TARGET_CPU_SHARE = 0.01  # of one core, every vftune process together, search policy
TARGET_IDLE_CPU_SHARE = 0.005  # the same on a host without traffic
TARGET_AGENT_RSS_MB = 80.0
TARGET_TOTAL_RSS_MB = 150.0
TARGET_EXIT_AFTER_RESTORE_S = 1.0
TARGET_HISTORY_P99_S = 0.100
TARGET_VFS_P99_S = 0.050
QUIET_LOAD = 0.5  # a load average above this (beyond our own processes) makes the figures noisy
CLIENTS = 20
PAGE_ROWS = 1000
RAW_HISTORY_S = 3600
ROLLUP_HISTORY_DAYS = 7


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                continue
    return out


def cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    match = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(match.group(1)) / 1024 if match else 0.0


def pss_mb(pid: int) -> float:
    """Proportional set size: shared pages (the interpreter, libraries) split between the
    processes mapping them, so a sum over processes counts each page once."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0
    match = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) / 1024 if match else 0.0


class MemoryPeaks(threading.Thread):
    """The highest agent RSS, sum of RSS and sum of PSS over the agent and its children, read
    every 0.25 s while the clients run (the page workers are up then; idle, they exit)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.done = pid, threading.Event()
        self.agent_rss = self.total_rss = self.total_pss = 0.0
        self.at_peak: list[tuple[str, float]] = []  # each process' RSS when the sum was highest

    def run(self) -> None:
        while not self.done.wait(0.25):
            pids = descendants(self.pid)
            parts = [(role(p), rss_mb(p)) for p in pids]
            self.agent_rss = max(self.agent_rss, rss_mb(self.pid))
            total = sum(mb for _role, mb in parts)
            if total > self.total_rss:
                self.total_rss, self.at_peak = total, parts
            self.total_pss = max(self.total_pss, sum(map(pss_mb, pids)))


def role(pid: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "gone"
    if b"vftune.store.pages" in cmdline:
        return "page worker"
    return "API" if b"vftune.api.process" in cmdline else "agent"


# -- a history file worth paging -------------------------------------------------------------


def filled_history(path: Path) -> Path:
    """One hour of per-second rows and seven days of 1-minute rows for each of the tree's VFs,
    ending now: every history page of 1000 rows is a full one."""
    Store(path).close()  # the schema
    vfs = [hosttree.vf_bdf(bdf, n) for bdf, _if, _ix, _patched, numvfs in (hosttree.PF0, hosttree.PF1)
           for n in range(numvfs)]
    now = time.time()
    con = sqlite3.connect(path)
    con.executemany("INSERT OR IGNORE INTO targets (name) VALUES (?)", [(v,) for v in vfs])
    ids = dict(con.execute("SELECT name, id FROM targets"))
    for k, pci in enumerate(vfs):
        vf = ids[pci]
        base = 1e5 * (1 + k % 7)
        con.executemany(
            "INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            ((vf, now - RAW_HISTORY_S + i, 1.0, base + i % 97 / 3, (base + i % 97 / 3) * 1400 * 8, base / 2,
              base * 40, 8000.0 + i % 13, 20345, 0.25 + (i % 11) / 100, 1) for i in range(RAW_HISTORY_S)))
        start = now - RAW_HISTORY_S - ROLLUP_HISTORY_DAYS * 86400
        con.executemany(
            "INSERT INTO samples_1m VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            ((vf, start + 60 * i, 60.0, base, base * 11200, base / 2, base * 40, 8000.0, 20345, 0.3, 1,
              start + 60 * i + 59) for i in range(ROLLUP_HISTORY_DAYS * 1440)))
    con.commit()
    con.close()
    return path


# -- the agent as a service, measured from outside -----------------------------------------------


def _get_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=30).json().get("ticks", 0) > 0
    except (httpx.HTTPError, ValueError):
        return False


def _latencies(port: int, seconds: float) -> tuple[dict[str, list[float]], float]:
    """20 clients (half history pages, half /v1/vfs) and one on /healthz, for `seconds`; and
    the clients' own CPU as a share of a core (taken from the service on a small machine)."""
    base = f"http://127.0.0.1:{port}"
    vfs = [hosttree.vf_bdf(hosttree.PF0[0], n) for n in range(CLIENTS)]
    out: dict[str, list[float]] = {"history": [], "vfs": [], "healthz": []}

    async def client(kind: str, n: int, end: float) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=60) as c:
            while time.monotonic() < end:
                path = (f"/v1/vfs/{vfs[n]}/history?since=0&limit={PAGE_ROWS}" if kind == "history"
                        else "/v1/vfs" if kind == "vfs" else "/healthz")
                t0 = time.perf_counter()
                r = await c.get(path)
                took = time.perf_counter() - t0
                if r.status_code == 200:
                    out[kind].append(took)
                if kind == "healthz":
                    await asyncio.sleep(0.05)

    async def all_clients() -> None:
        end = time.monotonic() + seconds
        tasks = [client("history" if n % 2 == 0 else "vfs", n, end) for n in range(CLIENTS)]
        await asyncio.gather(*tasks, client("healthz", 0, end))

    cpu0, wall0 = time.process_time(), time.monotonic()
    asyncio.run(all_clients())
    return out, (time.process_time() - cpu0) / (time.monotonic() - wall0)


def measure(policy: str, load: str, seconds: float, warmup: float, history: Path | None,
            load_seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vftune-footprint-") as tmp:
        root, db, port = Path(tmp) / "host", Path(tmp) / "vftune.db", free_port()
        make_tree(root)
        if history is not None:
            shutil.copy(history, db)
        log = Path(tmp) / "agent.log"
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fixtures" / "agent_on_tree.py"), str(root),
                                 str(db), str(port), f"policy={policy}", f"interval={INTERVAL_S}", f"load={load}"],
                                stdout=subprocess.DEVNULL, stderr=log.open("w"))
        out: dict[str, Any] = {}
        try:
            deadline = time.monotonic() + 180
            while not _get_ok(f"http://127.0.0.1:{port}/healthz"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"agent did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
            time.sleep(warmup)
            pids = descendants(proc.pid)
            before = {p: cpu_s(p) for p in pids}
            t0 = time.monotonic()
            time.sleep(seconds)
            wall = time.monotonic() - t0
            out["agent"] = (cpu_s(proc.pid) - before[proc.pid]) / wall
            others = [p for p in descendants(proc.pid) if p != proc.pid]
            out["others"] = sum(cpu_s(p) - before.get(p, 0.0) for p in others) / wall
            out["agent_rss"] = rss_mb(proc.pid)
            out["total_rss"] = out["agent_rss"] + sum(rss_mb(p) for p in others)
            out["total_pss"] = sum(map(pss_mb, descendants(proc.pid)))
            if load_seconds > 0:
                peaks = MemoryPeaks(proc.pid)
                peaks.start()
                out["latency"], out["clients_cpu"] = _latencies(port, load_seconds)
                peaks.done.set()
                peaks.join()
                out["load_rss"] = (peaks.agent_rss, peaks.total_rss, peaks.total_pss)
                out["load_parts"] = peaks.at_peak
                time.sleep(3)  # the clients' connections closed: "no client" for the stop below
            signalled = time.time()
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            gone = time.time()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        restored = [line for line in log.read_text().splitlines() if "restore on stop" in line]
        last = restored[-1][:23] if restored else None
        # Nothing written (observe): no restore line, the stop began with the signal.
        restore_done = datetime.strptime(last, "%Y-%m-%d %H:%M:%S,%f").timestamp() if last else signalled
        out["stop_s"] = gone - signalled
        out["exit_after_restore"] = gone - restore_done
    return out


# -- the tick, profiled in this process -------------------------------------------------------


def _push_view(agent: Agent) -> bytes:
    return pickle.dumps(agent.view())  # what the API process gets when a reader asks


# The tuner's own code (a profile's top functions from these files are printed for its owner).
TUNER_FILES = tuple(f"control/{name}.py" for name in (
    "tuner", "itr_search", "objective", "memory", "change", "window", "port", "restart", "causes",
    "policy")) + ("agent/value.py", "vftune/itr.py")
# Called from Agent.tick, by what they are: the rest of the tick (its own lines and helpers) is "loop".
SAMPLE = (("linux/host.py", "snapshot"), ("agent/sampling.py", "derive"))
WRITES = (("agent/loop.py", "_apply_itr"), ("agent/loop.py", "_apply_mode"), ("agent/loop.py", "_keep_warm"),
          ("agent/loop.py", "_collect"), ("agent/loop.py", "refresh_inventory"))
RECORD = (("agent/recording.py", "add"), ("agent/recording.py", "take"), ("agent/recording.py", "due"),
          ("store/db.py", "record_tick"), ("store/db.py", "record_decisions"), ("store/db.py", "maintain"))
POLICY_CALLS = ("step", "state", "measured_window")  # a VF policy's, from the tick (PF controllers': control/mode.py)


def _tick_parts(stats: pstats.Stats) -> dict[str, float]:
    """CPU of each part of Agent.tick, from the profile's caller table (time in each callee when
    called from the tick), as shares of the tick."""
    table = stats.stats  # type: ignore[attr-defined]
    tick = next(k for k in table if k[0].endswith("agent/loop.py") and k[2] == "tick")
    total = table[tick][3]
    parts = dict.fromkeys(("sample", "tuner", "pf", "writes", "record", "loop"), 0.0)
    for (f, _line, fn), value in table.items():
        from_tick = value[4].get(tick)
        if from_tick is None:
            continue
        ct = from_tick[3]
        if any(f.endswith(e) and fn == n for e, n in SAMPLE):
            parts["sample"] += ct
        elif any(f.endswith(e) and fn == n for e, n in WRITES):
            parts["writes"] += ct
        elif any(f.endswith(e) and fn == n for e, n in RECORD):
            parts["record"] += ct
        elif fn in POLICY_CALLS and f.endswith("control/mode.py"):
            parts["pf"] += ct
        elif fn in POLICY_CALLS and not f.endswith("agent/loop.py"):
            parts["tuner"] += ct
    parts["loop"] = total - sum(parts.values())
    return {k: v / total for k, v in parts.items()}


def _tuner_top(stats: pstats.Stats, n: int) -> list[tuple[str, float, float, int]]:
    """The tuner's functions by their own CPU: (file:function, own share of the tick, cumulative
    share, calls)."""
    table = stats.stats  # type: ignore[attr-defined]
    tick = next(k for k in table if k[0].endswith("agent/loop.py") and k[2] == "tick")
    total = table[tick][3]
    rows = [(f"{f.split('vftune/', 1)[-1]}:{line}({fn})", v[2] / total, v[3] / total, v[1])
            for (f, line, fn), v in table.items() if f.endswith(TUNER_FILES)]
    return sorted(rows, key=lambda r: -r[1])[:n]


def _replies(load: str) -> CountingHost:
    """The fixture's netlink replies under a load, as agent_on_tree.py makes them."""
    replies = fixture_replies(seed=7)
    if load == "idle":
        replies.frozen = {(pf, n) for pf, (_ifindex, numvfs) in replies.pfs.items() for n in range(numvfs)}
    elif load == "changing":
        replies = ChangingHost(dict(replies.pfs), seed=7, macs=replies.macs)
    return replies


def tick_profile(policy: str, ticks: int, passes: int, top: int = 0, load: str = "steady",
                 slept_ticks: int = 0) -> dict[str, Any]:
    """The agent's tick in this process, as the service runs it with no client connected: no
    view is wanted, so the policies' states are not copied (api/process.py sends a heartbeat).
    `slept_ticks` more ticks, and as many sampling passes, are timed each after a real sleep of
    the interval, as the service ticks: the caches are then colder than back to back (the
    service's figure follows these)."""
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="vftune-tick-") as tmp:
        clock = ManualClock()
        sysfs, procfs, uri = make_tree(Path(tmp) / "host")
        replies = _replies(load)
        host = LinuxHost(sysfs, procfs, uri, ReplaySource(replies), clock=clock, sleeper=clock.sleep)
        store = Store(Path(tmp) / "vftune.db")
        agent = Agent(host, store, vf_policy(policy), pf_controller("hybrid"), AgentConfig(interval=INTERVAL_S))
        agent.view_wanted = lambda: False
        agent.start("footprint")
        for _ in range(40):  # past the first windows and the first record period
            clock.sleep(INTERVAL_S)
            agent.tick()
        cpu0 = time.process_time()
        for _ in range(ticks):
            clock.sleep(INTERVAL_S)
            agent.tick()
        tick_ms = (time.process_time() - cpu0) / ticks * 1000
        slept_ms = []
        for _ in range(slept_ticks):
            clock.sleep(INTERVAL_S)
            time.sleep(INTERVAL_S)
            c0 = time.process_time()
            agent.tick()
            slept_ms.append((time.process_time() - c0) * 1000)
        cpu0 = time.process_time()
        for _ in range(ticks // 4):
            _push_view(agent)
        view_ms = (time.process_time() - cpu0) / max(1, ticks // 4) * 1000
        # What a tick adds when a reader takes a view after every one: the policies' states.
        policies = list(agent._policies.values())
        cpu0 = time.process_time()
        for _ in range(ticks // 4):
            for p in policies:
                p.state()
        states_ms = (time.process_time() - cpu0) / max(1, ticks // 4) * 1000
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(ticks):
            clock.sleep(INTERVAL_S)
            agent.tick()
        prof.disable()
        stats = pstats.Stats(prof)
        parts = _tick_parts(stats)
        passes_ms = []
        for _ in range(passes):
            c0 = time.process_time()
            host.snapshot()
            passes_ms.append((time.process_time() - c0) * 1000)
        slept_passes_ms = []
        for _ in range(slept_ticks):
            time.sleep(INTERVAL_S)
            c0 = time.process_time()
            host.snapshot()
            slept_passes_ms.append((time.process_time() - c0) * 1000)
        # The fixture's netlink replies alone, one per PF as a pass asks them: part of every pass
        # and tick above and of the service's agent process, where a real host's kernel builds them.
        replies_ms = []
        for _ in range(passes):
            c0 = time.process_time()
            for pf in replies.pfs:
                replies(pf)
            replies_ms.append((time.process_time() - c0) * 1000)
        host.restore()
        host.close()
        store.close()
    logging.disable(logging.NOTSET)
    return {"tick_ms": tick_ms, "slept_tick_ms": statistics.median(slept_ms) if slept_ms else float("nan"),
            "view_ms": view_ms, "states_ms": states_ms, **parts,
            "pass_ms": statistics.median(passes_ms),
            "slept_pass_ms": statistics.median(slept_passes_ms) if slept_passes_ms else float("nan"),
            "replies_ms": statistics.median(replies_ms),
            "top": _tuner_top(stats, top) if top else []}


# -- the report -------------------------------------------------------------------------------


def p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="CPU window per run")
    parser.add_argument("--warmup", type=float, default=12.0)
    parser.add_argument("--policy", action="append", default=None, help="observe, search (default both)")
    parser.add_argument("--load", action="append", default=None, help="steady, changing, idle (default all)")
    parser.add_argument("--load-seconds", type=float, default=20.0, help="the 20 clients' run; 0: none")
    parser.add_argument("--ticks", type=int, default=200, help="ticks of the in-process profile")
    parser.add_argument("--passes", type=int, default=200, help="sampling passes of the reference")
    parser.add_argument("--slept-ticks", type=int, default=24,
                        help="ticks timed after a real sleep of the interval each (median printed); 0: none")
    parser.add_argument("--top", type=int, default=10, help="the tuner's top functions printed per policy; 0: none")
    parser.add_argument("--ticks-only", action="store_true",
                        help="the per-tick part alone, steady and idle (no service runs)")
    args = parser.parse_args()
    policies = args.policy or ["observe", "search"]
    loads = args.load or ["steady", "changing", "idle"]
    load_avg = os.getloadavg()[0]
    print(f"126-VF fixture host, {1 / INTERVAL_S:g} ticks/s; CPU over {args.seconds:g} s after {args.warmup:g} s, "
          f"no client; load average {load_avg:.2f} on {os.cpu_count()} CPUs before the runs")

    print("\nper tick, in this process, no view as with no client (cProfile shares of the tick; "
          "CPU ms without the profiler):")
    print(f"{'policy':<8} {'load':<9} {'tick ms':>8} {'slept':>6} {'sample':>7} {'tuner':>6} {'PF':>4} "
          f"{'writes':>7} {'record':>7} "
          f"{'loop':>5} {'view ms':>8} {'states ms':>10} {'sampling pass ms':>17} {'slept':>6} {'pass at 4/s':>12} "
          f"{'fixture replies ms':>19} {'replies at 4/s':>15}")
    profiles: dict[str, dict[str, Any]] = {}
    for policy in policies:
        for load in ["steady", "idle"] if args.ticks_only else ["steady"]:
            r = tick_profile(policy, args.ticks, args.passes, args.top if load == "steady" else 0, load,
                             args.slept_ticks)
            if load == "steady":
                profiles[policy] = r
            print(f"{policy:<8} {load:<9} {r['tick_ms']:>8.2f} {r['slept_tick_ms']:>6.2f} "
                  f"{r['sample'] * 100:>6.0f}% {r['tuner'] * 100:>5.0f}% "
                  f"{r['pf'] * 100:>3.0f}% {r['writes'] * 100:>6.0f}% {r['record'] * 100:>6.0f}% {r['loop'] * 100:>4.0f}% "
                  f"{r['view_ms']:>8.2f} {r['states_ms']:>10.2f} {r['pass_ms']:>17.2f} {r['slept_pass_ms']:>6.2f} "
                  f"{r['pass_ms'] / INTERVAL_S / 10:>11.2f}% {r['replies_ms']:>19.2f} "
                  f"{r['replies_ms'] / INTERVAL_S / 10:>14.2f}%")
    print("(slept: the median tick or pass, ms, when each follows a real sleep of the interval, as the service's do)")
    print("(fixture replies: the fixture's netlink replies built alone, one per PF as a pass asks them; inside "
          "every tick, pass and the service's agent CPU here, a kernel's work on a real host)")
    for policy, r in profiles.items():
        if r["top"]:
            print(f"\n{policy}: the tuner's functions by own CPU (share of the tick; cumulative; calls):")
            for name, own, cum, calls in r["top"]:
                print(f"  {own * 100:5.1f}%  {cum * 100:5.1f}%  {calls:>7}  {name}")

    if args.ticks_only:
        return
    history = None
    if args.load_seconds > 0 and "search" in policies and "changing" in loads:
        history = filled_history(Path(tempfile.mkdtemp(prefix="vftune-history-")) / "history.db")
    print("\nas a service (agent_on_tree.py, API process and page workers):")
    print(f"{'policy':<8} {'load':<9} {'agent CPU':>10} {'API+workers':>12} {'total':>8} {'agent RSS':>10} "
          f"{'all RSS':>9} {'stop':>7} {'exit after restore':>19}")
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for policy in policies:
        for load in loads:
            clients = history is not None and (policy, load) == ("search", "changing")
            r = results[(policy, load)] = measure(policy, load, args.seconds, args.warmup,
                                                  history if clients else None,
                                                  args.load_seconds if clients else 0)
            print(f"{policy:<8} {load:<9} {r['agent'] * 100:>9.2f}% {r['others'] * 100:>11.2f}% "
                  f"{(r['agent'] + r['others']) * 100:>7.2f}% {r['agent_rss']:>7.0f} MB {r['total_rss']:>6.0f} MB "
                  f"{r['stop_s']:>6.2f}s {r['exit_after_restore']:>17.2f} s")
    if history is not None:
        shutil.rmtree(history.parent, ignore_errors=True)
        lat = results[("search", "changing")]["latency"]
        print(f"\n{CLIENTS} clients for {args.load_seconds:g} s (history pages of {PAGE_ROWS} rows on a "
              f"{RAW_HISTORY_S // 3600} h raw + {ROLLUP_HISTORY_DAYS} d 1-minute store; /v1/vfs), /healthz beside them:")
        for kind, values in lat.items():
            print(f"  {kind:<8} n={len(values):>5}  p50 {p(values, 0.5) * 1000:7.1f} ms  p99 {p(values, 0.99) * 1000:7.1f} ms")
        loaded = results[("search", "changing")]
        print(f"  the clients' own CPU: {loaded['clients_cpu'] * 100:.0f}% of a core")
        agent_rss, total_rss, total_pss = loaded["load_rss"]
        print(f"  memory while they ran (highest): agent RSS {agent_rss:.0f} MB, all RSS {total_rss:.0f} MB "
              f"(PSS {total_pss:.0f} MB, shared pages counted once; with no client: {loaded['total_pss']:.0f} MB)")
        print("  at the highest sum: " + ", ".join(f"{who} {mb:.0f} MB" for who, mb in loaded["load_parts"]))

    load_after = os.getloadavg()[0]
    noisy = max(load_avg, load_after) > QUIET_LOAD + 1.0  # our own agent and clients add about one
    print(f"\nload average {load_after:.2f} after the runs"
          + (f": NOT a quiet machine (> {QUIET_LOAD + 1.0:g}); CPU and latency figures are upper bounds"
             if noisy else ""))
    checks: list[tuple[bool, str]] = []
    for load in loads:
        r = results.get(("search", load))
        if r is None:
            continue
        total = r["agent"] + r["others"]
        target = TARGET_IDLE_CPU_SHARE if load == "idle" else TARGET_CPU_SHARE
        checks.append((total <= target, f"search, {load}: all processes {total * 100:.2f}% of a core "
                       f"<= {target * 100:g}% (sampling pass alone {profiles['search']['pass_ms'] / INTERVAL_S / 10:.2f}%, "
                       f"the fixture's netlink replies in it {profiles['search']['replies_ms'] / INTERVAL_S / 10:.2f}%)"
                       if "search" in profiles else f"search, {load}: all processes {total * 100:.2f}% <= {target * 100:g}%"))
    for (policy, load), r in results.items():
        if (policy, load) != ("search", "changing") and len(results) > 1:
            continue
        # The worst of the run with no client and the clients' run (page workers up).
        agent_rss, total_rss, _pss = r.get("load_rss", (0.0, 0.0, 0.0))
        agent_rss, total_rss = max(agent_rss, r["agent_rss"]), max(total_rss, r["total_rss"])
        when = " (highest, clients included)" if "load_rss" in r else " (no client)"
        checks += [
            (agent_rss <= TARGET_AGENT_RSS_MB,
             f"{policy}, {load}: agent RSS {agent_rss:.0f} MB <= {TARGET_AGENT_RSS_MB:g} MB{when}"),
            (total_rss <= TARGET_TOTAL_RSS_MB,
             f"{policy}, {load}: all RSS {total_rss:.0f} MB <= {TARGET_TOTAL_RSS_MB:g} MB{when}"),
        ]
    worst_exit = max(results.values(), key=lambda r: r["exit_after_restore"])["exit_after_restore"]
    checks.append((worst_exit <= TARGET_EXIT_AFTER_RESTORE_S,
                   f"SIGTERM, no client: gone {worst_exit:.2f} s after the restore (worst run) "
                   f"<= {TARGET_EXIT_AFTER_RESTORE_S:g} s"))
    if history is not None:
        lat = results[("search", "changing")]["latency"]
        hz = p(lat["healthz"], 0.99) * 1000
        checks.append((p(lat["history"], 0.99) <= TARGET_HISTORY_P99_S,
                       f"history p99 {p(lat['history'], 0.99) * 1000:.0f} ms <= {TARGET_HISTORY_P99_S * 1000:g} ms "
                       f"at {CLIENTS} clients (/healthz p99 {hz:.0f} ms beside it)"))
        checks.append((p(lat["vfs"], 0.99) <= TARGET_VFS_P99_S,
                       f"/v1/vfs p99 {p(lat['vfs'], 0.99) * 1000:.0f} ms <= {TARGET_VFS_P99_S * 1000:g} ms "
                       f"at {CLIENTS} clients (/healthz p99 {hz:.0f} ms beside it)"))
    for ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'}{' (noisy machine)' if noisy else ''}  {text}")


if __name__ == "__main__":
    main()
