"""What every router needs: the agent and store behind the app, time windows, bad parameters.

The API reads the agent through AgentHandle only: a frozen view taken in one call, the host's
clock, and a refresh request. It never imports vftune.agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from fastapi import Query, Request

from vftune.model import AgentView
from vftune.store.db import Store

PCI_ADDRESS = r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"
HISTORY_DEFAULT_S = 3600.0


class AgentHandle(Protocol):
    def view(self) -> AgentView: ...

    def wall_now(self) -> float: ...

    def request_refresh(self, reason: str) -> None: ...


class BadParameter(Exception):
    """A parameter FastAPI's validation let through but the API cannot use: a 422 naming it."""

    def __init__(self, message: str) -> None:
        self.message = message


def agent(request: Request) -> AgentHandle:
    handle: AgentHandle = request.app.state.agent
    return handle


def store(request: Request) -> Store | None:
    db: Store | None = request.app.state.store
    return db


def parse_time(name: str, value: str | None, default: float) -> float:
    """Unix seconds or an ISO 8601 time with a zone; anything else is a 422 naming the value."""
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadParameter(f"{name}={value!r}: not Unix seconds or an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise BadParameter(f"{name}={value!r}: ISO 8601 time needs a zone (Z or +hh:mm)")
    return parsed.timestamp()


@dataclass(frozen=True)
class Window:
    since: float
    until: float
    limit: int


def time_window(
    request: Request,
    since: str | None = Query(None, description="Unix seconds or ISO 8601; default one hour before until"),
    until: str | None = Query(None, description="Unix seconds or ISO 8601; default now"),
    limit: int = Query(1000, ge=1, le=100_000, description="newest rows of the window to return"),
) -> Window:
    t_until = parse_time("until", until, agent(request).wall_now())
    t_since = parse_time("since", since, t_until - HISTORY_DEFAULT_S)
    if t_since > t_until:
        raise BadParameter(f"since={since!r} is after until={until!r}")
    return Window(t_since, t_until, limit)
