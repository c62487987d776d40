"""Guest lifecycle events from the libvirt hook: recorded, and an inventory refresh asked for."""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Depends, Response

from vftune.api import models
from vftune.api.auth import require_token
from vftune.api.deps import (
    PCI_ADDRESS,
    AgentHandle,
    BadParameter,
    Window,
    agent,
    set_next_cursor,
    store,
    store_reads,
    time_window,
)
from vftune.store.reads import History

router = APIRouter()


@router.post("/v1/events", status_code=202, response_model=models.GuestEventOut,
             dependencies=[Depends(require_token)],
             responses={400: {"model": models.ErrorBody}, 401: {"model": models.ErrorBody},
                        403: {"model": models.ErrorBody},
                        413: {"model": models.ErrorBody}, 422: {"model": models.ErrorBody}})
def guest_event(
    event: models.GuestEventIn, handle: AgentHandle = Depends(agent), db: History | None = Depends(store),
) -> Any:
    """A guest started or stopped (libvirt hook): re-read who owns which VF on the next tick."""
    if event.operation not in models.GUEST_OPERATIONS:
        raise BadParameter(f"operation: not one of {', '.join(models.GUEST_OPERATIONS)}")
    bad = [pci for pci in event.vfs if not re.match(PCI_ADDRESS, pci)]
    if bad:
        raise BadParameter(f"vfs: {len(bad)} item(s) not a PCI address like 0000:03:10.0")
    t = handle.wall_now()
    event_id = db.record_guest_event(t, event.guest, event.uuid, event.operation, event.vfs,
                                     event.source) if db else 0
    handle.request_refresh(f"{event.source}: {event.guest} {event.operation}")
    return {"id": event_id, "t": t, **event.model_dump()}


@router.get("/v1/events", response_model=list[models.GuestEventOut],
            responses={422: {"model": models.ErrorBody}})
def guest_events(response: Response, w: Window = Depends(time_window), db: History | None = Depends(store)) -> Any:
    """Newest `limit` events of the window, oldest first; X-Next-Cursor pages to older ones."""
    with store_reads:
        rows = db.guest_events(w.since, w.until, w.limit, w.cursor_id()) if db else []
    set_next_cursor(response, rows, w.limit, "id")
    return rows
