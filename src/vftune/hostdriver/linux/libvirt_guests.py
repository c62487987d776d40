"""Which guest holds which VF, kept current from libvirt without ever blocking the sampler.

A worker thread owns the libvirt connection: it loads every running domain's XML, follows
lifecycle events (virEventRegisterDefaultImpl + domainEventRegisterAny) and reconnects with
exponential backoff when libvirtd goes away. Readers only take the last published view.
libvirt-python is imported lazily so that the simulator never needs it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from vftune.hostdriver.base import HostError
from vftune.model import Guest

log = logging.getLogger("vftune.linux.libvirt")

MISSING_LIBVIRT = "libvirt-python is not installed: install it (vftune[libvirt] extra) to see which guest owns each VF"


def import_libvirt() -> ModuleType:
    try:
        import libvirt
    except ImportError:
        raise HostError(MISSING_LIBVIRT) from None
    # libvirt prints every error to stderr by default; ours are logged once, with context.
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    return cast(ModuleType, libvirt)


def hostdev_addresses(domain_xml: str) -> list[str]:
    """PCI addresses of the VFs a domain holds: <interface type='hostdev'> and PCI <hostdev> sources."""
    try:
        root = ET.fromstring(domain_xml)
    except (ET.ParseError, ValueError) as exc:  # ValueError: text that is not encodable (lone surrogates)
        raise HostError(f"malformed domain XML: {exc}") from None
    sources = root.findall("./devices/interface[@type='hostdev']/source/address") + root.findall(
        "./devices/hostdev[@mode='subsystem'][@type='pci']/source/address"
    )
    found = []
    for addr in sources:
        if addr.get("type", "pci") != "pci":
            continue
        try:
            dom, bus, slot, fn = (int(addr.get(k, "0"), 0) for k in ("domain", "bus", "slot", "function"))
        except ValueError:
            raise HostError(f"bad PCI address in domain XML: {ET.tostring(addr, encoding='unicode').strip()}") from None
        found.append(f"{dom:04x}:{bus:02x}:{slot:02x}.{fn:x}")
    return found


def find_qemu_pid(name: str, uuid: str, procfs_root: Path, run_root: Path) -> int | None:
    """libvirt's pid file first; else the process started with `-uuid <uuid>`."""
    pid_file = run_root / "libvirt" / "qemu" / f"{name}.pid"
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        pass
    needle = b"\0-uuid\0" + uuid.encode() + b"\0"
    try:
        entries = os.listdir(procfs_root)
    except OSError:
        return None
    for entry in entries:
        if not (entry.isascii() and entry.isdigit()):
            continue
        try:
            cmdline = (procfs_root / entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in b"\0" + cmdline:
            return int(entry)
    return None


@dataclass(frozen=True)
class DomainRecord:
    name: str
    uuid: str
    xml: str


@dataclass(frozen=True)
class GuestView:
    by_pci: dict[str, Guest] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    generation: int = 0
    connected: bool = False


def guests_from_domains(
    domains: Iterable[DomainRecord], pid_of: Callable[[str, str], int | None]
) -> tuple[dict[str, Guest], list[str]]:
    """Map VF PCI address -> guest; a domain whose XML cannot be read is reported and skipped."""
    by_pci: dict[str, Guest] = {}
    errors: list[str] = []
    for d in domains:
        try:
            addrs = hostdev_addresses(d.xml)
        except HostError as exc:
            errors.append(f"domain {d.name}: {exc}")
            continue
        guest = Guest(name=d.name, uuid=d.uuid, pid=pid_of(d.name, d.uuid))
        for pci in addrs:
            by_pci[pci] = guest
    return by_pci, errors


class Backoff:
    """Reconnect delays: initial, doubled after each failure up to a ceiling; reset on success."""

    def __init__(self, initial: float = 1.0, ceiling: float = 60.0) -> None:
        self.initial, self.ceiling = initial, ceiling
        self._next = initial

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self.ceiling, self._next * 2)
        return delay

    def reset(self) -> None:
        self._next = self.initial


_loop_lock = threading.Lock()
_loop_started = False


def _ensure_event_loop(libvirt: ModuleType) -> None:
    """One default event loop per process, run by a daemon thread; it must exist before connections open."""
    global _loop_started
    with _loop_lock:
        if _loop_started:
            return
        libvirt.virEventRegisterDefaultImpl()

        def run() -> None:
            while True:
                if libvirt.virEventRunDefaultImpl() < 0:
                    log.warning("libvirt event loop iteration failed")

        threading.Thread(target=run, name="vftune-libvirt-events", daemon=True).start()
        _loop_started = True


