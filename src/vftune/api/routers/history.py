"""History from the store: a VF's samples and decisions, and every decision."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

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
    page_workers,
    set_next_cursor,
    store,
    store_reads,
    time_window,
)
from vftune.store.pages import PagesUnavailable, PageWorkers, vf_page_body
from vftune.store.reads import History

router = APIRouter()
T = TypeVar("T")


@router.get(
    "/v1/vfs/{vf}/history", response_model=models.History,
    responses={404: {"model": models.ErrorBody}, 422: {"model": models.ErrorBody},
               503: {"model": models.ErrorBody, "description": "no history worker answered in time"}},
)
def vf_history(
    vf: str = Path(pattern=PCI_ADDRESS, description="VF PCI address, 0000:03:10.0"),
    w: Window = Depends(time_window),
    handle: AgentHandle = Depends(agent),
    db: History | None = Depends(store),
    workers: PageWorkers | None = Depends(page_workers),
) -> Any:
    """A page of the window, oldest first: the newest `limit` samples (raw, then 1-minute rows
    beyond the raw window) and the decisions of the time they span (at most `limit`; then the
    page is cut at the oldest one). next_cursor (a time) pages to older rows: following it gives
    every sample and every decision of the window once."""
    found = cached_view(handle).vf(vf.lower())
    if found is None:
        raise StarletteHTTPException(404, f"no VF {vf} on this host")
    until = min(w.until, w.cursor_t()) if w.cursor is not None else w.until
    exclusive = w.cursor is not None
    head = {"pci": found.pci, "since": w.since, "until": w.until}
    if workers is not None:
        body = _from_workers(lambda: workers.vf_page(head, found.pci, w.since, until, w.limit, exclusive))
    elif db is not None:
        with store_reads:
            body = vf_page_body(db, head, found.pci, w.since, until, w.limit, exclusive)
    else:
        return json_response({**head, "samples": [], "decisions": [], "next_cursor": None})
    return Response(body, media_type="application/json")

@router.get("/v1/decisions", response_model=list[models.DecisionOut],
            responses={422: {"model": models.ErrorBody},
                       503: {"model": models.ErrorBody, "description": "no history worker answered in time"}})
def decisions(w: Window = Depends(time_window), db: History | None = Depends(store),
              workers: PageWorkers | None = Depends(page_workers)) -> Any:
    """Newest `limit` decisions of the window, oldest first; X-Next-Cursor pages to older ones."""
    if workers is not None:
        body, count, oldest = _from_workers(lambda: workers.decisions(w.since, w.until, w.limit, w.cursor_id()))
        out = Response(body, media_type="application/json")
        if count == w.limit:
            out.headers["X-Next-Cursor"] = str(oldest)
        return out
    with store_reads:
        rows = db.decisions(None, w.since, w.until, w.limit, w.cursor_id()) if db else []
    out = json_response(rows)
    set_next_cursor(out, rows, w.limit, "id")
    return out


def _from_workers(read: Callable[[], T]) -> T:
    try:
        return read()
    except PagesUnavailable as exc:
        raise StarletteHTTPException(503, str(exc)) from None
