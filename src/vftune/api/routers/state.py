"""Live state from the agent: health, the host, its VFs, and Prometheus metrics."""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import TypeAdapter
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune.api import models
from vftune.api.deps import PCI_ADDRESS, AgentHandle, agent, cached_view, cached_view_async, store
from vftune.store.reads import History

router = APIRouter()


# The routes that only read the cached view are async: a sync route costs a hop to a worker
# thread and back per request, more than the route itself.
@router.get("/healthz", response_model=models.Health)
async def healthz(handle: AgentHandle = Depends(agent), db: History | None = Depends(store)) -> Any:
    # The API process's agent knows the ticks without a view (its heartbeat): a health check
    # does not make the agent push views.
    live = getattr(handle, "liveness", None)
    if live is not None:
        ticks, last_tick_wall, interval_s, backend = live()
    else:
        view = cached_view(handle)
        ticks, last_tick_wall, interval_s, backend = view.ticks, view.last_tick_wall, view.interval_s, view.backend
    age = None if last_tick_wall is None else time.time() - last_tick_wall
    # Stalled: no tick for three intervals of wall time (the sim may run faster, never slower).
    stalled = age is not None and age > 3 * interval_s + 5
    # Degraded: tuning and restoring go on, history is not recorded (a full disk); still 200.
    degraded = db.degraded if db is not None else None
    status = "starting" if age is None else ("stalled" if stalled else ("degraded" if degraded else "ok"))
    body = {
        "status": status,
        "ticks": ticks,
        "last_tick_age_s": age,
        "backend": backend,
        "degraded": degraded,
    }
    return JSONResponse(body, status_code=503 if stalled else 200)


@router.get("/v1/host", response_model=models.HostOut)
async def host(handle: AgentHandle = Depends(agent)) -> Any:
    return models.HostOut.model_validate(await cached_view_async(handle))


_VF_LIST = TypeAdapter(list[models.VfOut])


class RenderedVfs:
    """GET /v1/vfs as bytes, rendered once per tick. The view changes only at a tick, so twenty
    clients polling cost one copy of the view and one pydantic rendering per tick, not one per
    request; the rendering runs on a worker thread, one at a time, and a hit never leaves the
    event loop."""

    def __init__(self) -> None:
        self._current: tuple[int, bytes, str] = (-1, b"", "")  # ticks, body, ETag: replaced whole
        self._lock = threading.Lock()

    def _fresh(self, handle: AgentHandle) -> tuple[int, bytes, str] | None:
        ticks = getattr(handle, "ticks", None)
        current = self._current
        return current if isinstance(ticks, int) and current[0] >= ticks else None

    async def get(self, handle: AgentHandle) -> tuple[bytes, str]:
        current = self._fresh(handle)
        if current is None:
            current = await run_in_threadpool(self._render, handle)
        return current[1], current[2]

    def _render(self, handle: AgentHandle) -> tuple[int, bytes, str]:
        with self._lock:  # the requests that arrive meanwhile wait for this rendering
            current = self._fresh(handle)
            if current is None:
                view = cached_view(handle)
                body = _VF_LIST.dump_json([models.VfOut.model_validate(vf) for vf in view.vfs])
                current = (view.ticks, body, '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"')
                self._current = current
            return current


def _matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 If-None-Match: a list of (weak or strong) tags, or *."""
    if not if_none_match:
        return False
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or etag in tags or f"W/{etag}" in tags


@router.get("/v1/vfs", response_model=list[models.VfOut],
            responses={304: {"description": "Not Modified: the ETag given in If-None-Match is still current"}})
async def vfs(request: Request, handle: AgentHandle = Depends(agent)) -> Any:
    """Every VF, as of the last tick. The ETag changes with the body: send it back in
    If-None-Match to get a 304 until the next tick changes something."""
    cache: RenderedVfs = request.app.state.rendered_vfs
    body, etag = await cache.get(handle)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if _matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.get("/v1/vfs/{vf}", response_model=models.VfDetail, responses={404: {"model": models.ErrorBody}})
async def vf_detail(
    vf: str = Path(pattern=PCI_ADDRESS, description="VF PCI address, 0000:03:10.0"),
    handle: AgentHandle = Depends(agent),
) -> Any:
    found = (await cached_view_async(handle)).vf(vf.lower())
    if found is None:
        raise StarletteHTTPException(404, f"no VF {vf} on this host")
    return models.VfDetail.model_validate(found)


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.registry), media_type=CONTENT_TYPE_LATEST)