class GuestDirectory:
    def __init__(
        self,
        uri: str,
        procfs_root: Path,
        run_root: Path = Path("/run"),
        on_change: Callable[[GuestView], None] | None = None,
        backoff: Backoff | None = None,
        open_connection: Callable[[str], Any] | None = None,
    ) -> None:
        self.uri = uri
        self.procfs_root = procfs_root
        self.run_root = run_root
        self.on_change = on_change
        self._backoff = backoff or Backoff()
        self._open = open_connection
        self._view = GuestView()
        self._first_load = threading.Event()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._dirty = False
        self._lost = False
        self._conn: Any = None
        self._thread: threading.Thread | None = None
        self._libvirt: ModuleType | None = None
        self._missing = False
        self.connects = 0

    # -- readers (never block) ---------------------------------------------

    def view(self) -> GuestView:
        return self._view

    def connection(self) -> Any:
        """The live connection (tests use it to start and stop domains)."""
        return self._conn

    # -- lifecycle ------------------------------------------------------------

    def start(self, wait_s: float = 5.0) -> GuestView:
        """Start the worker and wait (bounded) for the first load or the first failure."""
        if self._thread is None:
            if self._missing:  # libvirt-python is not installed: said once, and it stays so
                return self._view
            try:
                self._libvirt = import_libvirt()
            except HostError as exc:
                # Published once: every inventory calls start(), and each publication asks the
                # agent for another inventory.
                self._missing = True
                self._publish({}, [str(exc)], connected=False)
                self._first_load.set()
                return self._view
            _ensure_event_loop(self._libvirt)
            self._thread = threading.Thread(target=self._run, name="vftune-libvirt", daemon=True)
            self._thread.start()
        self._first_load.wait(wait_s)
        return self._view

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    # -- worker ---------------------------------------------------------------

    def _publish(self, by_pci: dict[str, Guest], errors: list[str], connected: bool) -> None:
        self._view = GuestView(by_pci, tuple(errors), self._view.generation + 1, connected)
        if self.on_change is not None:
            try:
                self.on_change(self._view)
            except Exception:  # a reader's bug must not kill the libvirt thread
                log.exception("guest view observer failed")

    def _run(self) -> None:
        libvirt = self._libvirt
        assert libvirt is not None
        opener = self._open or libvirt.open
        while not self._stop.is_set():
            try:
                conn = opener(self.uri)
            except libvirt.libvirtError as exc:
                delay = self._backoff.next_delay()
                msg = f"libvirt {self.uri}: {exc.get_error_message() or exc}; retrying in {delay:g} s"
                log.warning("%s", msg)
                self._publish(self._view.by_pci, [msg], connected=False)
                self._first_load.set()
                self._wake.wait(delay)
                self._wake.clear()
                continue
            self._backoff.reset()
            self.connects += 1
            self._serve(libvirt, conn)

    def _serve(self, libvirt: ModuleType, conn: Any) -> None:
        self._conn, self._lost, self._dirty = conn, False, False

        def on_close(_conn: Any, reason: int, _opaque: Any) -> None:
            self._lost = True
            self._wake.set()

        def on_lifecycle(_conn: Any, dom: Any, event: int, detail: int, _opaque: Any) -> None:
            self._dirty = True
            self._wake.set()

        callback_id = None
        try:
            # Drivers without a close callback (test://) cannot go away.
            with contextlib.suppress(libvirt.libvirtError):
                conn.registerCloseCallback(on_close, None)
            callback_id = conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, on_lifecycle, None)
            self._reload(libvirt, conn)
            while not self._stop.is_set() and not self._lost:
                self._wake.wait()
                self._wake.clear()
                if self._dirty and not self._lost:
                    self._dirty = False
                    self._reload(libvirt, conn)
        except libvirt.libvirtError as exc:
            self._lost = True
            log.warning("libvirt %s: %s; reconnecting", self.uri, exc.get_error_message() or exc)
        finally:
            self._conn = None
            for undo in (
                (lambda: conn.domainEventDeregisterAny(callback_id)) if callback_id is not None else None,
                conn.unregisterCloseCallback,
                conn.close,
            ):
                if undo is None:
                    continue
                with contextlib.suppress(libvirt.libvirtError):
                    undo()
        if self._lost and not self._stop.is_set():
            self._publish(self._view.by_pci, [f"libvirt {self.uri}: connection lost; reconnecting"], connected=False)
            self._wake.wait(self._backoff.next_delay())
            self._wake.clear()

    def _reload(self, libvirt: ModuleType, conn: Any) -> None:
        records = []
        errors = []
        for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            try:
                records.append(DomainRecord(dom.name(), dom.UUIDString(), dom.XMLDesc(0)))
            except libvirt.libvirtError as exc:  # the domain stopped while we listed it
                errors.append(f"domain: {exc.get_error_message() or exc}")
        by_pci, parse_errors = guests_from_domains(
            records, lambda name, uuid: find_qemu_pid(name, uuid, self.procfs_root, self.run_root)
        )
        for err in parse_errors:
            log.warning("%s", err)
        self._publish(by_pci, errors + parse_errors, connected=True)
        self._first_load.set()
