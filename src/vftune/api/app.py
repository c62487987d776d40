"""The REST API for orchestrators and the CLI: current state from the agent, history from the store.

create_app wires the routers (routers/) to one agent and one store and turns every error into
a JSON body with one line naming the problem.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune import __version__
from vftune.api import docs
from vftune.api.deps import AgentHandle, BadParameter
from vftune.api.metrics import build_registry
from vftune.api.routers import events, history, page, state
from vftune.store.db import Store


async def _bad_parameter(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BadParameter)
    return JSONResponse({"error": exc.message}, status_code=422)


async def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path"))
    message = f"{where}={first.get('input')!r}: {first.get('msg', 'invalid')}"
    return JSONResponse({"error": message, "detail": exc.errors()}, status_code=422)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)


def create_app(agent: AgentHandle, store: Store | None) -> FastAPI:
    app = FastAPI(
        title="vftune",
        version=__version__,
        description="Interrupt moderation tuning for SR-IOV VFs passed through to KVM guests.",
        docs_url=None, redoc_url=None,  # docs.include serves them without a CDN
    )
    app.state.agent = agent
    app.state.store = store
    app.state.registry = build_registry(agent.view)
    app.add_exception_handler(BadParameter, _bad_parameter)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for router in (state.router, history.router, events.router):
        app.include_router(router)
    app.include_router(page.router)
    docs.include(app)
    return app
