"""GuestAgentActuator: a VF's interrupt moderation set inside its guest, never on the tick.

Threads: one worker per guest does every agent call for that guest's VFs. The caller (the
agent's tick) only takes a lock for a few dictionary operations: submit() records the latest
wanted value per VF (a newer request replaces one not yet started), collect() drains finished
results, status() reads the last known state. A hung agent therefore costs its own worker
(bounded by Limits.call_timeout_s per call and Limits.job_deadline_s per job) and its VFs'
writes, never the loop. restore() is the one blocking call, for stop and start-up, bounded by
its own deadline.

A job for a VF: find the interface whose hardware address is the VF's MAC (every job, so guest
restarts and renames are followed), `ethtool -c` it, hand the guest's own setting to the journal
callback before the first write, `ethtool -C`, and `ethtool -c` again; the result is what the
guest reports. A failure backs the VF off exponentially (Limits.backoff_*): submit() refuses it
until then, and the worker re-checks it once the time has come. Jobs on one guest start at
least Limits.guest_min_interval_s apart (restores excepted).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.guest_agent.ethtool_text import (
    RX_USECS_MAX,
    Coalesce,
    Unparsable,
    parse_coalesce,
    restore_args,
    set_args,
)
from vftune.hostdriver.linux.guest_agent.protocol import (
    AgentChannel,
    AgentError,
    LibvirtChannel,
    UnixSocketChannel,
    guest_exec,
    hardware_addresses,
    not_allowed,
)
from vftune.hostdriver.linux.guest_agent.threads import stop_guest_threads
from vftune.model import Applied

log = logging.getLogger("vftune.linux.guest_agent")

ActuatorKind = Literal["guest-agent", "none"]
_MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")
SETTING = "rx_usecs"
ETHTOOL = "ethtool"  # found on the guest agent's PATH
# What a job needs from the agent; guests may disable any of them (RHEL's qemu-ga blocks guest-exec by default).
REQUIRED_COMMANDS = ("guest-network-get-interfaces", "guest-exec", "guest-exec-status")


@dataclass(frozen=True)
class GuestVf:
    """A VF as the host knows it: PCI address, the guest that holds it, its MAC (IFLA_VF_MAC)."""

    pci: str
    guest: str
    mac: str


@dataclass(frozen=True)
class Limits:
    call_timeout_s: float = 3.0  # one agent command
    job_deadline_s: float = 10.0  # one job: find, read, write, read back
    guest_min_interval_s: float = 1.0  # between job starts on one guest
    backoff_initial_s: float = 10.0  # after a VF's first failure; doubled per failure
    backoff_max_s: float = 600.0
    reverify_s: float = 60.0  # a value read back longer ago is written (and so re-read) again


@dataclass(frozen=True)
class Submitted:
    accepted: bool
    reason: str


@dataclass(frozen=True)
class VfAgentStatus:
    # "guest-agent": the agent answers, allows guest-exec, one interface has the VF's MAC and its
    # coalescing could be read; "none" otherwise (reason says which part failed).
    actuator: ActuatorKind
    reason: str  # one line: why, for `vftune status` and /v1/vfs
    ifname: str | None  # the interface inside the guest, as last found
    original: Coalesce | None  # the guest's own setting before vftune's first write
    current: Coalesce | None  # what the guest last reported
    retry_in_s: float  # seconds until a write is accepted again (0: now)


@dataclass(frozen=True)
class RestoreEntry:
    """From the journal: put `original` back; `expect` is the rx-usecs vftune last saw applied
    (None: put `original` back whatever the guest has now)."""

    vf: GuestVf
    original: Coalesce
    expect: int | None = None


JournalHook = Callable[[GuestVf, str, Coalesce], None]


def socket_connector(path_for: Callable[[str], str | Path]) -> Callable[[str], AgentChannel]:
    """Guests reached on UNIX sockets: `path_for(guest name)` is the agent's socket."""
    return lambda guest: UnixSocketChannel(path_for(guest), guest)


