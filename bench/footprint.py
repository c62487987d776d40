"""The agent's own footprint on the 126-VF fixture host: CPU share and resident memory of every
vftune process, per policy, and how soon a SIGTERM with no client connected ends the process.

The agent runs as `vftune run` does (tests/fixtures/agent_on_tree.py: journal, restore, API
process, signals) at 4 ticks a second; process CPU comes from /proc/PID/stat (utime + stime of
the agent and every descendant: the API process and its page workers) over --seconds after a
--warmup. The replayed netlink counters move every tick (the fixture's CountingHost).

    .venv/bin/python bench/footprint.py [--seconds 30] [--warmup 12] [--policy observe --policy search]

Targets (issue "The agent's own footprint"; measure on an otherwise quiet machine):
  search policy, all vftune processes together <= 1% of a core; agent RSS <= 80 MB, all <= 150 MB;
  SIGTERM with no client: the process gone within 1 s after the restore is logged.
Not measured here yet: history-page p99 at 20 clients, the per-tick profile breakdown, an idle host.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
import hosttree

ROOT = Path(__file__).resolve().parent.parent

CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET_CPU_SHARE = 0.01  # of one core, every vftune process together, search policy
TARGET_AGENT_RSS_MB = 80.0
TARGET_TOTAL_RSS_MB = 150.0
TARGET_EXIT_AFTER_RESTORE_S = 1.0


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


def measure(policy: str, seconds: float, warmup: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="vftune-footprint-") as tmp:
        root, db, port = hosttree.build_tree(Path(tmp) / "host"), Path(tmp) / "vftune.db", free_port()
        log = Path(tmp) / "agent.log"
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fixtures" / "agent_on_tree.py"), str(root),
                                 str(db), str(port), f"policy={policy}", "interval=0.25"],
                                stdout=subprocess.DEVNULL, stderr=log.open("w"))
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["ticks"] > 0:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            time.sleep(warmup)
            pids = descendants(proc.pid)
            before = {p: cpu_s(p) for p in pids}
            t0 = time.monotonic()
            time.sleep(seconds)
            wall = time.monotonic() - t0
            agent_share = (cpu_s(proc.pid) - before[proc.pid]) / wall
            others = [p for p in descendants(proc.pid) if p != proc.pid]
            others_share = sum(cpu_s(p) - before.get(p, 0.0) for p in others) / wall
            agent_rss = rss_mb(proc.pid)
            total_rss = agent_rss + sum(rss_mb(p) for p in others)
            signalled = time.time()
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            gone = time.time()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        restored = [line for line in log.read_text().splitlines() if "restore on stop" in line]
        last = restored[-1][:23] if restored else None
        # Nothing written (observe): no restore line, the stop began with the signal.
        after = gone - (datetime.strptime(last, "%Y-%m-%d %H:%M:%S,%f").timestamp() if last else signalled)
    return {"agent": agent_share, "others": others_share, "agent_rss": agent_rss, "total_rss": total_rss,
            "exit_after_restore": after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=12.0)
    parser.add_argument("--policy", action="append", default=None)
    args = parser.parse_args()
    policies = args.policy or ["observe", "search"]
    print(f"126-VF fixture host, 4 ticks/s, CPU over {args.seconds:g} s after {args.warmup:g} s; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (quiet machine: below 0.5)")
    print(f"{'policy':<10} {'agent CPU':>10} {'API+workers':>12} {'total':>8} {'agent RSS':>10} {'all RSS':>9} "
          f"{'exit after restore':>19}")
    results = {}
    for policy in policies:
        r = measure(policy, args.seconds, args.warmup)
        results[policy] = r
        print(f"{policy:<10} {r['agent'] * 100:>9.2f}% {r['others'] * 100:>11.2f}% "
              f"{(r['agent'] + r['others']) * 100:>7.2f}% {r['agent_rss']:>7.0f} MB {r['total_rss']:>6.0f} MB "
              f"{r['exit_after_restore']:>17.2f} s")
    if "search" in results:
        r = results["search"]
        total = r["agent"] + r["others"]
        checks = [
            (total <= TARGET_CPU_SHARE, f"search: all processes {total * 100:.2f}% of a core <= {TARGET_CPU_SHARE * 100:g}%"),
            (r["agent_rss"] <= TARGET_AGENT_RSS_MB, f"agent RSS {r['agent_rss']:.0f} MB <= {TARGET_AGENT_RSS_MB:g} MB"),
            (r["total_rss"] <= TARGET_TOTAL_RSS_MB, f"all RSS {r['total_rss']:.0f} MB <= {TARGET_TOTAL_RSS_MB:g} MB"),
            (r["exit_after_restore"] <= TARGET_EXIT_AFTER_RESTORE_S,
             f"SIGTERM, no client: gone {r['exit_after_restore']:.2f} s after the restore <= {TARGET_EXIT_AFTER_RESTORE_S:g} s"),
        ]
        for ok, text in checks:
            print(f"{'PASS' if ok else 'FAIL'}  {text}")


if __name__ == "__main__":
    main()
