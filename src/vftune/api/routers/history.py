"""History from the store: a VF's samples and decisions, and every decision."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune.api import models
from vftune.api.deps import PCI_ADDRESS, AgentHandle, Window, agent, store, time_window
from vftune.store.db import Store

router = APIRouter()


@router.get(
    "/v1/vfs/{vf}/history", response_model=models.History,
    responses={404: {"model": models.ErrorBody}, 422: {"model": models.ErrorBody}},
)
def vf_history(
    vf: str = Path(pattern=PCI_ADDRESS, description="VF PCI address, 0000:03:10.0"),
    w: Window = Depends(time_window),
    handle: AgentHandle = Depends(agent),
    db: Store | None = Depends(store),
) -> Any:
    found = handle.view().vf(vf.lower())
    if found is None:
        raise StarletteHTTPException(404, f"no VF {vf} on this host")
    samples = db.samples(found.pci, w.since, w.until, w.limit) if db else []
    decisions = db.decisions(found.pci, w.since, w.until, w.limit) if db else []
    return {"pci": found.pci, "since": w.since, "until": w.until, "samples": samples, "decisions": decisions}


@router.get("/v1/decisions", response_model=list[models.DecisionOut])
def decisions(w: Window = Depends(time_window), db: Store | None = Depends(store)) -> Any:
    return db.decisions(None, w.since, w.until, w.limit) if db else []
