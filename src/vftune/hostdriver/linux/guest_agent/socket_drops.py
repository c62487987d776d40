"""GuestDropsReader: each guest's socket receive drops, read through its agent, never on the tick.

The VF counters count what a guest took off its rx ring; a UDP receiver that cannot keep up drops
the datagram later, at its socket, and only the guest's own /proc/net/snmp{,6} counts it. One
poller thread per tracked guest reads both files with guest-file-open (mode "r"),
guest-file-read (base64, until eof, at most Limits.max_file_bytes) and guest-file-close (always,
once opened), all within Limits.read_deadline_s, and keeps the latest sum with its read time.
The tick only calls track() (inventory time) and latest() (every snapshot): both take a lock
for a few dictionary operations, so a hung agent costs its own guest's counter, never the tick.

- Rate: a guest is read at most once per Limits.interval_s (the tick interval).
- Freshness: latest(now) gives a guest's count only when it was read within Limits.max_age_s;
  older, or never read, the guest is left out (unknown), never reported as 0.
- Failures (no agent, a timeout, guest-file-* blocked as RHEL's qemu-ga does by default, text
  that is not the kernel's): one WARNING per guest and cause, not one per try, and the guest is
  retried after a backoff that doubles per failure (Limits.backoff_*). A read that works again
  is logged once at INFO and clears the backoff.
- A guest without IPv6 has no /proc/net/snmp6: its IPv6 part counts 0.
- The same read asks for the guest's own CPU accounting (guest-get-cpustats, cpustats.py) when
  its guest-info lists the command: DropsReading.cpu. Without it (qemu-ga before 7.1, a
  non-Linux guest, a reply that is not one) the drops are still read and cpu is None; the
  reason is logged once per guest. A guest whose guest-file-* are blocked is not read at all.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.guest_agent.cpustats import COMMAND as CPUSTATS_COMMAND
from vftune.hostdriver.linux.guest_agent.cpustats import CpuStatsError, parse_cpustats
from vftune.hostdriver.linux.guest_agent.protocol import AgentChannel, AgentError, not_allowed
from vftune.hostdriver.linux.guest_agent.snmp_text import (
    SNMP6_PATH,
    SNMP_PATH,
    SnmpTextError,
    parse_snmp,
    parse_snmp6,
)
from vftune.hostdriver.linux.guest_agent.threads import stop_guest_threads
from vftune.model import GuestCpuTimes, VfDrops

log = logging.getLogger("vftune.linux.guest_drops")

FILE_COMMANDS = ("guest-file-open", "guest-file-read", "guest-file-close")


@dataclass(frozen=True)
class DropsLimits:
    interval_s: float = 0.5  # at most one read of a guest per this (the tuner's window)
    max_age_s: float = 2.0  # a count read longer ago is left out of latest()
    call_timeout_s: float = 2.0  # one agent command
    read_deadline_s: float = 5.0  # one read of a guest: both files, every call
    backoff_initial_s: float = 5.0  # after a guest's first failure; doubled per failure
    backoff_max_s: float = 300.0
    max_file_bytes: int = 1 << 20  # snmp6 is ~3 KiB; a guest sending more is not a kernel
    chunk_bytes: int = 64 << 10  # guest-file-read count


DEFAULT_DROPS_LIMITS = DropsLimits()


@dataclass(frozen=True)
class DropsReading:
    count: int  # cumulative datagrams dropped at the guest's sockets (IPv4 + IPv6, UDP + UDP-Lite)
    read_at: float  # on the reader's clock, when the read began
    cpu: GuestCpuTimes | None = None  # the guest's own CPU accounting, when its agent gives it


@dataclass(frozen=True)
class GuestDropsStatus:
    reading: DropsReading | None  # the latest that worked, however old
    error: str | None  # why the last read failed, one line (None: it worked, or none finished yet)
    failures: int  # consecutive failed reads
    reads: int  # reads that worked since tracked
    retry_in_s: float  # until the next try after a failure (0: not backing off)


class _ReadFailed(Exception):
    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass
class _Guest:
    name: str
    thread: threading.Thread | None = None
    channel: AgentChannel | None = None
    checked: bool = False  # guest-info said guest-file-* are allowed (on this connection)
    cpustats: bool = False  # ... and listed guest-get-cpustats
    cpu_warned: str | None = None  # why its CPU accounting is not read, as last logged
    reading: DropsReading | None = None
    next_at: float = 0.0  # on the reader's clock
    failures: int = 0
    warned: str | None = None  # the cause last warned about
    last_error: str | None = None
    closed: bool = False
    reads: int = 0  # reads that worked


class GuestDropsReader:
    """Reads tracked guests' socket drops in the background (see the module doc).

    connect(guest name) -> AgentChannel is called on the guest's poller thread. clock paces
    reads and stamps them (the host's clock, so latest() compares with the snapshot's time);
    agent-call deadlines are always real time.
    """

    def __init__(
        self,
        connect: Callable[[str], AgentChannel],
        *,
        limits: DropsLimits = DEFAULT_DROPS_LIMITS,
        clock: Callable[[], float] = time.monotonic,
        paths: tuple[str, str] = (SNMP_PATH, SNMP6_PATH),
    ) -> None:
        self._connect = connect
        self.limits = limits
        self._clock = clock
        self._paths = paths
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._guests: dict[str, _Guest] = {}

    # -- the tick's side: never blocks on a guest ----------------------------------------------

    def track(self, guests: Iterable[str]) -> None:
        """Read exactly these guests (the owners of the VFs vftune tunes); others are dropped."""
        wanted = set(guests)
        with self._cond:
            if self._stop.is_set():
                return
            for name in set(self._guests) - wanted:
                self._guests.pop(name).closed = True
            for name in sorted(wanted - set(self._guests)):
                g = self._guests[name] = _Guest(name)
                g.thread = threading.Thread(target=self._run, args=(g,), name=f"vftune-drops-{name}", daemon=True)
                g.thread.start()
            self._cond.notify_all()

    def latest(self, now: float | None = None) -> dict[str, int]:
        """Guest -> cumulative drops, for guests read within max_age_s of `now` (default: the clock)."""
        return {name: r.count for name, r in self.latest_readings(now).items()}

    def latest_readings(self, now: float | None = None) -> dict[str, DropsReading]:
        """Guest -> its latest reading (count and read time), for guests read within max_age_s."""
        at = self._clock() if now is None else now
        with self._cond:
            return {name: g.reading for name, g in self._guests.items()
                    if g.reading is not None and at - g.reading.read_at <= self.limits.max_age_s}

    def reading(self, guest: str) -> DropsReading | None:
        with self._cond:
            g = self._guests.get(guest)
            return g.reading if g is not None else None

    def status(self, guest: str) -> GuestDropsStatus | None:
        """The guest's last reading and, when its last read failed, why (None: not tracked)."""
        with self._cond:
            g = self._guests.get(guest)
            if g is None:
                return None
            return GuestDropsStatus(g.reading, g.last_error, g.failures, g.reads,
                                    max(0.0, g.next_at - self._clock()) if g.failures else 0.0)

    def source(self, guest: str) -> VfDrops:
        """The guest's counts for an operator (model.DropsSource): "guest-agent" while fresh ones
        arrive, "pending" until the first read ends or while one is late, "unavailable" with the last
        failure and when the next try is."""
        with self._cond:
            g = self._guests.get(guest)
            if g is None:
                return VfDrops("pending", f"guest {guest}: not read yet (tracked from the next inventory)")
            if g.failures and g.last_error is not None:
                wait_s = g.next_at - self._clock()
                retry = f"next try in {wait_s:.0f} s" if wait_s >= 0.5 else "trying again now"
                return VfDrops("unavailable", f"{g.last_error}; {retry}")
            if g.reading is None:
                return VfDrops("pending", f"guest {guest}: the first read through its guest agent is under way")
            age = self._clock() - g.reading.read_at
            if age > self.limits.max_age_s:
                return VfDrops("pending", f"guest {guest}: its last count is {age:.0f} s old, "
                               "waiting on its guest agent")
            return VfDrops("guest-agent", f"guest {guest}: UDP RcvbufErrors (/proc/net/snmp, snmp6) "
                           "through its guest agent")

    def read_now(self, guest: str) -> int:
        """One read of `guest` on the caller's thread, blocking up to Limits.read_deadline_s (plus
        the closes): for benchmarks and diagnostics, never the tick. HostError says why not."""
        g = _Guest(guest)
        try:
            return self._read(g)[0]
        except _ReadFailed as exc:
            raise HostError(str(exc)) from None
        finally:
            if g.channel is not None:
                g.channel.close()

    def close(self) -> None:
        """Stop the pollers (each finishes or times out its current call) and close channels."""
        stop_guest_threads(self._stop, self._cond, self._guests, self.limits.read_deadline_s + 1.0)

    # -- pollers ---------------------------------------------------------------------------------

    def _run(self, g: _Guest) -> None:
        try:
            while True:
                with self._cond:
                    while True:
                        if g.closed or self._stop.is_set():
                            return
                        wait_s = g.next_at - self._clock()
                        if wait_s <= 0:
                            break
                        # Re-read the clock at least every interval: it may be the host's, not real time.
                        self._cond.wait(min(wait_s, self.limits.interval_s))
                    started = self._clock()
                    g.next_at = started + self.limits.interval_s
                try:
                    count, cpu = self._read(g)
                except _ReadFailed as exc:
                    self._failed(g, exc.cause, str(exc))
                except Exception as exc:  # a bug costs one read, not the guest's poller
                    log.exception("guest %s: reading its socket drops failed", g.name)
                    self._drop_channel(g)
                    self._failed(g, "internal", f"guest {g.name}: internal error: {type(exc).__name__}: {exc}")
                else:
                    self._succeeded(g, DropsReading(count, started, cpu))
        finally:
            if g.channel is not None:
                g.channel.close()

    def _succeeded(self, g: _Guest, reading: DropsReading) -> None:
        with self._cond:
            if g.warned is not None:
                log.info("guest %s: its socket drops are readable again (%d)", g.name, reading.count)
            elif g.reads == 0:
                log.info("guest %s: reading its socket drops through its guest agent (%d)", g.name, reading.count)
            g.reading, g.failures, g.warned, g.last_error = reading, 0, None, None
            g.reads += 1
            self._cond.notify_all()

    def _failed(self, g: _Guest, cause: str, message: str) -> None:
        with self._cond:
            g.failures += 1
            delay = min(self.limits.backoff_max_s, self.limits.backoff_initial_s * 2 ** (g.failures - 1))
            g.next_at = max(g.next_at, self._clock() + delay)
            g.last_error = message
            if g.warned != cause and not g.closed:
                g.warned = cause
                log.warning("%s; its socket drops are unknown, retrying with backoff", message)
            self._cond.notify_all()

    def _drop_channel(self, g: _Guest) -> None:
        if g.channel is not None:
            g.channel.close()
        g.channel, g.checked = None, False

    def _channel(self, g: _Guest) -> AgentChannel:
        if g.channel is None:
            try:
                g.channel = self._connect(g.name)
            except HostError as exc:
                raise _ReadFailed("absent", str(exc)) from None
        return g.channel

    def _read(self, g: _Guest) -> tuple[int, GuestCpuTimes | None]:
        """Both files, summed, and the guest's CPU accounting when it gives it; _ReadFailed with
        the cause otherwise. Runs without the lock."""
        deadline = time.monotonic() + self.limits.read_deadline_s
        snmp, snmp6 = self._paths
        try:
            if not g.checked:
                self._check(g, deadline)
            count = parse_snmp(self._file(g, snmp, deadline), snmp)
            try:
                text6 = self._file(g, snmp6, deadline)
            except _NoFile:
                pass  # IPv6 disabled in the guest: nothing to count there
            else:
                count += parse_snmp6(text6, snmp6)
            return count, self._cpu(g, deadline) if g.cpustats else None
        except AgentError as exc:
            if exc.kind in ("absent", "timeout"):
                self._drop_channel(g)  # the next try connects afresh (libvirt: maybe a new domain)
            raise _ReadFailed(exc.kind, str(exc)) from None
        except SnmpTextError as exc:
            raise _ReadFailed("unparsable", f"guest {g.name}: {exc}") from None

    def _call(self, g: _Guest, deadline: float, execute: str, arguments: dict[str, Any] | None = None) -> Any:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AgentError("timeout", f"guest {g.name}: {execute}: read deadline "
                             f"({self.limits.read_deadline_s:g} s) passed")
        return self._channel(g).command(execute, arguments, min(self.limits.call_timeout_s, left))

    def _check(self, g: _Guest, deadline: float) -> None:
        """guest-info lists what the guest allows: a blocked guest-file-* is told apart from a failure."""
        info = self._call(g, deadline, "guest-info")
        refusal = not_allowed(info, FILE_COMMANDS)
        if refusal is not None:
            raise _ReadFailed("forbidden", f"guest {g.name}: {refusal}")
        g.checked = True
        cpu_refusal = not_allowed(info, (CPUSTATS_COMMAND,))
        g.cpustats = cpu_refusal is None
        if cpu_refusal is not None:
            self._cpu_unread(g, f"guest {g.name}: {cpu_refusal}")

    def _cpu(self, g: _Guest, deadline: float) -> GuestCpuTimes | None:
        """The guest's CPU accounting, or None (logged once) when its agent answers with an error
        or with something that is not a Linux guest's: the drops are read all the same."""
        try:
            times = parse_cpustats(self._call(g, deadline, CPUSTATS_COMMAND))
        except AgentError as exc:
            if exc.kind != "command":
                raise  # the connection or the deadline: the whole read failed
            self._cpu_unread(g, str(exc))
            return None
        except CpuStatsError as exc:
            self._cpu_unread(g, f"guest {g.name}: {exc}")
            return None
        if g.cpu_warned is not None:
            log.info("guest %s: its CPU accounting is readable again", g.name)
            g.cpu_warned = None
        return times

    def _cpu_unread(self, g: _Guest, why: str) -> None:
        if g.cpu_warned != why:
            g.cpu_warned = why
            log.info("%s; its own CPU accounting is not read", why)

    def _file(self, g: _Guest, path: str, deadline: float) -> str:
        """One file's text: open, read to eof (bounded), close whatever happened in between."""
        try:
            handle = self._call(g, deadline, "guest-file-open", {"path": path, "mode": "r"})
        except AgentError as exc:
            if exc.kind == "command" and path == self._paths[1] and "No such file" in str(exc):
                raise _NoFile(path) from None
            raise
        if not isinstance(handle, int) or isinstance(handle, bool):
            raise AgentError("protocol", f"guest {g.name}: guest-file-open {path}: no handle in reply")
        data = bytearray()
        try:
            while True:
                reply = self._call(g, deadline, "guest-file-read", {"handle": handle, "count": self.limits.chunk_bytes})
                data += _chunk(g.name, path, reply)
                if len(data) > self.limits.max_file_bytes:
                    raise AgentError("protocol", f"guest {g.name}: {path}: over {self.limits.max_file_bytes} bytes")
                if reply.get("eof") is True:
                    break
        finally:
            self._close_file(g, path, handle)
        return data.decode("utf-8", "replace")

    def _close_file(self, g: _Guest, path: str, handle: int) -> None:
        """Always, even past the read's deadline: a handle left open stays open in qemu-ga."""
        try:
            self._channel(g).command("guest-file-close", {"handle": handle}, self.limits.call_timeout_s)
        except (AgentError, _ReadFailed) as exc:
            log.debug("guest %s: guest-file-close %s: %s", g.name, path, exc)


class _NoFile(Exception):
    pass


def _chunk(name: str, path: str, reply: Any) -> bytes:
    if not isinstance(reply, dict) or not isinstance(reply.get("buf-b64"), str):
        raise AgentError("protocol", f"guest {name}: guest-file-read {path}: no buf-b64 in reply")
    try:
        return base64.b64decode(reply["buf-b64"], validate=True)
    except (binascii.Error, ValueError):
        raise AgentError("protocol", f"guest {name}: guest-file-read {path}: buf-b64 is not base64") from None
