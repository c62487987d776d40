"""Live state from the agent: health, the host, its VFs, and Prometheus metrics."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import TypeAdapter
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune.api import models
from vftune.api.deps import PCI_ADDRESS, AgentHandle, agent, cached_view, store
from vftune.store.db import Store

router = APIRouter()


@router.get("/healthz", response_model=models.Health)
def healthz(handle: AgentHandle = Depends(agent), db: Store | None = Depends(store)) -> Any:
    view = handle.view()
    age = None if view.last_tick_wall is None else time.time() - view.last_tick_wall
    # Stalled: no tick for three intervals of wall time (the sim may run faster, never slower).
    stalled = age is not None and age > 3 * view.interval_s + 5
    # Degraded: tuning and restoring go on, history is not recorded (a full disk); still 200.
    degraded = db.degraded if db is not None else None
    status = "starting" if age is None else ("stalled" if stalled else ("degraded" if degraded else "ok"))
    body = {
        "status": status,
        "ticks": view.ticks,
        "last_tick_age_s": age,
        "backend": view.backend,
        "degraded": degraded,
    }
    return JSONResponse(body, status_code=503 if stalled else 200)


@router.get("/v1/host", response_model=models.HostOut)
def host(handle: AgentHandle = Depends(agent)) -> Any:
    return models.HostOut.model_validate(handle.view())


_VF_LIST = TypeAdapter(list[models.VfOut])
_rendered: dict[int, tuple[int, bytes]] = {}


@router.get("/v1/vfs", response_model=list[models.VfOut])
def vfs(handle: AgentHandle = Depends(agent)) -> Any:
    """Every VF; rendered once per tick, so many clients cost one rendering (p99 target 50 ms)."""
    view = cached_view(handle)
    hit = _rendered.get(id(handle))
    if hit is None or hit[0] != view.ticks:
        body = _VF_LIST.dump_json([models.VfOut.model_validate(vf) for vf in view.vfs])
        hit = _rendered[id(handle)] = (view.ticks, body)
    return Response(hit[1], media_type="application/json")


@router.get("/v1/vfs/{vf}", response_model=models.VfDetail, responses={404: {"model": models.ErrorBody}})
def vf_detail(
    vf: str = Path(pattern=PCI_ADDRESS, description="VF PCI address, 0000:03:10.0"),
    handle: AgentHandle = Depends(agent),
) -> Any:
    found = handle.view().vf(vf.lower())
    if found is None:
        raise StarletteHTTPException(404, f"no VF {vf} on this host")
    return models.VfDetail.model_validate(found)


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.registry), media_type=CONTENT_TYPE_LATEST)
