"""ApiServer: uvicorn's server whose idle loop wakes once a MAIN_LOOP_S, and at once when the
agent tells the API process to drain."""

from __future__ import annotations

import socket
import threading

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from vftune.api import serving
from vftune.api.serving import ApiServer


def _app() -> Starlette:
    return Starlette(routes=[Route("/", lambda _request: PlainTextResponse("ok"))])


def test_a_drain_wakes_the_idle_loop_at_once(monkeypatch):
    # An hour between wakes: only exit_soon() can end this server within the test's deadline.
    monkeypatch.setattr(serving, "MAIN_LOOP_S", 3600.0)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # a client's connect waits in the backlog until the server runs
    port = sock.getsockname()[1]
    server = ApiServer(uvicorn.Config(_app(), log_level="warning", lifespan="off", log_config=None))
    ran = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    ran.start()
    try:
        # Served, with uvicorn's Date header set by the first on_tick.
        reply = httpx.get(f"http://127.0.0.1:{port}/", timeout=60)
        assert reply.text == "ok" and "date" in reply.headers
    finally:
        server.exit_soon()  # from this thread, as the API process' link thread calls it
        ran.join(60)
    assert not ran.is_alive()


def test_a_drain_before_the_server_runs_ends_it_at_its_first_tick():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = ApiServer(uvicorn.Config(_app(), log_level="warning", lifespan="off", log_config=None))
    server.exit_soon()
    ran = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    ran.start()
    ran.join(60)
    assert not ran.is_alive()
