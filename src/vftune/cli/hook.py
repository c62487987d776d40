"""`vftune hook`: the libvirt qemu hook. Tells the agent a guest started or stopped.

libvirt runs /etc/libvirt/hooks/qemu (and qemu.d/*) as `<domain> <operation> <sub-op> <extra>`
with the domain XML on stdin, and waits for it: a hook must never call back into libvirt (it
deadlocks) and must not hold up or fail a guest's start. So this parses the XML, posts one
short request to the local agent, and exits 0 within one total deadline (--timeout, default 1 s)
whatever the server does (a listener that drips its answer included) and whatever bytes arrive
on stdin; problems go to stderr, which libvirt logs.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import select
import sys
import threading
import time
import xml.etree.ElementTree as ET
from typing import NoReturn
from urllib.parse import urlsplit

import click

from vftune import paths
from vftune.logsafe import escape

DEFAULT_URL = "http://127.0.0.1:8740"
DEFAULT_TIMEOUT_S = 1.0
MAX_TIMEOUT_S = 30.0
MAX_XML_BYTES = 4 * 1024 * 1024  # a domain XML with hundreds of devices is ~100 kB

# Operations after which VF ownership has changed; the others (prepare, migrate, ...) are ignored.
REPORTED = {"started", "stopped", "release", "reconnect", "restore"}


def process_age() -> float:
    """Seconds since this process was exec'd (its Python start-up included), 0 if unknown: the
    deadline is libvirt's wait, not the time since our code began."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            start_ticks = int(fh.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _say(domain: str, operation: str, message: str) -> None:
    click.echo(escape(f"vftune hook: {domain} {operation}: {message}"), err=True)


def read_stdin(deadline: float) -> bytes:
    """The XML libvirt writes, up to MAX_XML_BYTES and the deadline; never blocks past it."""
    if sys.stdin is None or sys.stdin.isatty():
        return b""
    fd = sys.stdin.fileno()
    chunks: list[bytes] = []
    size = 0
    while size < MAX_XML_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def parse_domain(data: bytes) -> tuple[list[str], str | None, str | None]:
    """(VF PCI addresses, uuid, problem) from domain XML bytes of any kind."""
    from vftune.hostdriver.base import HostError
    from vftune.hostdriver.linux.libvirt_guests import hostdev_addresses

    if not data.strip():
        return [], None, None
    text = data.decode("utf-8", errors="replace")
    try:
        vfs = hostdev_addresses(text)
        uuid = ET.fromstring(text).findtext("uuid")
        return vfs, (uuid.strip() if uuid else None), None
    except (HostError, ET.ParseError, ValueError) as exc:
        return [], None, f"{exc}; telling the agent without VF list"


def _number(value: str, option: str, low: float, high: float) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{option} {value[:40]!r}: not a number") from None
    if not math.isfinite(number) or not low < number <= high:
        raise ValueError(f"{option} {value[:40]}: must be > {low:g} and <= {high:g} seconds")
    return number


@click.command("hook", context_settings={"ignore_unknown_options": True})
@click.argument("domain")
@click.argument("operation")
@click.argument("sub_operation", required=False, default="-")
@click.argument("extra", required=False, default="-")
@click.option("--url", default=DEFAULT_URL, show_default=True, help="The agent's API.")
@click.option("--timeout", "timeout_text", default=str(DEFAULT_TIMEOUT_S), show_default=True,
              help="Total seconds the hook may take, whatever the agent does.")
@click.option("--token-file", default=None, metavar="PATH",
              help="The agent's API token [default: `token` in the state directory].")
def command(domain: str, operation: str, sub_operation: str, extra: str, url: str, timeout_text: str,
            token_file: str | None) -> None:
    """Run by libvirt as its qemu hook; reads the domain XML from stdin. Always exits 0."""
    started = time.monotonic()
    try:
        timeout = _number(timeout_text, "--timeout", 0.0, MAX_TIMEOUT_S)
    except ValueError as exc:
        _say(domain, operation, f"{exc}; using {DEFAULT_TIMEOUT_S:g}")
        timeout = DEFAULT_TIMEOUT_S
    deadline = started + max(0.1, timeout - process_age())
    if operation not in REPORTED:
        return
    try:
        base = urlsplit(url)
        if base.scheme not in ("http", "https") or not base.hostname:
            raise ValueError("expected http://HOST:PORT")
        port = base.port
    except ValueError as exc:
        _say(domain, operation, f"--url {url[:80]!r}: {exc}; agent not told")
        _flush_and_exit()
    # Leave a little of the deadline for the request itself.
    vfs, uuid, problem = parse_domain(read_stdin(started + (deadline - started) * 0.5))
    if problem:
        _say(domain, operation, problem)
    token = paths.read_token(paths.token_path(None, token_file))
    body = json.dumps({"guest": domain, "uuid": uuid, "operation": operation, "vfs": vfs,
                       "source": "libvirt-hook"}, ensure_ascii=True).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    outcome: list[str] = []

    def post() -> None:
        # http.client, not httpx: it imports in milliseconds, and libvirt waits for this.
        left = max(0.05, deadline - time.monotonic())
        kind = http.client.HTTPSConnection if base.scheme == "https" else http.client.HTTPConnection
        conn = kind(base.hostname or "", port, timeout=left)
        try:
            conn.request("POST", f"{base.path.rstrip('/')}/v1/events", body=body, headers=headers)
            resp = conn.getresponse()
            text = resp.read(200).decode("utf-8", "replace")
            outcome.append("" if resp.status == 202 else f"agent answered {resp.status}: {text}")
        except (OSError, http.client.HTTPException) as exc:
            # The agent may be down; libvirt events and its periodic re-read catch up later.
            outcome.append(f"agent at {url} not reached: {exc}")
        except Exception as exc:  # nothing the agent or the network does may fail the hook
            outcome.append(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    # A socket timeout bounds each read, not the whole: a listener that drips one byte per
    # 0.3 s would hold the hook for ever. The thread is left behind at the deadline.
    sender = threading.Thread(target=post, name="vftune-hook", daemon=True)
    sender.start()
    sender.join(max(0.0, deadline - time.monotonic()))
    if not outcome:
        _say(domain, operation, f"agent at {url} did not answer within {timeout:g} s; guest goes on")
    elif outcome[0]:
        _say(domain, operation, outcome[0])
    _flush_and_exit()


def _flush_and_exit() -> NoReturn:
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(0)  # the sender thread may still be stuck in a read: do not wait for it