def libvirt_connector(connection: Callable[[], Any]) -> Callable[[str], AgentChannel]:
    """Guests reached through libvirt's qemuAgentCommand. `connection()` gives the current
    virConnect or None (GuestDirectory.connection: it changes when libvirtd restarts)."""
    import libvirt

    def connect(guest: str) -> AgentChannel:
        conn = connection()
        if conn is None:
            raise AgentError("absent", f"guest {guest}: libvirt is not connected")
        try:
            return LibvirtChannel(conn.lookupByName(guest), guest)
        except libvirt.libvirtError as exc:
            raise AgentError("absent", f"guest {guest}: {exc.get_error_message() or exc}") from None
    return connect


@dataclass
class _VfState:
    vf: GuestVf
    actuator: ActuatorKind = "none"
    reason: str = "guest agent not checked yet"
    ifname: str | None = None
    original: Coalesce | None = None
    current: Coalesce | None = None
    current_at: float = 0.0
    failures: int = 0  # consecutive failed jobs since the last good write
    last_error: str | None = None
    retry_at: float = 0.0
    needs_check: bool = True
    pending: int | None = None
    pending_since: float = 0.0


@dataclass
class _Restore:
    entry: RestoreEntry
    result: Applied | None = None


@dataclass
class _Guest:
    name: str
    thread: threading.Thread | None = None
    channel: AgentChannel | None = None
    next_start: float = 0.0
    busy_since: float | None = None
    restores: list[_Restore] = field(default_factory=list)
    closed: bool = False


class _JobFailed(Exception):
    pass


