"""The API process's link to the agent (api/process.py) over a real socket pair: calls, the errors
that become the API's own responses, an agent that does not answer or is gone, and the host's
clock carried on between views."""

from __future__ import annotations

import os
import socket
import threading
import time
from multiprocessing.connection import Connection

import pytest

from vftune.api import process
from vftune.api.process import AgentUnavailable, RemoteAgent, _Link
from vftune.model import AgentView, Capabilities


class FakeAgentEnd:
    """The agent's end: answers each call with `answer(name, args)` -> (kind, value), or not at all."""

    def __init__(self, answer) -> None:  # type: ignore[no-untyped-def]
        ours, theirs = socket.socketpair()
        self.conn = Connection(ours.detach())
        self.link = _Link(Connection(theirs.detach()))
        self.told: list[tuple[str, tuple[object, ...]]] = []
        self.answer = answer
        threading.Thread(target=self._serve, daemon=True).start()
        threading.Thread(target=self._replies, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                return
            if message[0] == "tell":
                self.told.append((message[1], message[2]))
            elif message[0] == "call":
                _, number, name, args = message
                outcome = self.answer(name, args)
                if outcome is not None:
                    self.conn.send(("reply", number, *outcome))

    def _replies(self) -> None:
        """The API process's receiving thread, as serve() runs it."""
        while True:
            try:
                message = self.link.conn.recv()
            except (EOFError, OSError):
                self.link.fail_all()
                return
            self.link.answered(*message[1:])


def test_a_call_returns_the_agents_value_and_raises_the_errors_the_api_answers_itself() -> None:
    def answer(name, args):  # type: ignore[no-untyped-def]
        return {"import_profiles": ("ValueError", "version: must be 1"),
                "export_profiles": ("LookupError", "no memory"),
                "record_guest_event": ("ok", 7)}.get(name, ("error", "boom failed in the agent"))

    end = FakeAgentEnd(answer)
    agent = RemoteAgent(end.link)
    assert end.link.call("record_guest_event", 1.0, "g", None, "started", [], "hook") == 7
    with pytest.raises(ValueError, match="version: must be 1"):  # a 422
        agent.import_profiles({})
    with pytest.raises(LookupError, match="no memory"):  # a 404
        agent.export_profiles()
    with pytest.raises(AgentUnavailable, match="boom"):  # a 503, never a 500
        end.link.call("anything")


def test_an_agent_that_does_not_answer_or_is_gone_is_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "CALL_S", 0.2)
    end = FakeAgentEnd(lambda name, args: None)
    with pytest.raises(AgentUnavailable, match="did not answer export_profiles"):
        RemoteAgent(end.link).export_profiles()
    # The agent's process ends: its end of the pair shuts (a close would wait for its reader).
    socket.socket(fileno=os.dup(end.conn.fileno())).shutdown(socket.SHUT_RDWR)
    assert end.link.closed.wait(5)
    started = time.monotonic()
    with pytest.raises(AgentUnavailable, match="gone"):
        end.link.call("export_profiles")
    assert time.monotonic() - started < 0.2, "no wait for an agent known to be gone"


def test_a_refresh_is_told_not_asked_and_the_clock_runs_at_the_hosts_rate() -> None:
    end = FakeAgentEnd(lambda name, args: None)
    agent = RemoteAgent(end.link)
    agent.request_refresh("hook: web-1 started")
    deadline = time.monotonic() + 5
    while not end.told and time.monotonic() < deadline:
        time.sleep(0.01)
    assert end.told == [("request_refresh", ("hook: web-1 started",))]

    view = AgentView(backend="sim", detail="", started=0.0, interval_s=0.5, ticks=3, last_tick_wall=None,
                     capabilities=Capabilities(backend="sim"), pfs=(), vfs=(), ignored=(), cost_model={})
    agent.update(view, wall=1000.0, clock_rate=50.0, degraded=None)  # a simulated host at speed 50
    before = time.monotonic()
    now = agent.wall_now()
    elapsed = time.monotonic() - before
    assert agent.ticks == 3 and agent.view() is view
    assert 1000.0 <= now <= 1000.0 + 50.0 * (elapsed + 0.5)
    agent.update(view, wall=2000.0, clock_rate=0.0, degraded="disk full")  # a host that never waits
    assert agent.wall_now() == 2000.0 and agent.degraded == "disk full"
    # A push whose clock lags the one carried on (the host fell behind the wall) does not move
    # the API's clock back: an event stamped now is never after a read "until now" that follows.
    stamped = agent.wall_now()
    agent.update(view, wall=1990.0, clock_rate=0.0, degraded=None)
    assert agent.wall_now() == stamped == 2000.0


def _view(ticks: int, last_tick_wall: float | None = 100.0) -> AgentView:
    return AgentView(backend="sim", detail="", started=0.0, interval_s=0.25, ticks=ticks, last_tick_wall=last_tick_wall,
                     capabilities=Capabilities(backend="sim"), pfs=(), vfs=(), ignored=(), cost_model={})


def test_with_no_reader_the_heartbeat_keeps_health_current_and_a_later_reader_gets_the_next_view() -> None:
    end = FakeAgentEnd(lambda name, args: None)
    agent = RemoteAgent(end.link)
    first = _view(3)
    agent.update(first, wall=1000.0, clock_rate=1.0, degraded=None)
    agent.beat(40, 200.0, wall=1010.0, clock_rate=1.0, degraded="disk full")
    assert agent.liveness() == (40, 200.0, 0.25, "sim") and agent.degraded == "disk full"
    assert agent.wall_now() >= 1010.0
    assert agent.ticks == 40, "caches by ticks see that the view is behind"
    newer = _view(41, 200.25)
    threading.Timer(0.1, agent.update, (newer, 1010.25, 1.0, None)).start()
    assert agent.view() is newer, "the reader waited for the view after the next tick"
    assert _told_soon(end, "want_view")
    assert agent.ticks == 41 and agent.view() is newer


def test_a_reader_does_not_wait_on_an_agent_that_sends_no_view_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "FRESH_WAIT_S", 0.2)
    agent = RemoteAgent(FakeAgentEnd(lambda name, args: None).link)
    old = _view(3)
    agent.update(old, wall=1000.0, clock_rate=1.0, degraded=None)
    agent.beat(9, 101.0, wall=1001.0, clock_rate=1.0, degraded=None)
    agent._next = waits = CountedEvent()
    assert agent.view() is old, "no view came within the wait: the last one"
    assert agent.view() is old and agent.ticks == 3
    assert waits.waits == 1, "no second wait for the same heartbeat"


def test_a_view_no_heartbeat_has_overtaken_is_served_at_once() -> None:
    agent = RemoteAgent(FakeAgentEnd(lambda name, args: None).link)
    view = _view(3)
    agent.update(view, wall=1000.0, clock_rate=1.0, degraded=None)
    agent.beat(3, 100.0, wall=1000.5, clock_rate=1.0, degraded=None)
    agent._next = waits = CountedEvent()
    assert agent.view() is view and agent.ticks == 3 and not agent.view_waits()
    assert waits.waits == 0


class CountedEvent(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        return super().wait(timeout)


def _told_soon(end: FakeAgentEnd, name: str) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(t[0] == name for t in end.told):
            return True
        time.sleep(0.01)
    return False
