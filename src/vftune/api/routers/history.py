"""History from the store: a VF's samples and decisions, and every decision."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune.api import models
from vftune.api.deps import PCI_ADDRESS, AgentHandle, Window, agent, set_next_cursor, store, time_window
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
    """Newest `limit` samples (raw, then 1-minute rows beyond the raw window) and decisions of
    the window, oldest first; next_cursor (a time) pages to older samples."""
    until = min(w.until, w.cursor_t()) if w.cursor is not None else w.until
    samples = db.samples(found.pci, w.since, until, w.limit, exclusive=w.cursor is not None) if db else []
    decisions = db.decisions(found.pci, w.since, until, w.limit) if db else []
    next_cursor = repr(samples[0]["t"]) if len(samples) == w.limit else None
    return {"pci": found.pci, "since": w.since, "until": w.until, "samples": samples, "decisions": decisions,
            "next_cursor": next_cursor}


@router.get("/v1/decisions", response_model=list[models.DecisionOut],
            responses={422: {"model": models.ErrorBody}})
def decisions(response: Response, w: Window = Depends(time_window), db: Store | None = Depends(store)) -> Any:
    """Newest `limit` decisions of the window, oldest first; X-Next-Cursor pages to older ones."""
    rows = db.decisions(None, w.since, w.until, w.limit, w.cursor_id()) if db else []
    set_next_cursor(response, rows, w.limit, "id")
    return rows
