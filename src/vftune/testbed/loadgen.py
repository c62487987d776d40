"""Request/response load over TCP: an echo server and a client that measures one window.

Run inside a network namespace (``ip netns exec NS python -m vftune.testbed.loadgen ...``):

    server --bind ADDR --port N
    client --connect ADDR --port N --mode open --rate R --conns C --warmup S --window S

The client is single-threaded on epoll. ``open`` sends at a fixed offered rate, round-robin
over the connections, whether or not answers came back (so CPU compares like with like across
settings); ``closed`` is ping-pong, one request in flight per connection. Each request carries
its send time, so latency is measured without bookkeeping per request. The client reads
/proc/stat at the window's start and end (the machine's CPU, not the namespace's) and prints
one JSON object. epoll waits in whole milliseconds, so open-loop sends leave in small bursts
at 1 ms granularity; latency is taken from the actual send, not the schedule.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import socket
import struct
import sys
import time

from vftune.testbed.appjob import CounterReader
from vftune.testbed.procstat import CpuTicks, cpu_use, read_proc_stat
from vftune.testbed.stats import percentile

_HEADER = struct.Struct("<QQ")  # sequence number, send time (perf_counter_ns)
SLICE_S = 0.1  # sub-window length for the settle and noise series
DRAIN_S = 0.25  # after the window, answers to requests sent in it are still collected


class _Itimerspec(ctypes.Structure):
    _fields_ = [("interval_sec", ctypes.c_long), ("interval_nsec", ctypes.c_long),
                ("value_sec", ctypes.c_long), ("value_nsec", ctypes.c_long)]


def periodic_timerfd(interval_ns: int) -> int:
    """A CLOCK_MONOTONIC timerfd firing every ``interval_ns`` (os.timerfd_create is 3.13+).

    epoll's own timeout has whole-millisecond resolution, which would send an open-loop load in
    1-ms bursts; a timerfd paces each request on its own hrtimer tick."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = int(libc.timerfd_create(time.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "timerfd_create")
    sec, nsec = divmod(interval_ns, 1_000_000_000)
    spec = _Itimerspec(sec, nsec, sec, nsec)
    if libc.timerfd_settime(fd, 0, ctypes.byref(spec), None) != 0:
        err = ctypes.get_errno()
        os.close(fd)
        raise OSError(err, "timerfd_settime")
    return fd


