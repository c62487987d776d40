"""The API's HTTP protocol with deadlines and a connection cap, the request guards that run
before any route (the Host check of a loopback listener and auth before a body is read), and
the server whose loop wakes once a second.

uvicorn times out only idle keep-alive connections: a client that opens a socket and sends
half a header holds it (and a file descriptor) for ever, and 1,100 of them took the API down.
Here a request's header must arrive within HEADER_TIMEOUT_S of its first byte (or of the
connection) and its body within BODY_TIMEOUT_S of the header; beyond MAX_CONNECTIONS the
oldest connection still sending its header is dropped, so a probe that sends its request at
once always gets in. The unit's LimitNOFILE leaves room above the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from typing import Any

import uvicorn
from starlette.responses import JSONResponse
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from vftune.api import auth

log = logging.getLogger("vftune.api")
HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 512  # the unit's LimitNOFILE=4096 leaves room for the store, page workers, logs
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# How often the server's own loop wakes with nothing to do (uvicorn's: 0.1 s). An exit request
# wakes it at once; the Date header is refreshed each time, as uvicorn does once a second.
MAIN_LOOP_S = 1.0


class GuardedHttp(HttpToolsProtocol):
    """HttpToolsProtocol with header and body deadlines and the connection cap."""

    _unfinished: dict[GuardedHttp, float] = {}  # connections still sending a request, oldest first
    _last_warning = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        if len(self.connections) > MAX_CONNECTIONS and not self._evict_oldest():
            self._warn(f"{len(self.connections)} connections, all busy: a new one is refused")
            transport.abort()
            return
        self._arm(HEADER_TIMEOUT_S)

    def _evict_oldest(self) -> bool:
        for conn in self._unfinished:
            if conn is not self:
                self._warn(f"over {MAX_CONNECTIONS} connections: the oldest still sending its request is dropped")
                conn._drop()
                return True
        return False

    @classmethod
    def _warn(cls, message: str) -> None:
        if time.monotonic() - cls._last_warning > 60.0:  # once a minute, not once a socket
            cls._last_warning = time.monotonic()
            log.warning("API: %s", message)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._drop)
        self._unfinished[self] = time.monotonic()

    def _disarm(self) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
            self._deadline = None
        self._unfinished.pop(self, None)

    def _drop(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if getattr(self, "_deadline", None) is None and (self.cycle is None or self.cycle.response_complete):
            self._arm(HEADER_TIMEOUT_S)  # the first byte of the next request on a kept-alive connection
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._arm(BODY_TIMEOUT_S)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def _loopback_host(value: bytes) -> bool:
    """A Host header naming a loopback address (with or without a port)."""
    host = value.decode("latin-1").strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """Before any route: a loopback listener answers only requests that name a loopback Host
    (a web page whose DNS name rebinds to 127.0.0.1 reads nothing), and a request that would
    change state is refused without the token before its body is read or parsed."""

    def __init__(self, app: ASGIApp, token: str | None, routes: Any, check_host: bool) -> None:
        self.app, self.token, self.routes, self.check_host = app, token, routes, check_host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = list(scope.get("headers") or ())
        if self.check_host:
            host = next((v for k, v in headers if k == b"host"), None)
            if host is not None and not _loopback_host(host):
                await JSONResponse({"error": "Host header does not name this loopback listener"},
                                   status_code=421)(scope, receive, send)
                return
        if scope["method"] not in READ_METHODS and self._routed(scope):
            presented = auth._bearer_from(headers)
            problem = auth.check(self.token, presented)
            if problem is not None:
                await JSONResponse({"error": problem}, status_code=401 if presented is None else 403,
                                   headers=auth.CHALLENGE)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _routed(self, scope: Scope) -> bool:
        """A route takes this method at this path (else the app answers 404 or 405 itself)."""
        return any(route.matches(scope)[0] == Match.FULL for route in self.routes.routes)


class ApiServer(uvicorn.Server):
    """uvicorn's server, its main loop waking every MAIN_LOOP_S rather than ten times a second
    (on an idle host those wakeups were most of the API process' CPU), at once on exit_soon();
    signals are the agent's to act on, not this process'."""

    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    def handle_exit(self, sig: int, frame: Any) -> None:
        pass

    async def main_loop(self) -> None:
        # uvicorn's on_tick refreshes the Date header when counter % 10 == 0 (each second at its
        # 0.1-s ticks) and reads should_exit: called here once a wake, counting in tens.
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), MAIN_LOOP_S)
            should_exit = await self.on_tick(counter)

    def exit_soon(self) -> None:
        """Begin the graceful shutdown now; callable from any thread."""
        self.should_exit = True
        loop, wake = self._loop, self._wake
        if loop is None or wake is None:
            return  # not serving yet: main_loop reads should_exit first
        with contextlib.suppress(RuntimeError):  # the loop closed already: nothing to wake
            loop.call_soon_threadsafe(wake.set)
