"""Stopping per-guest worker threads: the actuator's and the drops reader's, the same way."""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol


class GuestThread(Protocol):
    closed: bool
    thread: threading.Thread | None


def stop_guest_threads(stop: threading.Event, cond: threading.Condition, guests: dict[str, Any],
                       join_s: float) -> None:
    """Tell every guest's thread to end, forget the guests, and wait at most join_s in all for
    the threads (each finishes or times out its current agent call)."""
    stop.set()
    with cond:
        ending: list[GuestThread] = list(guests.values())
        guests.clear()
        for g in ending:
            g.closed = True
        cond.notify_all()
    end = time.monotonic() + join_s
    for g in ending:
        if g.thread is not None and g.thread is not threading.current_thread():
            g.thread.join(max(0.0, end - time.monotonic()))