def serve(bind: str, port: int) -> None:
    """Echo every byte back on every connection until killed."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((bind, port))
    lsock.listen(128)
    lsock.setblocking(False)
    ep = select.epoll()
    ep.register(lsock.fileno(), select.EPOLLIN)
    conns: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        for fd, _ in ep.poll():
            if fd == lsock.fileno():
                try:
                    conn, _addr = lsock.accept()
                except BlockingIOError:
                    continue
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conns[conn.fileno()] = conn
                ep.register(conn.fileno(), select.EPOLLIN)
                continue
            conn = conns[fd]
            try:
                data = conn.recv(65536)
                if data:
                    conn.sendall(data)
            except OSError:  # a client that closed with answers in flight: reset, broken pipe
                data = b""
            if not data:
                ep.unregister(fd)
                conns.pop(fd).close()


def task_runtime_ns(pids: list[int]) -> int:
    """CPU time of these tasks from /proc/<pid>/schedstat (exact, not tick-sampled); a task
    that has gone counts 0."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def run_client(addr: str, port: int, mode: str, rate: float, conns: int, warmup: float, window: float,
               size: int, pids: list[int] | None = None, tick: float = 0.001,
               app_counter: str | None = None) -> dict[str, object]:
    """One window of load; with ``app_counter`` (appjob's counter file) also the competing job's
    units of work per second over the same window and its slices."""
    pids = [os.getpid(), *(pids or [])]
    counter = CounterReader(app_counter) if app_counter else None
    socks = []
    for _ in range(conns):
        s = socket.create_connection((addr, port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(5)  # sends block only if the server stalls for this long
        socks.append(s)
    by_fd = {s.fileno(): s for s in socks}
    bufs = {s.fileno(): b"" for s in socks}
    ep = select.epoll()
    for s in socks:
        ep.register(s.fileno(), select.EPOLLIN)
    pad = bytes(max(0, size - _HEADER.size))
    slice_ns = int(SLICE_S * 1e9)
    start = time.perf_counter_ns()
    win_start = start + int(warmup * 1e9)
    win_end = win_start + int(window * 1e9)
    drain_end = win_end + int(DRAIN_S * 1e9)
    tfd = -1
    if mode == "open":
        tfd = periodic_timerfd(int(tick * 1e9))
        ep.register(tfd, select.EPOLLIN)
    credit = 0.0  # requests due and not yet sent (fractional: rate * tick need not be whole)
    seq = 0
    sent_in_window = 0

    def send(sock: socket.socket) -> None:
        nonlocal seq, sent_in_window
        t = time.perf_counter_ns()
        sock.sendall(_HEADER.pack(seq, t) + pad)
        seq += 1
        if win_start <= t < win_end:
            sent_in_window += 1

    latencies: list[int] = []
    n_slices = max(1, int(round(window / SLICE_S)))
    slice_lat: list[list[int]] = [[] for _ in range(n_slices)]
    slice_cpu: list[float] = []
    stat_start: CpuTicks | None = None
    stat_end: CpuTicks | None = None
    task_start = task_end = task_prev = 0
    app_start = app_end = app_prev = 0
    slice_app: list[float] = []
    next_slice = win_start
    if mode == "closed":
        for s in socks:
            send(s)
    while True:
        now = time.perf_counter_ns()
        if stat_start is None and now >= win_start:
            stat_start = read_proc_stat()
            task_start = task_prev = task_runtime_ns(pids)
            if counter is not None:
                app_start = app_prev = counter.read()
            next_slice = win_start + slice_ns
        elif stat_start is not None and now >= next_slice and len(slice_cpu) < n_slices:
            cur = task_runtime_ns(pids)
            slice_cpu.append((cur - task_prev) / slice_ns)
            task_prev = cur
            if counter is not None:
                ops = counter.read()
                slice_app.append((ops - app_prev) / SLICE_S)
                app_prev = ops
            next_slice += slice_ns
        if stat_start is not None and stat_end is None and now >= win_end:
            stat_end = read_proc_stat()  # the window's close; the drain after it is not counted
            task_end = task_runtime_ns(pids)
            if counter is not None:
                app_end = counter.read()
        if now >= drain_end:
            break
        wait_ns = min(next_slice if len(slice_cpu) < n_slices else drain_end, drain_end) - now
        for fd, _ in ep.poll(max(0.0, wait_ns / 1e9)):
            if fd == tfd:
                try:
                    due = int.from_bytes(os.read(tfd, 8), "little")
                except BlockingIOError:
                    continue
                if now < win_end:
                    credit += due * rate * tick  # due > 1 only if this process was held up
                    while credit >= 1.0:
                        send(socks[seq % conns])
                        credit -= 1.0
                continue
            data = by_fd[fd].recv(65536)
            if not data:
                raise ConnectionError("server closed a connection")
            t_recv = time.perf_counter_ns()
            buf = bufs[fd] + data
            while len(buf) >= size:
                _rseq, t_sent = _HEADER.unpack_from(buf)
                buf = buf[size:]
                if win_start <= t_sent < win_end:
                    lat = t_recv - t_sent
                    latencies.append(lat)
                    slice_lat[min(n_slices - 1, (t_sent - win_start) // slice_ns)].append(lat)
                if mode == "closed" and t_recv < win_end:
                    send(by_fd[fd])
            bufs[fd] = buf
    if stat_start is None:
        stat_start = read_proc_stat()
        task_start = task_runtime_ns(pids)
    if stat_end is None:
        stat_end = read_proc_stat()
        task_end = task_runtime_ns(pids)
        if counter is not None:
            app_end = counter.read()
    for s in socks:
        s.close()
    if counter is not None:
        counter.close()
    if tfd >= 0:
        os.close(tfd)
    cpu = cpu_use(stat_start, stat_end)
    latencies.sort()
    us = [v / 1000.0 for v in latencies]
    series = []
    for i, (lat_slice, task_cpu) in enumerate(zip(slice_lat, slice_cpu)):
        lat_slice.sort()
        row: list[object] = [round(percentile(lat_slice, 50) / 1000.0, 1) if lat_slice else None,
                             round(percentile(lat_slice, 99) / 1000.0, 1) if lat_slice else None,
                             len(lat_slice), round(task_cpu, 3)]
        if counter is not None:
            row.append(round(slice_app[i], 1) if i < len(slice_app) else None)
        series.append(row)
    app: dict[str, object] = {"app_ops_per_s": round((app_end - app_start) / window, 1)} if counter is not None else {}
    return {
        "mode": mode, "conns": conns, "offered_rate": rate if mode == "open" else None,
        "window_s": window, "sent": sent_in_window, "received": len(latencies),
        "rate": len(latencies) / window,
        "latency_us_p50": percentile(us, 50), "latency_us_p90": percentile(us, 90),
        "latency_us_p99": percentile(us, 99), "latency_us_p999": percentile(us, 99.9),
        "cpu": {**cpu.as_dict(), "tasks": round((task_end - task_start) / 1e9 / window, 4)},
        "series": series,  # per 100 ms slice: p50 us, p99 us, requests, testbed task cores[, job ops/s]
        **app,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vftune.testbed.loadgen")
    sub = p.add_subparsers(dest="role", required=True)
    ps = sub.add_parser("server")
    ps.add_argument("--bind", required=True)
    ps.add_argument("--port", type=int, required=True)
    pc = sub.add_parser("client")
    pc.add_argument("--connect", required=True)
    pc.add_argument("--port", type=int, required=True)
    pc.add_argument("--mode", choices=("open", "closed"), default="open")
    pc.add_argument("--rate", type=float, default=2000.0)
    pc.add_argument("--conns", type=int, default=8)
    pc.add_argument("--warmup", type=float, default=0.5)
    pc.add_argument("--window", type=float, default=2.0)
    pc.add_argument("--size", type=int, default=64)
    pc.add_argument("--tick", type=float, default=0.001, help="open loop: send what is due every this many s")
    pc.add_argument("--pids", default="", help="comma-separated tasks whose CPU time counts (server, NAPI threads)")
    pc.add_argument("--app-counter", default=None, help="the competing job's counter file (appjob)")
    pc.add_argument("--cpu", type=int, default=None, help="pin the client to this CPU")
    args = p.parse_args(argv)
    if args.role == "server":
        serve(args.bind, args.port)
        return 0
    if args.size < _HEADER.size:
        print(f"--size {args.size}: must be at least {_HEADER.size} bytes", file=sys.stderr)
        return 2
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    result = run_client(args.connect, args.port, args.mode, args.rate, args.conns, args.warmup,
                        args.window, args.size, [int(p) for p in args.pids.split(",") if p],
                        args.tick, args.app_counter)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