class GuestAgentActuator:
    """Sets VFs' rx-usecs inside their guests through the QEMU guest agent (see module doc).

    connect(guest name) -> AgentChannel is called on the guest's worker thread.
    journal(vf, ifname, original) is called on a worker thread before the first write to a
    VF since attach(); if it raises, nothing is written and the job fails with its message.
    """

    def __init__(
        self,
        connect: Callable[[str], AgentChannel],
        *,
        journal: JournalHook | None = None,
        limits: Limits = Limits(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """clock paces rate limits, backoff and re-verification; deadlines are always real time."""
        self._connect = connect
        self._journal = journal
        self.limits = limits
        self._clock = clock
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._vfs: dict[str, _VfState] = {}
        self._guests: dict[str, _Guest] = {}
        self._results: list[Applied] = []

    # -- the tick's side: never blocks on a guest ---------------------------------------------

    def attach(self, vf: GuestVf) -> None:
        """Track a VF (at inventory time). Its guest's worker checks the agent (guest-ping) and
        finds the interface in the background; status() tells the outcome. Attaching the same
        VF again re-checks it; a new guest or MAC for a known PCI address starts afresh, so the
        caller must restore or drop the old owner's journal entry first."""
        with self._cond:
            state = self._vfs.get(vf.pci)
            if state is None or state.vf != vf:
                self._vfs[vf.pci] = _VfState(vf)
            else:  # the guest may have restarted: nothing it reported before is trusted
                state.needs_check, state.retry_at, state.current = True, 0.0, None
            self._worker(vf.guest)
            self._cond.notify_all()

    def detach(self, vf_pci: str) -> None:
        """Forget a VF (owner gone or changed). Nothing is restored: the guest that had it is
        stopped, or restore() was called first. A guest left without VFs loses its worker."""
        with self._cond:
            state = self._vfs.pop(vf_pci, None)
            if state is not None:
                self._retire_if_idle(state.vf.guest)

    def submit(self, vf_pci: str, rx_usecs: int) -> Submitted:
        """Ask for rx-usecs (0 no throttling, 1 adaptive, >1 static us). Never blocks; the
        outcome comes from collect(). Refused while the VF backs off after a failure."""
        if not 0 <= rx_usecs <= RX_USECS_MAX:
            return Submitted(False, f"rx-usecs {rx_usecs} out of range 0..{RX_USECS_MAX}")
        with self._cond:
            state = self._vfs.get(vf_pci)
            if state is None:
                return Submitted(False, f"{vf_pci}: not attached to the guest-agent actuator")
            now = self._clock()
            if state.retry_at > now:
                return Submitted(False, f"{vf_pci}: backing off for {state.retry_at - now:.0f} s after: {state.last_error}")
            if state.pending is None and state.failures == 0 and state.current is not None \
                    and state.current.effective_rx_usecs == rx_usecs and now - state.current_at < self.limits.reverify_s:
                return Submitted(True, f"{vf_pci}: already rx-usecs {rx_usecs}")
            replaced = state.pending
            if replaced is None:
                state.pending_since = now
            state.pending = rx_usecs
            g = self._worker(state.vf.guest)
            self._cond.notify_all()
            busy = f"; the guest's worker is busy for {now - g.busy_since:.0f} s" if g.busy_since is not None else ""
            if replaced is not None and replaced != rx_usecs:
                return Submitted(True, f"{vf_pci}: queued, replacing rx-usecs {replaced} not yet sent{busy}")
            return Submitted(True, f"{vf_pci}: queued{busy}")

    def collect(self) -> list[Applied]:
        """Results finished since the last call (setting "rx_usecs"; old/applied are what the
        guest reported before and after, as rx-usecs with 1 for adaptive)."""
        with self._cond:
            out, self._results = self._results, []
        return out

    def status(self, vf_pci: str) -> VfAgentStatus | None:
        with self._cond:
            s = self._vfs.get(vf_pci)
            if s is None:
                return None
            return VfAgentStatus(s.actuator, s.reason, s.ifname, s.original, s.current,
                                 max(0.0, s.retry_at - self._clock()))

    # -- blocking, for stop and start-up -------------------------------------------------------

    def restore(self, entries: Sequence[RestoreEntry], deadline_s: float) -> list[Applied]:
        """Put each entry's original back, all guests in parallel, ignoring rate limits and
        backoff; returns within deadline_s with one Applied per entry (a guest that did not
        finish in time gets a failed one). A guest whose interface reads neither `expect` nor
        the original was changed by someone else since: it is left alone (ok, applied = what
        it has). Writes still queued for these VFs are dropped; attached VFs' journals are
        cleared, so a later write journals afresh. Call it before close()."""
        slots = [_Restore(e) for e in entries]
        end = time.monotonic() + deadline_s
        with self._cond:
            for slot in slots:
                state = self._vfs.get(slot.entry.vf.pci)
                if state is not None:
                    state.pending = None  # a write queued before stop must not land after the restore
                self._worker(slot.entry.vf.guest).restores.append(slot)
            self._cond.notify_all()
            while any(s.result is None for s in slots):
                left = end - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    break
                self._cond.wait(left)
            results = []
            for s in slots:
                if s.result is None:
                    g = self._guests.get(s.entry.vf.guest)
                    if g is not None and s in g.restores:
                        g.restores.remove(s)
                    s.result = _failed(s.entry.vf, s.entry.original.effective_rx_usecs, None,
                                       f"guest {s.entry.vf.guest}: restore did not finish within {deadline_s:g} s")
                results.append(s.result)
            for name in {s.entry.vf.guest for s in slots}:
                self._retire_if_idle(name)
        return results

    def _retire_if_idle(self, guest: str) -> None:
        """A guest with no VFs and no restores left needs no worker (caller holds the lock)."""
        g = self._guests.get(guest)
        if g is not None and not g.restores and not any(s.vf.guest == guest for s in self._vfs.values()):
            g.closed = True
            del self._guests[guest]
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the workers (each finishes or times out its current call) and close channels."""
        stop_guest_threads(self._stop, self._cond, self._guests, self.limits.call_timeout_s + 1.0)

    # -- workers ---------------------------------------------------------------------------------

    def _worker(self, guest: str) -> _Guest:
        """The guest's worker, started on first need (caller holds the lock)."""
        g = self._guests.get(guest)
        if g is None:
            g = self._guests[guest] = _Guest(guest)
            g.thread = threading.Thread(target=self._run, args=(g,), name=f"vftune-qga-{guest}", daemon=True)
            g.thread.start()
        return g

    def _next_job(self, g: _Guest) -> tuple[object | None, float | None]:
        """(job, None) or (None, seconds to wait; None = until notified). Caller holds the lock."""
        if g.restores:
            return g.restores[0], None
        now = self._clock()
        if now < g.next_start:
            return None, g.next_start - now
        mine = [s for s in self._vfs.values() if s.vf.guest == g.name]
        wanted = [s for s in mine if s.pending is not None or s.needs_check]
        ready = [s for s in wanted if s.retry_at <= now]
        if ready:
            return min(ready, key=lambda s: (s.pending is None, s.pending_since)), None
        waits = [s.retry_at - now for s in wanted]
        return None, min(waits) if waits else None

    def _run(self, g: _Guest) -> None:
        try:
            while True:
                with self._cond:
                    while True:
                        if g.closed or self._stop.is_set():
                            return
                        job, wait_s = self._next_job(g)
                        if job is not None:
                            break
                        self._cond.wait(wait_s)
                    g.busy_since = self._clock()
                    task: Callable[[], Applied | None]
                    wanted: int | None
                    if isinstance(job, _Restore):
                        g.restores.pop(0)
                        task = partial(self._do_restore, g, job.entry)
                        vf, wanted = job.entry.vf, job.entry.original.effective_rx_usecs
                    else:
                        assert isinstance(job, _VfState)
                        g.next_start = g.busy_since + self.limits.guest_min_interval_s
                        vf, wanted = job.vf, job.pending
                        task = partial(self._do_job, g, vf, wanted, job.original)
                        job.pending, job.needs_check = None, False
                try:
                    result = task()
                except Exception as exc:  # a bug costs one job, not the guest's worker
                    log.exception("guest %s: %s: guest-agent job failed", g.name, vf.pci)
                    g.channel, closing = None, g.channel
                    if closing is not None:
                        closing.close()
                    error = f"guest {g.name}: internal error: {type(exc).__name__}: {exc}"
                    if not isinstance(job, _Restore):
                        self._settle(vf, error, usable=False, wrote=wanted is not None, ifname=None)
                    result = None if wanted is None else _failed(vf, wanted, None, error)
                with self._cond:
                    g.busy_since = None
                    if isinstance(job, _Restore):
                        job.result = result
                    elif result is not None and self._vfs.get(vf.pci) is job:
                        self._results.append(result)
                    self._cond.notify_all()
        finally:
            if g.channel is not None:
                g.channel.close()

    def _channel(self, g: _Guest) -> AgentChannel:
        if g.channel is None:
            try:
                g.channel = self._connect(g.name)
            except HostError as exc:
                raise AgentError("absent", str(exc)) from None
        return g.channel

    def _call(self, g: _Guest, deadline: float, execute: str, arguments: dict[str, Any] | None = None) -> Any:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AgentError("timeout", f"guest {g.name}: {execute}: job deadline passed")
        return self._channel(g).command(execute, arguments, min(self.limits.call_timeout_s, left))

    @staticmethod
    def _drop_channel(g: _Guest, exc: Exception) -> None:
        """After "absent" or "timeout" the next job connects afresh (libvirt: maybe a new domain)."""
        if isinstance(exc, AgentError) and exc.kind in ("absent", "timeout") and g.channel is not None:
            g.channel.close()
            g.channel = None

    def _check_agent(self, g: _Guest, deadline: float) -> None:
        """guest-info answers like guest-ping and also lists the commands the guest allows."""
        refusal = not_allowed(self._call(g, deadline, "guest-info"), REQUIRED_COMMANDS)
        if refusal is not None:
            raise _JobFailed(f"guest {g.name}: {refusal}")

    def _find(self, g: _Guest, vf: GuestVf, deadline: float) -> str:
        if not _MAC.fullmatch(vf.mac) or vf.mac.replace(":", "").strip("0") == "":
            # An all-zero VF MAC would match the guest's loopback; the VF's own is random then.
            raise _JobFailed(f"{vf.pci}: the PF reports no usable MAC for this VF ({vf.mac!r}); give it one "
                             "(libvirt <interface type='hostdev'> with <mac>, or ip link set PF vf N mac) so its "
                             "interface in the guest can be found")
        left = deadline - time.monotonic()
        macs = hardware_addresses(self._channel(g), max(0.001, min(self.limits.call_timeout_s, left)))
        wanted = vf.mac.lower()
        names = sorted(n for n, mac in macs.items() if mac == wanted)
        if len(names) == 1:
            return names[0]
        if not names:
            seen = ", ".join(sorted(macs)) or "none"
            raise _JobFailed(f"guest {g.name}: no interface has the VF's MAC {vf.mac} (interfaces: {seen})")
        # VLANs and bonds share the VF's MAC; only the VF itself has it as its permanent address.
        own = [n for n in names if wanted in self._exec(g, ["-P", n], deadline).stdout.lower()]
        if len(own) == 1:
            return own[0]
        raise _JobFailed(f"guest {g.name}: the VF's MAC {vf.mac} is on {', '.join(names)} and the permanent "
                         "address does not tell which is the VF")

    def _exec(self, g: _Guest, args: list[str], deadline: float) -> Any:
        return guest_exec(self._channel(g), ETHTOOL, args, deadline, call_timeout_s=self.limits.call_timeout_s,
                          wait=self._stop.wait)

    def _read(self, g: _Guest, ifname: str, deadline: float) -> Coalesce:
        res = self._exec(g, ["-c", ifname], deadline)
        if res.exitcode != 0:
            raise _JobFailed(f"guest {g.name}: ethtool -c {ifname}: {res.failure()}")
        parsed = parse_coalesce(res.stdout)
        if isinstance(parsed, Unparsable):
            raise _JobFailed(f"guest {g.name}: ethtool -c {ifname}: {parsed.reason}")
        return parsed

    def _write(self, g: _Guest, args: list[str], deadline: float) -> None:
        res = self._exec(g, args, deadline)
        if not res.ok:
            raise _JobFailed(f"guest {g.name}: ethtool {' '.join(args)}: {res.failure()}")

    def _do_job(self, g: _Guest, vf: GuestVf, wanted: int | None, original: Coalesce | None) -> Applied | None:
        """A check (wanted None: does the agent answer and allow what a write needs, which
        interface has the MAC) or a write. Runs without the lock."""
        deadline = time.monotonic() + self.limits.job_deadline_s
        ifname: str | None = None
        before: Coalesce | None = None
        try:
            if wanted is None:
                self._check_agent(g, deadline)
            ifname = self._find(g, vf, deadline)
            if wanted is None:
                self._settle(vf, None, usable=True, wrote=False, ifname=ifname,
                             reason=f"guest agent answers; MAC {vf.mac} is {ifname} in the guest")
                return None
            before = self._read(g, ifname, deadline)
            if original is None:
                if self._journal is not None:
                    try:
                        self._journal(vf, ifname, before)
                    except Exception as exc:  # whatever stopped the journal must stop the write too
                        raise _JobFailed(f"{vf.pci}: journal: {exc}") from None
                self._remember_original(vf, before)
            args = set_args(ifname, before, wanted)
            if args is not None:
                self._write(g, args, deadline)
            after = self._read(g, ifname, deadline) if args is not None else before
        except (AgentError, _JobFailed) as exc:
            self._drop_channel(g, exc)
            log.warning("%s", exc)
            # Usable: the agent answered, the interface was found and its coalescing read.
            self._settle(vf, str(exc), usable=before is not None, wrote=wanted is not None, ifname=ifname,
                         current=before)
            if wanted is None:
                return None
            return _failed(vf, wanted, before.effective_rx_usecs if before else None, str(exc))
        ok = after.effective_rx_usecs == wanted
        error = None if ok else f"guest {g.name}: {ifname} reads back {after.describe()} after rx-usecs {wanted}"
        self._settle(vf, error, usable=True, wrote=True, ifname=ifname, current=after,
                     reason=f"guest agent sets {ifname} in the guest (now {after.describe()})")
        return Applied(vf.pci, SETTING, wanted, before.effective_rx_usecs, after.effective_rx_usecs, ok, error)

    def _do_restore(self, g: _Guest, entry: RestoreEntry) -> Applied:
        vf, original = entry.vf, entry.original
        deadline = time.monotonic() + self.limits.job_deadline_s
        want = original.effective_rx_usecs
        before: Coalesce | None = None
        try:
            ifname = self._find(g, vf, deadline)
            before = self._read(g, ifname, deadline)
            now = before.effective_rx_usecs
            if entry.expect is not None and now not in (entry.expect, want):
                log.info("guest %s: %s reads rx-usecs %d, not the %d vftune set: left as it is", g.name, ifname,
                         now, entry.expect)
                after = before
            else:
                args = restore_args(ifname, before, original)
                if args is not None:
                    self._write(g, args, deadline)
                after = self._read(g, ifname, deadline) if args is not None else before
                if after != original:
                    raise _JobFailed(f"guest {g.name}: {ifname} reads back {after.describe()} after restoring "
                                     f"{original.describe()}")
        except (AgentError, _JobFailed) as exc:
            self._drop_channel(g, exc)
            log.warning("restore: %s", exc)
            return _failed(vf, want, before.effective_rx_usecs if before else None, str(exc))
        with self._cond:
            state = self._vfs.get(vf.pci)
            if state is not None and state.vf == vf:
                state.original, state.current, state.current_at = None, after, self._clock()
        return Applied(vf.pci, SETTING, want, before.effective_rx_usecs, after.effective_rx_usecs)

    def _remember_original(self, vf: GuestVf, original: Coalesce) -> None:
        with self._cond:
            state = self._vfs.get(vf.pci)
            if state is not None and state.vf == vf:
                state.original = original

    def _settle(self, vf: GuestVf, error: str | None, *, usable: bool, wrote: bool, ifname: str | None,
                current: Coalesce | None = None, reason: str = "") -> None:
        """Record a job's outcome. A failure backs the VF off (doubling per failure) and, when the
        agent or the interface was the problem, has it checked again once the backoff ends. Only
        a write that worked clears the count: a check that passes does not reset the doubling."""
        with self._cond:
            state = self._vfs.get(vf.pci)
            if state is None or state.vf != vf:
                return  # detached or re-owned while the job ran
            if ifname is not None:
                state.ifname = ifname
            if current is not None:
                state.current, state.current_at = current, self._clock()
            state.actuator = "guest-agent" if usable else "none"
            if error is None:
                state.reason = reason if not state.failures or wrote else f"{reason}; last failure: {state.last_error}"
                if wrote:
                    state.failures, state.retry_at, state.last_error = 0, 0.0, None
                return
            state.failures += 1
            state.last_error = error
            delay = min(self.limits.backoff_max_s, self.limits.backoff_initial_s * 2 ** (state.failures - 1))
            state.retry_at = self._clock() + delay
            state.needs_check = not usable
            state.reason = f"last write failed: {error}" if usable else error


def _failed(vf: GuestVf, requested: int, old: int | None, error: str) -> Applied:
    return Applied(vf.pci, SETTING, requested, old, None, ok=False, error=error)


