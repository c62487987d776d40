"""History pages read and turned into JSON in worker processes, away from the API's GIL.

Python's sqlite3 drops and retakes the GIL at every row it steps. While any other thread of the
process runs Python (the event loop, another request; the tick, when the API shared the agent's
process), each retake waits for that thread to give the GIL up, up to the 5-ms switch interval:
a 1000-row page that costs 4-6 ms alone took 230 ms beside one busy thread (measured on this
2-core machine). A worker process has no such neighbour; the API's process only waits on a
socket. One worker: it reads ~400 1000-row pages a second on the 2-core bench; a second one
read 15% more with every client on history, none more with half of them on /v1/vfs, and cost
25 MB the memory target has no room for (docs/footprint.md, Round 7).

Each worker is a fresh interpreter running serve(), answering one request at a time on its end
of a socket pair (multiprocessing's framing): not multiprocessing's own pools, whose "spawn"
re-runs the parent's main script in every worker. A worker exits when the API process closes its
end, or ends.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

import orjson

from vftune.child import child_env, python_command
from vftune.store.reads import ReadOnly, Reads, sample_dict

WORKERS = 1
ANSWER_S = 30.0  # a worker that takes longer is ended, and the client gets a 503
# A worker no page needed for this long exits (about 17 MB resident each); the next page starts
# one again in about 0.2 s.
IDLE_EXIT_S = 30.0


class PagesUnavailable(Exception):
    """No worker answered in time, or they keep failing."""


# -- the worker's side ---------------------------------------------------------


Answer = tuple[list[Any], bytes]  # small values for the API, and a response body as it is sent


class RowCache:
    """Samples' JSON by their values: each row encoded once, not once per page that shows it.

    A page of 1000 rows cost ~0.9 ms to encode (a dict per row, then orjson) beside ~1 ms to
    read; a client polling a VF's history asks for nearly the same rows each time. The key is
    the row's whole tuple as SQLite gives it, so a row rewritten with other values (INSERT OR
    REPLACE) is a new key, never stale bytes: the encoding is a function of the key. (Tuples
    equal in value encode alike too: the columns' affinities give one type per column, and
    SQLite keeps no -0.0.) Two generations bound it: rows asked since the last turn stay."""

    def __init__(self, rows: int = 8192) -> None:
        self.rows = rows  # per generation: ~0.7 kB a row, about 11 MB at most in two
        self._now: dict[tuple[Any, ...], bytes] = {}
        self._before: dict[tuple[Any, ...], bytes] = {}

    def encode(self, rows: list[tuple[Any, ...]]) -> bytes:
        """orjson.dumps([sample_dict(r) for r in rows]), the same bytes."""
        if not rows:
            return b"[]"
        # Kept without their braces, so that a page is one join.
        now = self._now
        got = list(map(now.get, rows))
        if None in got:
            before = self._before
            if before:
                got = [g if g is not None else before.get(row) for g, row in zip(got, rows)]
            left = got.count(None)
            if left:
                # One orjson call for the rest, cut at "},{": a sample holds numbers, null and
                # booleans only, so that text is only ever between two rows.
                missing = rows if left == len(rows) else [row for row, g in zip(rows, got) if g is None]
                texts = orjson.dumps([sample_dict(r) for r in missing])[2:-2].split(b"},{")
                rest = iter(texts)
                got = [g if g is not None else next(rest) for g in got]
            now.update(zip(rows, cast(list[bytes], got)))
            if len(now) > self.rows:  # threads may share it: the worst a race costs is a miss
                self._before, self._now = now, {}
        return b"[{" + b"},{".join(cast(list[bytes], got)) + b"}]"


ROWS = RowCache()


def vf_page_body(reads: Reads, head: dict[str, Any], pci: str, since: float, until: float, limit: int,
                 exclusive: bool, rows: RowCache = ROWS) -> bytes:
    """A VF's history page as the API sends it: head's fields, samples, decisions, next_cursor.
    The rows are the documented fields already: JSON straight from them, no model per row."""
    samples, decisions, older = reads.history_page_rows(pci, since, until, limit, exclusive)
    return orjson.dumps({**head, "samples": orjson.Fragment(rows.encode(samples)), "decisions": decisions,
                         "next_cursor": repr(older) if older is not None else None})


def _vf_page(reads: ReadOnly, head: dict[str, Any], pci: str, since: float, until: float, limit: int,
             exclusive: bool) -> Answer:
    return [], vf_page_body(reads, head, pci, since, until, limit, exclusive)


def _decisions(reads: ReadOnly, since: float, until: float, limit: int, before_id: int | None) -> Answer:
    rows = reads.decisions(None, since, until, limit, before_id)
    return [len(rows), rows[0]["id"] if rows else None], orjson.dumps(rows)


OPERATIONS: dict[str, Callable[..., Answer]] = {"vf_page": _vf_page, "decisions": _decisions}


def serve(path: str, fd: int) -> None:
    """Answer requests until the API process closes its end. A reply is two messages: a JSON
    header (the small values, or what went wrong) and the body, so the API sends it on uncopied."""
    # A terminal's Ctrl-C or systemd's cgroup-wide SIGTERM reach this process too: the API
    # process, which the agent drains after its restore, closes this when it is done.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    conn = Connection(fd)
    reads: ReadOnly | None = None
    while True:
        try:
            op, *args = orjson.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            reads = reads or ReadOnly(path)
            small, body = OPERATIONS[op](reads, *args)
            header = orjson.dumps({"small": small})
        except Exception as exc:  # told to the API, which answers 503
            header, body = orjson.dumps({"error": f"{type(exc).__name__}: {exc}"}), b""
        try:
            conn.send_bytes(header)
            conn.send_bytes(body)
        except OSError:  # the API process is gone
            return


# -- the API process's side ----------------------------------------------------


class _Worker:
    def __init__(self, path: str) -> None:
        ours, theirs = socket.socketpair()
        with theirs:
            self.proc = subprocess.Popen(
                python_command("from vftune.store.pages import serve; serve(sys.argv[2], int(sys.argv[3]))",
                               path, str(theirs.fileno())),
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=child_env(os.environ))
        self.conn = Connection(ours.detach())
        self.idle_since = time.monotonic()

    def ask(self, request: bytes, answer_s: float) -> Answer:
        self.conn.send_bytes(request)
        if not self.conn.poll(answer_s):
            raise TimeoutError
        header = orjson.loads(self.conn.recv_bytes())
        body = self.conn.recv_bytes()
        if "error" in header:
            raise PagesUnavailable(f"history worker: {header['error']}")
        return header["small"], body

    def kill(self) -> None:
        self.conn.close()
        self.proc.kill()
        self.proc.wait()

    def end(self) -> None:
        self.conn.close()  # an idle worker exits on this
        try:
            self.proc.wait(0.5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Turn:
    """A request waiting for a worker. Turns are served in order of arrival: with a plain
    condition, a request arriving as a worker came free took it ahead of those already waiting,
    and at 20 clients the unlucky ones waited several pages' time (the p99)."""

    __slots__ = ("ready", "worker")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.worker: _Worker | None = None  # None when ready: start one (or the pool closed)


