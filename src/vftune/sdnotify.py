"""systemd's notify protocol over $NOTIFY_SOCKET: READY=1, WATCHDOG=1, STOPPING=1, STATUS=...

A datagram to a unix socket (an abstract one when the path starts with "@"); nothing happens
when the agent does not run under systemd. A few lines instead of a dependency.
"""

from __future__ import annotations

import os
import socket


def notify(message: str) -> bool:
    """Send one state line to systemd; False when not under systemd or the socket is gone."""
    path = os.environ.get("NOTIFY_SOCKET", "")
    if not path:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode("utf-8", "replace"))
    except OSError:
        return False
    return True


def watchdog_interval() -> float | None:
    """Seconds between pets systemd expects (half of WatchdogSec), or None without a watchdog."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 2e6
