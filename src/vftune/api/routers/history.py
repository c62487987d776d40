"""History from the store: a VF's samples and decisions, and every decision."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune.api import models
from vftune.api.deps import (
    PCI_ADDRESS,
    AgentHandle,
    Window,
    agent,
    cached_view,
    json_response,
    set_next_cursor,
    store,
    store_reads,
    time_window,
)
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
    """Newest `limit` samples (raw, then 1-minute rows beyond the raw window) and decisions of
    the window, oldest first; next_cursor (a time) pages to older samples."""
    found = cached_view(handle).vf(vf.lower())
    if found is None:
        raise StarletteHTTPException(404, f"no VF {vf} on this host")
    until = min(w.until, w.cursor_t()) if w.cursor is not None else w.until
    with store_reads:
        samples = db.samples(found.pci, w.since, until, w.limit, exclusive=w.cursor is not None) if db else []
        decisions = db.decisions(found.pci, w.since, until, w.limit) if db else []
    next_cursor = repr(samples[0]["t"]) if len(samples) == w.limit else None
    # The rows are the documented fields already: JSON straight from them, no model per row.
    return json_response({"pci": found.pci, "since": w.since, "until": w.until, "samples": samples,
                          "decisions": decisions, "next_cursor": next_cursor})


@router.get("/v1/decisions", response_model=list[models.DecisionOut],
            responses={422: {"model": models.ErrorBody}})
def decisions(response: Response, w: Window = Depends(time_window), db: Store | None = Depends(store)) -> Any:
    """Newest `limit` decisions of the window, oldest first; X-Next-Cursor pages to older ones."""
    with store_reads:
        rows = db.decisions(None, w.since, w.until, w.limit, w.cursor_id()) if db else []
    out = json_response(rows)
    set_next_cursor(out, rows, w.limit, "id")
    return out