class PageWorkers:
    """Up to `workers` worker processes reading one history file, started as pages are asked."""

    def __init__(self, path: str | os.PathLike[str], workers: int = WORKERS, answer_s: float = ANSWER_S,
                 idle_exit_s: float = IDLE_EXIT_S) -> None:
        self.path = str(Path(path))
        self.workers = workers
        self.answer_s = answer_s
        self.idle_exit_s = idle_exit_s
        self._reaper: threading.Thread | None = None
        self._idle: list[_Worker] = []
        self._started = 0  # workers running or being started, idle or busy
        self._closed = False
        self._waiting: collections.deque[_Turn] = collections.deque()
        self._lock = threading.Lock()

    def prestart(self) -> None:
        """Start every worker now, in the background, rather than at the first pages: each takes
        about 0.2 s to start, and 20 clients' first pages all waited for it."""

        def start_all() -> None:
            for _ in range(self.workers):
                with self._lock:
                    if self._closed or self._started >= self.workers:
                        return
                    self._started += 1
                try:
                    worker = _Worker(self.path)
                except OSError:
                    self._give_back(None)
                    return
                self._give_back(worker)

        threading.Thread(target=start_all, name="vftune-pages-start", daemon=True).start()

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise PagesUnavailable("the API is stopping")
            turn: _Turn | None = None
            if self._idle:
                return self._idle.pop()
            if self._started < self.workers:
                self._started += 1
            else:
                turn = _Turn()
                self._waiting.append(turn)
        if turn is not None:
            turn.ready.wait()
            if turn.worker is not None:
                return turn.worker
            if self._closed:
                raise PagesUnavailable("the API is stopping")
            # A worker died or could not start: its place passed to this request, which starts one.
        try:
            return _Worker(self.path)
        except OSError as exc:
            self._give_back(None)
            raise PagesUnavailable(f"cannot start a history worker: {exc}") from None

    def _give_back(self, worker: _Worker | None) -> None:
        """A worker done with a request goes to the longest waiting one, or back to the idle;
        None (it died, or never started) passes its place on."""
        with self._lock:
            if self._closed:
                self._started -= 1
            elif self._waiting:
                turn = self._waiting.popleft()
                turn.worker = worker
                turn.ready.set()
                return
            elif worker is None:
                self._started -= 1
            else:
                worker.idle_since = time.monotonic()
                self._idle.append(worker)
                if self._reaper is None:
                    self._reaper = threading.Thread(target=self._reap, name="vftune-pages-reaper", daemon=True)
                    self._reaper.start()
                return
        if worker is not None:
            worker.end()

    def _reap(self) -> None:
        """End the workers idle for idle_exit_s, until the pool closes."""
        while True:
            time.sleep(self.idle_exit_s / 4)
            now = time.monotonic()
            with self._lock:
                if self._closed:
                    return
                done = [w for w in self._idle if now - w.idle_since >= self.idle_exit_s]
                self._idle = [w for w in self._idle if w not in done]
                self._started -= len(done)
            for worker in done:
                worker.end()

    @property
    def running(self) -> int:
        """Workers started and not ended (idle, busy or starting)."""
        with self._lock:
            return self._started

    def _ask(self, *request: Any) -> Answer:
        message = orjson.dumps(request)
        for attempt in (1, 2):
            worker = self._take()
            try:
                answer = worker.ask(message, self.answer_s)
            except TimeoutError:  # before OSError, of which it is one
                worker.kill()
                self._give_back(None)
                raise PagesUnavailable(f"no history worker answered within {self.answer_s:g} s") from None
            except (EOFError, OSError):  # it died (killed, out of memory): a new one, once
                worker.kill()
                self._give_back(None)
                if attempt == 2:
                    raise PagesUnavailable("history workers keep exiting") from None
                continue
            except PagesUnavailable:
                self._give_back(worker)
                raise
            self._give_back(worker)
            return answer
        raise AssertionError("unreachable")

    def vf_page(self, head: dict[str, Any], pci: str, since: float, until: float, limit: int,
                exclusive: bool) -> bytes:
        """Store.history_page's page as a JSON object: head's fields, samples, decisions and
        next_cursor (the next page's start, a time; null on the last page)."""
        _, body = self._ask("vf_page", head, pci, since, until, limit, exclusive)
        return body

    def decisions(self, since: float, until: float, limit: int,
                  before_id: int | None) -> tuple[bytes, int, int | None]:
        """Store.decisions over every target as a JSON array, its length and its oldest id."""
        (count, oldest), rows = self._ask("decisions", since, until, limit, before_id)
        return rows, count, oldest

    def close(self, within_s: float = 1.0) -> None:
        """Stop the workers: idle ones exit at once, busy ones as they finish (within_s at most:
        a stop never waits on a page)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            waiting, self._waiting = list(self._waiting), collections.deque()
        for turn in waiting:
            turn.ready.set()
        deadline = time.monotonic() + within_s
        for worker in idle:
            worker.conn.close()
        for worker in idle:
            try:
                worker.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.proc.kill()
