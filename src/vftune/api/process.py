"""The API in a process of its own, away from the tick's GIL.

In one interpreter every request waited for whatever Python the agent ran (the tick, a
collection), and a request's thread gets the GIL back only in slices: GET /healthz, the cheapest
route, had a p99 of 93 ms at 20 clients (README.md, "Crash safety and limits"). In its own
process the API waits only for the CPU. The agent's process keeps the tick, every host write and
the store's writer; a child process serves the API on the socket the agent bound, with

- the agent's view, pushed over a socket pair (pickled: both ends are this same vftune) after
  every tick while requests read it (a read tells the agent); while none do, a heartbeat every
  VIEW_IDLE_S, and the first read after one waits for the view after the next tick,
- the history read through its own read-only connections (and its own page workers),
- the few calls that change the agent (an inventory refresh, the profiles, a guest event's
  record) sent back and answered by a thread of the agent.

The child ignores SIGINT and SIGTERM: the agent, which gets them too (a terminal's process group,
systemd's cgroup), restores first and then tells the child to drain. The child ends when told,
or when the agent's end of the pair closes (the agent died); the agent starts a new child if one
dies while it runs. Connections that arrive meanwhile wait in the socket's backlog.

The price: a second interpreter with FastAPI and uvicorn, about 55 MB resident
(bench/linux_sampling.py); the agent's own process no longer loads them.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
import pickle
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vftune.child import child_env, python_command
from vftune.model import AgentView
from vftune.store.reads import History, ReadOnly

if TYPE_CHECKING:  # the agent's process never loads FastAPI: only the API process does
    from vftune.api.deps import AgentHandle

log = logging.getLogger("vftune.api")
CALL_S = 10.0  # an agent that does not answer a call in this long gets the request a 503
RESTART_S = (1.0, 30.0)  # first and longest wait before a dead API process is replaced
FIRST_VIEW_S = 60.0  # a new API process waits this long for the agent's first view
# With no reader the agent sends a heartbeat this often (its ticks, clock and store's state;
# /healthz says stalled after 3 ticks + 5 s), and no view; a reader finding that the agent
# ticked since its view waits for the one after the next tick.
VIEW_IDLE_S = 2.0
FRESH_WAIT_S = 1.0  # the longest such a wait
WANT_VIEW = "want_view"  # the API process to the agent: a reader took the last view


class AgentUnavailable(Exception):
    """The agent did not answer a call in time, or the link to it is gone: a 503."""


@dataclass(frozen=True)
class ApiSettings:
    """What the API process is started with (JSON on its command line; no secrets: the token
    comes over the socket pair)."""

    db: str | None  # the history file; None: no history (an in-memory store)
    token_for_reads: bool
    log_level: str
    log_format: str
    drain_s: float


# -- the API process's side ------------------------------------------------------------------


class RemoteAgent:
    """The agent as the API process sees it: the last view pushed, the host's clock carried on
    from the last tick, and calls sent back over the link (AgentHandle and the profiles)."""

    def __init__(self, link: _Link) -> None:
        self._link = link
        self._view: AgentView | None = None
        self._anchor = (0.0, 0.0, 1.0)  # host wall time at a push, monotonic time then, clock rate
        self._latest = -math.inf  # the latest time wall_now() gave
        self._clock_lock = threading.Lock()
        self._ticks = -1  # the view's
        self._live: tuple[int, float | None] = (-1, None)  # the agent's ticks and last tick's wall time, newest known
        self._waited = -1  # a view newer than the one here was awaited for these ticks (once each)
        self._next = threading.Event()  # set when a view comes (replaced for the one after)
        self.degraded: str | None = None
        self.has_view = threading.Event()
        self._wanted = False  # told the agent since the last view that a reader wants the next

    def update(self, view: AgentView, wall: float, clock_rate: float, degraded: str | None) -> None:
        self._anchor = (wall, time.monotonic(), clock_rate)
        self._view, self.degraded = view, degraded
        self._ticks = view.ticks
        if view.ticks >= self._live[0]:
            self._live = (view.ticks, view.last_tick_wall)
        self._wanted = False
        arrived, self._next = self._next, threading.Event()
        arrived.set()
        self.has_view.set()

    def beat(self, ticks: int, last_tick_wall: float | None, wall: float, clock_rate: float,
             degraded: str | None) -> None:
        """The agent ticks on and nobody asked for a view: its clock, ticks and store's state."""
        self._anchor = (wall, time.monotonic(), clock_rate)
        self._live, self.degraded = (ticks, last_tick_wall), degraded

    def _stale(self) -> bool:
        """The agent said (its heartbeat, at most VIEW_IDLE_S apart) that it ticked since the
        view, and no reader waited for a newer one since it said so: the next reader waits for
        the view after the next tick. So a reader never gets ticks older than /healthz gave, and
        a view served at once is at most VIEW_IDLE_S and a tick old, as when views came every
        VIEW_IDLE_S unasked."""
        return self._live[0] > self._ticks and self._live[0] > self._waited

    def view_waits(self) -> bool:
        """Whether view() would wait for the agent's next view now."""
        return self._stale()

    @property
    def ticks(self) -> int:
        """The view's ticks; the agent's newer ones when the view is stale, so that caches by
        ticks (deps.cached_view, the rendered /v1/vfs) ask view() for a new one."""
        return self._live[0] if self._stale() else self._ticks

    def liveness(self) -> tuple[int, float | None, float, str]:
        """The agent's ticks, its last tick's wall time, its interval and backend, without
        asking for a view (/healthz)."""
        assert self._view is not None, "the API serves only after the first view"
        return (*self._live, self._view.interval_s, self._view.backend)

    def view(self) -> AgentView:
        assert self._view is not None, "the API serves only after the first view"
        if not self._wanted:
            # Someone reads: the agent pushes a view after its next tick (else none, only its
            # heartbeat). One word per view pushed, however many requests read it.
            self._wanted = True
            with contextlib.suppress(AgentUnavailable):  # stopping: the last view is what there is
                self._link.tell(WANT_VIEW)
        if self._stale():
            # Nobody read for a while: wait for the view after the agent's next tick, a few
            # intervals at most (a tick that does not come: the last view, as before).
            self._waited = self._live[0]
            self._next.wait(min(FRESH_WAIT_S, 2 * self._view.interval_s + 0.2))
        return self._view

    def wall_now(self) -> float:
        """The host's clock now: a simulated host's may run faster than the wall (rate). Never
        earlier than a time given before: a push whose clock lags the one carried on would
        otherwise stamp a new event before one a client just posted, and a read up to "now"
        would miss it."""
        wall, at, rate = self._anchor
        with self._clock_lock:
            self._latest = max(self._latest, wall + (time.monotonic() - at) * rate)
            return self._latest

    def request_refresh(self, reason: str) -> None:
        self._link.tell("request_refresh", reason)

    def export_profiles(self) -> dict[str, Any] | None:
        result: dict[str, Any] | None = self._link.call("export_profiles")
        return result

    def import_profiles(self, data: object) -> int:
        return int(self._link.call("import_profiles", data))

    def list_rules(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._link.call("list_rules")
        return result

    def put_api_rules(self, body: object) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._link.call("put_api_rules", body)
        return result


class LinkedHistory(History):
    """The history file read through one read-only connection per API thread; a guest event is
    recorded by the agent (the store has one writer)."""

    def __init__(self, path: str, link: _Link) -> None:
        self.path = Path(path)
        self._link = link
        self._local = threading.local()
        self.degraded: str | None = None  # as the agent's store said at the last tick

    def _tuples(self, sql: str, args: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        reads: ReadOnly | None = getattr(self._local, "reads", None)
        if reads is None:
            reads = self._local.reads = ReadOnly(self.path)
        return reads._tuples(sql, args)

    def record_guest_event(self, t: float, guest: str, uuid: str | None, operation: str,
                           vfs: Sequence[str], source: str) -> int:
        return int(self._link.call("record_guest_event", t, guest, uuid, operation, list(vfs), source))


class _Link:
    """The API process's end of the socket pair: calls out, answers and views in."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._send_lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._waiting: dict[int, list[Any]] = {}  # call number -> [Event, outcome]
        self._waiting_lock = threading.Lock()
        self.closed = threading.Event()

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            with self._send_lock:
                self.conn.send(message)
        except OSError:
            raise AgentUnavailable("the agent's process is gone") from None

    def tell(self, name: str, *args: Any) -> None:
        self._send(("tell", name, args))

    def call(self, name: str, *args: Any) -> Any:
        if self.closed.is_set():
            raise AgentUnavailable("the agent's process is gone")
        number = next(self._numbers)
        slot: list[Any] = [threading.Event(), None]
        with self._waiting_lock:
            self._waiting[number] = slot
        try:
            self._send(("call", number, name, args))
            if not slot[0].wait(CALL_S) or slot[1] is None:
                raise AgentUnavailable(f"the agent did not answer {name} within {CALL_S:g} s")
        finally:
            with self._waiting_lock:
                self._waiting.pop(number, None)
        kind, value = slot[1]
        if kind == "ok":
            return value
        raise _ERRORS.get(kind, AgentUnavailable)(value)

    def answered(self, number: int, kind: str, value: Any) -> None:
        with self._waiting_lock:
            slot = self._waiting.get(number)
        if slot is not None:
            slot[1] = (kind, value)
            slot[0].set()

    def fail_all(self) -> None:
        self.closed.set()
        with self._waiting_lock:
            for slot in self._waiting.values():
                slot[0].set()  # outcome None: AgentUnavailable


# The errors a call may raise that the API turns into a response of its own (404, 422).
_ERRORS: dict[str, type[Exception]] = {"LookupError": LookupError, "ValueError": ValueError}


def serve(conn_fd: int, listen_fd: int, settings_json: str, metrics_fd: int = -1) -> None:
    """The API process: wait for the agent's first view and the token, then serve until told to
    drain or the agent is gone."""
    import uvicorn

    from vftune.api.app import ByListener, create_app, create_metrics_app
    from vftune.api.serving import ApiServer, GuardedHttp
    from vftune.logsetup import setup_logging

    # The agent gets these too and decides when this process drains (a terminal's hangup too:
    # SIGHUP to the agent re-reads its rules, and would end this process by default).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    settings = ApiSettings(**json.loads(settings_json))
    setup_logging(settings.log_level, settings.log_format)
    link = _Link(Connection(conn_fd))
    agent = RemoteAgent(link)
    history = LinkedHistory(settings.db, link) if settings.db else None
    token: list[str] = []
    server: list[ApiServer] = []
    gone = threading.Event()

    def receive() -> None:
        while True:
            try:
                message = link.conn.recv()
            except (EOFError, OSError):
                break
            kind = message[0]
            if kind in ("view", "beat"):
                if kind == "view":
                    agent.update(*message[1:])
                else:
                    agent.beat(*message[1:])
                if history is not None:
                    history.degraded = agent.degraded
            elif kind == "reply":
                link.answered(*message[1:])
            elif kind == "token":
                token.append(message[1])
            elif kind == "drain":
                break
        link.fail_all()
        gone.set()
        agent.has_view.set()  # wakes a start still waiting for its first view
        if server:
            server[0].exit_soon()

    threading.Thread(target=receive, name="vftune-api-link", daemon=True).start()
    agent.has_view.wait(FIRST_VIEW_S)
    if gone.is_set():  # drained (or the agent died) before serving anything
        os._exit(0)
    if agent.ticks < 0 or not token:
        log.error("API process: no view from the agent within %g s; exiting", FIRST_VIEW_S)
        os._exit(1)
    # A loopback listener (no token for reads) checks Host: DNS rebinding must not read it.
    app = create_app(agent, history, token=token[0], token_for_reads=settings.token_for_reads,
                     agent_pid=os.getppid(), check_host=not settings.token_for_reads)
    sockets = [socket.socket(fileno=listen_fd)]
    served: Any = app
    if metrics_fd >= 0:  # --metrics-listen: /metrics and /healthz on a listener of their own
        sockets.append(socket.socket(fileno=metrics_fd))
        served = ByListener(app, create_metrics_app(app), sockets[1].getsockname()[:2])

    # uvloop and httptools: about half asyncio's and h11's CPU per small request, a fifth less
    # per history page (measured side by side on this 2-core machine).
    # GuardedHttp: httptools with header/body deadlines and a connection cap (api/serving.py);
    # log_config=None: uvicorn's own lines go through our handler (JSON under --log-format json).
    server.append(ApiServer(uvicorn.Config(served, log_level="warning", access_log=False, lifespan="off",
                                        loop="uvloop", http=GuardedHttp, log_config=None,
                                        timeout_graceful_shutdown=max(1, int(settings.drain_s)),
                                        timeout_keep_alive=2)))
    if gone.is_set():
        os._exit(0)
    if app.state.page_workers is not None:
        app.state.page_workers.prestart()

    def exit_after_drain() -> None:
        # A drain that outlasts its time (a request stuck in a page) does not keep the process.
        gone.wait()
        time.sleep(settings.drain_s + 1.0)
        os._exit(0)

    threading.Thread(target=exit_after_drain, name="vftune-api-deadline", daemon=True).start()
    try:
        server[0].run(sockets=sockets)
    finally:
        if app.state.page_workers is not None:
            app.state.page_workers.close()
        logging.shutdown()
    os._exit(0)


# -- the agent's side ------------------------------------------------------------------------


class _Child:
    def __init__(self, sock: socket.socket, settings: ApiSettings, metrics_sock: socket.socket | None = None) -> None:
        ours, theirs = socket.socketpair()
        metrics_fds = [metrics_sock.fileno()] if metrics_sock is not None else []
        # Only the agent talks to systemd (NotifyAccess=main).
        env = child_env({k: v for k, v in os.environ.items()
                         if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")})
        with theirs:
            self.proc = subprocess.Popen(
                python_command("from vftune.api.process import serve; serve(int(sys.argv[2]), int(sys.argv[3]), "
                               "sys.argv[4], int(sys.argv[5]))", str(theirs.fileno()), str(sock.fileno()),
                               json.dumps(asdict(settings)), str(metrics_fds[0] if metrics_fds else -1)),
                pass_fds=[theirs.fileno(), sock.fileno(), *metrics_fds], stdin=subprocess.DEVNULL, env=env)
        self.conn = Connection(ours.detach())
        self.send_lock = threading.Lock()
        self.started = time.monotonic()

    def send(self, message: tuple[Any, ...]) -> bool:
        try:
            with self.send_lock:
                self.conn.send(message)
            return True
        except OSError:  # it is gone; supervise() starts another
            return False


class ApiProcess:
    """Starts the API process, keeps it fed with views, answers its calls, replaces it if it
    dies, and drains it on stop. `agent` is the AgentHandle with the profiles (Agent)."""

    def __init__(self, sock: socket.socket, settings: ApiSettings, token: str, agent: Any,
                 history: History | None, clock_rate: float = 1.0, metrics_sock: socket.socket | None = None) -> None:
        self.sock, self.settings, self.token = sock, settings, token
        self.metrics_sock = metrics_sock
        self.agent: AgentHandle = agent
        self._agent = agent
        self.history = history
        # The host's clock against the wall: a simulated host's sleeps `speed` times faster;
        # one that never waits (inf) is known only at its ticks.
        self.clock_rate = clock_rate if clock_rate != float("inf") else 0.0
        self._ticked = threading.Event()
        self._wanted = threading.Event()  # the API process read the last view pushed
        self._due = False  # whether the tick copied the policies' states for a view (view_due)
        self._sent = -math.inf  # monotonic time of the last view or heartbeat
        self._draining = threading.Event()
        self._child = self._spawn()
        threading.Thread(target=self._push, name="vftune-api-views", daemon=True).start()

    def view_due(self) -> bool:
        """Whether the view after the coming tick is pushed (Agent.view_wanted): the tick copies
        the policies' states for it, and the push after it follows this answer."""
        self._due = self._wanted.is_set()
        return self._due

    def tick(self) -> None:
        """After every tick (Agent.heartbeat): the API's view (or heartbeat) is sent on."""
        self._ticked.set()

    def _spawn(self) -> _Child:
        child = _Child(self.sock, self.settings, self.metrics_sock)
        child.send(("token", self.token))
        threading.Thread(target=self._answer, args=(child,), name="vftune-api-calls", daemon=True).start()
        self._wanted.set()
        self._ticked.set()  # its first view
        return child

    def _push(self) -> None:
        """A view after a tick when a reader asked for one since the last; else a heartbeat
        every VIEW_IDLE_S (a few numbers). A view (a copy of 126 VFs, the policies' states
        copied for it, pickled here and unpickled there) was most of the API's cost and a tenth
        of the agent's when it went every VIEW_IDLE_S to nobody."""
        while True:
            self._ticked.wait()
            self._ticked.clear()
            if self._draining.is_set():
                return
            degraded = self.history.degraded if self.history is not None else None
            if self._due:
                self._due = False
                self._wanted.clear()
                self._sent = time.monotonic()
                view = self.agent.view()
                self._child.send(("view", view, self.agent.wall_now(), self.clock_rate, degraded))
            elif time.monotonic() - self._sent >= VIEW_IDLE_S:
                self._sent = time.monotonic()
                self._child.send(("beat", self._agent.ticks, self._agent.last_tick_wall, self.agent.wall_now(),
                                  self.clock_rate, degraded))

    def _answer(self, child: _Child) -> None:
        """The API process's calls, one at a time, until it is gone."""
        while True:
            try:
                message = child.conn.recv()
            except (EOFError, OSError, pickle.UnpicklingError):
                return
            if message[0] == "tell" and message[1] == WANT_VIEW:
                self._wanted.set()
                continue
            if message[0] == "tell" and message[1] == "request_refresh":
                self.agent.request_refresh(*message[2])
                continue
            if message[0] != "call":
                continue
            _, number, name, args = message
            try:
                if name == "record_guest_event":
                    value: Any = self.history.record_guest_event(*args) if self.history is not None else 0
                elif name == "export_profiles":
                    value = self._agent.export_profiles()
                elif name == "import_profiles":
                    value = self._agent.import_profiles(*args)
                elif name == "list_rules":
                    value = self._agent.list_rules()
                elif name == "put_api_rules":
                    value = self._agent.put_api_rules(*args)
                else:
                    raise LookupError(f"no call {name!r}")
                reply: tuple[Any, ...] = ("reply", number, "ok", value)
            except (LookupError, ValueError) as exc:
                reply = ("reply", number, "LookupError" if isinstance(exc, LookupError) else "ValueError", str(exc))
            except Exception as exc:
                log.error("API call %s failed: %s: %s", name, type(exc).__name__, exc)
                reply = ("reply", number, "error", f"{name} failed in the agent: {type(exc).__name__}")
            child.send(reply)

    def supervise(self) -> None:
        """Until drained: wait for the API process, and replace it when it dies (waiting longer
        each time it dies young)."""
        delay = RESTART_S[0] / 2  # doubled below: the first wait is RESTART_S[0]
        while True:
            child = self._child
            code = child.proc.wait()
            if self._draining.is_set():
                return
            lived = time.monotonic() - child.started
            delay = RESTART_S[0] if lived > 60.0 else min(delay * 2, RESTART_S[1])
            log.warning("API process %d exited (%s) after %.0f s; starting another in %g s", child.proc.pid,
                        f"signal {-code}" if code < 0 else f"status {code}", lived, delay)
            child.conn.close()
            if self._draining.wait(delay):
                return
            self._child = self._spawn()

    def kill(self) -> None:
        """The last resort of a stop whose drain outlasts the exit deadline."""
        self._draining.set()
        self._child.proc.kill()

    def drain(self, within_s: float) -> None:
        """Stop taking requests and finish those in flight, within_s at most."""
        self._draining.set()
        self._ticked.set()  # ends the pusher
        child = self._child
        child.send(("drain",))
        try:
            child.proc.wait(within_s)
        except subprocess.TimeoutExpired:
            log.warning("API process did not drain within %g s: ended", within_s)
            child.proc.kill()
            child.proc.wait()
        child.conn.close()
