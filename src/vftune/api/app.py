"""The REST API for orchestrators and the CLI: current state from the agent, history from the store.

create_app wires the routers (routers/) to one agent and one store and turns every error into
a JSON body with one line naming the problem, never echoing raw input and never a 500 for
anything a client sent. Writes need the bearer token (api/auth.py); a body over BODY_LIMIT is
a 413 before it is read whole.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vftune import __version__
from vftune.api import auth, docs
from vftune.api.deps import AgentHandle, BadParameter
from vftune.api.metrics import build_registry
from vftune.api.process import AgentUnavailable
from vftune.api.routers import events, history, page, profiles, rules, state
from vftune.api.serving import Guard
from vftune.store.pages import PageWorkers
from vftune.store.reads import History

log = logging.getLogger("vftune.api")
BODY_LIMIT = 64 * 1024  # bytes; a guest event is a few hundred


def _json_error(status: int, message: str, headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


async def _bad_parameter(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BadParameter)
    return _json_error(422, exc.message)


def _where(loc: Any) -> str:
    parts = [str(p) for p in (loc or ()) if p not in ("query", "path", "body")]
    return ".".join(parts) or "body"


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    """Name the field and the problem; the value is not echoed (it may be megabytes, or bytes
    that are not text at all)."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    detail = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "invalid")),
               "type": str(e.get("type", ""))} for e in errors[:20]]
    first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
    return _json_error(422, f"{_where(first['loc'])}: {first['msg']}", detail=detail)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # Keeps Allow on a 405 and WWW-Authenticate on a 401.
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed(request))
    return _json_error(exc.status_code, str(exc.detail), headers=headers)


def _allowed(request: Request) -> list[str]:
    """Every method any route of this path takes (Starlette names only the first route's)."""
    methods: set[str] = set()

    def walk(routes: list[Any], prefix: str = "") -> None:
        for route in routes:
            inner = getattr(route, "original_router", None) or route  # FastAPI's included routers
            nested = getattr(inner, "routes", None)
            if nested is not None and not hasattr(route, "path_regex"):
                walk(list(nested), prefix + getattr(route, "prefix", ""))
                continue
            regex = getattr(route, "path_regex", None)
            if regex is not None and regex.match(request.url.path[len(prefix):] if prefix else request.url.path):
                methods.update(getattr(route, "methods", None) or ())

    walk(list(request.app.routes))
    return sorted(methods)


async def _agent_unavailable(_: Request, exc: Exception) -> JSONResponse:
    return _json_error(503, str(exc))


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.error("API request failed: %s: %s", type(exc).__name__, exc)
    return _json_error(500, "internal error; the agent's log has the details")


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """413 for a request body over `limit` bytes: at once from Content-Length, or as soon as a
    chunked body passes it, so a large upload is never held in memory."""

    def __init__(self, app: ASGIApp, limit: int = BODY_LIMIT) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        too_big = _json_error(413, f"request body over {self.limit} bytes")
        if declared is not None:
            try:
                if int(declared) > self.limit:
                    await too_big(scope, receive, send)
                    return
            except ValueError:
                await _json_error(400, "Content-Length is not a number")(scope, receive, send)
                return
        if declared is None and scope["method"] not in ("GET", "HEAD"):
            # Chunked: read it here, within the limit, so the 413 comes before any route parses
            # it (FastAPI turns an exception while reading the body into a 400).
            buffered: list[Message] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client left
                size += len(message.get("body", b""))
                if size > self.limit:
                    await too_big(scope, receive, send)
                    return
                buffered.append(message)
                if not message.get("more_body", False):
                    break

            async def replay() -> Message:
                return buffered.pop(0) if buffered else await receive()

            await self.app(scope, replay, send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if not started:
                await too_big(scope, receive, send)


class ByListener:
    """Two listeners, one process: a request that came in on the metrics listener
    (--metrics-listen, node_exporter's model) reaches only `metrics_app`, which serves /metrics
    and /healthz without the token; every other request reaches the API."""

    def __init__(self, api: ASGIApp, metrics_app: ASGIApp, metrics_addr: tuple[str, int]) -> None:
        self.api, self.metrics_app = api, metrics_app
        self.host, self.port = metrics_addr[0], metrics_addr[1]
        self.wildcard = self.host in ("0.0.0.0", "::")

    def _on_metrics(self, scope: Scope) -> bool:
        server = scope.get("server")
        if not server or len(server) < 2:
            return False
        host, port = server[0], server[1]
        return bool(port == self.port and (self.wildcard or host == self.host or host == f"::ffff:{self.host}"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self._on_metrics(scope):
            await self.metrics_app(scope, receive, send)
        else:
            await self.api(scope, receive, send)


def create_metrics_app(api: FastAPI) -> FastAPI:
    """The metrics listener's app: GET /metrics and /healthz from the API's own state, no token,
    nothing else (a 404 for any other path, 405 for another method)."""
    app = FastAPI(title="vftune metrics", version=__version__, docs_url=None, redoc_url=None, openapi_url=None)
    app.state = api.state
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(AgentUnavailable, _agent_unavailable)
    app.add_exception_handler(Exception, _unexpected)
    app.add_api_route("/metrics", state.metrics, methods=["GET"], include_in_schema=False)
    app.add_api_route("/healthz", state.healthz, methods=["GET"], include_in_schema=False)
    app.add_middleware(BodyLimit)
    return app


@asynccontextmanager
async def _closing_workers(app: FastAPI) -> AsyncIterator[None]:
    """Where an ASGI server runs the lifespan (api/process.py closes them itself)."""
    yield
    if app.state.page_workers is not None:
        app.state.page_workers.close()


def create_app(agent: AgentHandle, store: History | None, token: str | None = None,
               token_for_reads: bool = False, agent_pid: int | None = None, check_host: bool = False) -> FastAPI:
    """token: the bearer every write needs (None: writes are refused, there is no way to
    authenticate); token_for_reads: every endpoint needs it (a --listen beyond loopback);
    agent_pid: the agent's process, when the API runs in another (api/process.py);
    check_host: answer only requests whose Host names a loopback address (a loopback --listen)."""
    app = FastAPI(
        lifespan=_closing_workers,
        title="vftune",
        version=__version__,
        description="Interrupt moderation tuning for SR-IOV VFs passed through to KVM guests. "
                    "Writes need `Authorization: Bearer <token>` (the `token` file in the agent's state "
                    "directory); times are Unix seconds or ISO 8601 with a zone.",
        docs_url=None, redoc_url=None,  # docs.include serves them without a CDN
    )
    app.state.agent = agent
    app.state.store = store
    # History pages are read by worker processes (store/pages.py) when the store is a file.
    app.state.page_workers = PageWorkers(store.path) if store is not None and store.on_disk else None
    app.state.token = token
    app.state.registry = build_registry(agent.view, agent_pid)
    app.state.rendered_vfs = state.RenderedVfs()
    app.add_exception_handler(BadParameter, _bad_parameter)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(AgentUnavailable, _agent_unavailable)
    app.add_exception_handler(Exception, _unexpected)
    for router in (state.router, history.router, events.router, profiles.make_router(auth.require_token),
                   rules.make_router(auth.require_token)):
        app.include_router(router)
    app.include_router(page.router)
    docs.include(app)
    if token_for_reads:
        app.add_middleware(auth.TokenForEverything, token=token)
    app.add_middleware(BodyLimit)
    # Outermost: the Host check and the token of a write come before any body is read.
    app.add_middleware(Guard, token=token, routes=app.router, check_host=check_host)
    return app
