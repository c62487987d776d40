"""What every router needs: the agent and store behind the app, time windows, bad parameters.

The API reads the agent through AgentHandle only: a frozen view taken in one call, the host's
clock, and a refresh request. It never imports vftune.agent.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import orjson
from fastapi import Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from vftune.model import AgentView
from vftune.store.pages import PageWorkers
from vftune.store.reads import History

PCI_ADDRESS = r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"
HISTORY_DEFAULT_S = 3600.0
MAX_PAGE = 1000  # rows per history page: a page never holds the store long or the memory much
TIME_MAX = 253402300799.0  # 9999-12-31T23:59:59Z; anything beyond is a typo or an attack
TIME_FORMAT = "Unix seconds (a finite number) or ISO 8601 with a zone, e.g. 2026-11-22T18:00:00Z"


class AgentHandle(Protocol):
    def view(self) -> AgentView: ...

    def wall_now(self) -> float: ...

    def request_refresh(self, reason: str) -> None: ...


# History queries in the API's process (the pages of a file-backed store are read by
# store/pages.py's workers instead) one at a time: each row's SQLite step drops and retakes the
# GIL, so concurrent readers only trade it back and forth and starve the event loop (and a
# SIGTERM); the rest wait without using the CPU.
store_reads = threading.BoundedSemaphore(1)
# By the handle itself (weakly): an id() could be reused by the next agent of a test process.
_views: weakref.WeakKeyDictionary[Any, tuple[int, AgentView]] = weakref.WeakKeyDictionary()
_views_lock = threading.Lock()


def cached_view(handle: AgentHandle) -> AgentView:
    """The agent's view, taken again only after a tick: a copy of 126 VFs holds the agent's lock,
    so it is taken once per tick however many requests want it (the others wait for that copy
    instead of queueing on the lock the tick needs)."""
    ticks = getattr(handle, "ticks", None)
    if not isinstance(ticks, int):
        return handle.view()
    hit = _views.get(handle)
    if hit is not None and hit[0] >= ticks:
        return hit[1]
    with _views_lock:
        hit = _views.get(handle)
        if hit is not None and hit[0] >= ticks:
            return hit[1]
        view = handle.view()
        _views[handle] = (view.ticks, view)
        return view


async def cached_view_async(handle: AgentHandle) -> AgentView:
    """cached_view() for an async route: on a worker thread when it would wait for the agent's
    next view (the API process's agent, after a while without readers), so that the event loop
    and the requests on it never wait for a tick."""
    stale = getattr(handle, "view_waits", None)
    if stale is not None and stale():
        return await run_in_threadpool(cached_view, handle)
    return cached_view(handle)


def json_response(body: Any) -> Response:
    """orjson: floats as exact as json's (shortest round trip) at a fraction of the cost; a
    non-finite float (never stored, but) becomes null instead of a 500."""
    return Response(orjson.dumps(body), media_type="application/json")


class BadParameter(Exception):
    """A parameter FastAPI's validation let through but the API cannot use: a 422 naming it."""

    def __init__(self, message: str) -> None:
        self.message = message


# The dependencies below are async: they only read app.state, and FastAPI runs a sync one on a
# worker thread, a thread hop (and a GIL handoff) per dependency per request.
async def agent(request: Request) -> AgentHandle:
    handle: AgentHandle = request.app.state.agent
    return handle


async def store(request: Request) -> History | None:
    db: History | None = request.app.state.store
    return db


async def page_workers(request: Request) -> PageWorkers | None:
    """The processes that read history pages (None: the store is in memory or absent)."""
    workers: PageWorkers | None = request.app.state.page_workers
    return workers


def parse_time(name: str, value: str | None, default: float) -> float:
    """Unix seconds or an ISO 8601 time with a zone; anything else is a 422 naming the parameter
    (never quoting the value: input is not echoed)."""
    if value is None or value == "":
        return default
    try:
        t = float(value)
    except ValueError:
        return _iso_time(name, value)
    if not math.isfinite(t) or abs(t) > TIME_MAX:
        raise BadParameter(f"{name}: not a time (must be finite, within ±{TIME_MAX:.0f})")
    return t


def _iso_time(name: str, value: str) -> float:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadParameter(f"{name}: not Unix seconds or an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise BadParameter(f"{name}: ISO 8601 time needs a zone (Z or +hh:mm)")
    return parsed.timestamp()


@dataclass(frozen=True)
class Window:
    since: float
    until: float
    limit: int
    cursor: str | None = None

    def cursor_id(self) -> int | None:
        """The cursor as a row id (decisions, events): rows with a smaller id come next."""
        if self.cursor is None:
            return None
        return int(parse_time("cursor", self.cursor, 0.0))

    def cursor_t(self) -> float:
        """The cursor as a time (a VF's samples): samples before it come next."""
        assert self.cursor is not None
        return parse_time("cursor", self.cursor, self.until)


TIME_PATTERN_DOC = {"format": "unix-seconds-or-iso8601", "examples": ["1763834400", "2026-11-22T18:00:00Z"]}


async def time_window(
    request: Request,
    since: str | None = Query(None, max_length=64, json_schema_extra=TIME_PATTERN_DOC,
                              description=f"{TIME_FORMAT}; default one hour before until"),
    until: str | None = Query(None, max_length=64, json_schema_extra=TIME_PATTERN_DOC,
                              description=f"{TIME_FORMAT}; default now"),
    limit: int = Query(MAX_PAGE, ge=1, le=MAX_PAGE, description="newest rows of the window to return (a page)"),
    cursor: str | None = Query(None, max_length=64, pattern=r"^[0-9.eE+-]+$",
                               description="next_cursor / X-Next-Cursor of the previous page: older rows"),
) -> Window:
    handle: AgentHandle = request.app.state.agent
    t_until = parse_time("until", until, handle.wall_now())
    t_since = parse_time("since", since, t_until - HISTORY_DEFAULT_S)
    if t_since > t_until:
        raise BadParameter("since is after until")
    return Window(t_since, t_until, limit, cursor)


def set_next_cursor(response: Response, rows: Sequence[dict[str, Any]], limit: int, key: str) -> None:
    """A full page has more behind it: X-Next-Cursor names where the next one starts."""
    if rows and len(rows) == limit:
        response.headers["X-Next-Cursor"] = str(rows[0][key])
