"""Guests found from the host's QEMU processes (procfs), for hosts without a libvirt the agent
can reach: Proxmox VE (`qm` starts QEMU itself), KubeVirt (one libvirtd per virt-launcher pod),
QEMU started from scripts.

Each /proc/<pid>/cmdline is NUL-separated argv. From it: the guest's name (`-name guest=NAME,...`
as libvirt writes it, `-name NAME,debug-threads=on` as Proxmox does, or a bare `-name NAME`), its
UUID (`-uuid`, or Proxmox's `-smbios type=1,uuid=...`), the VFs passed through (`-device
vfio-pci,host=BDF,...` or the JSON form current libvirt writes,
`-device {"driver":"vfio-pci","host":"0000:03:10.0",...}`; `host=03:10.0` means domain 0000),
and its guest-agent socket (`-chardev socket,id=ID,path=...` wired by a virtserialport named
org.qemu.guest_agent.0). QEMU's option syntax doubles a comma inside a value (`name=a,,b` is
"a,b"). Everything is parsed from bytes: a process that is not QEMU, or
a command line that is not what it claims, yields nothing, never an exception.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from vftune.model import Guest

log = logging.getLogger("vftune.host")

GUEST_AGENT_PORT = "org.qemu.guest_agent.0"
# Executables that are QEMU system emulators: Debian's and Proxmox's kvm wrapper, RHEL's
# qemu-kvm (KubeVirt's virt-launcher image), qemu-system-<arch>.
_QEMU_NAME = re.compile(r"^(kvm|qemu-kvm|qemu-system-[a-z0-9_]+)$")
_BDF = re.compile(r"^(?:([0-9a-fA-F]{4,5}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
MAX_CMDLINE = 1 << 20  # bytes read of one command line (Linux caps argv at a few MB; QEMU's are KBs)


@dataclass(frozen=True)
class QemuGuest:
    """One QEMU process as its command line describes it."""

    pid: int
    name: str
    uuid: str  # "" when the command line gives none
    vfs: tuple[str, ...]  # PCI addresses of the vfio-pci devices, 0000:03:10.0
    agent_socket: str | None  # the guest agent's UNIX socket, when wired

    def guest(self) -> Guest:
        return Guest(name=self.name, uuid=self.uuid, pid=self.pid)


def split_options(value: str) -> list[tuple[str, str | None]]:
    """QEMU's `key=value,key2=value2` (a bare first word is (word, None)); `,,` is a comma."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == ",":
            if value[i + 1:i + 2] == ",":
                current.append(",")
                i += 2
                continue
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    out: list[tuple[str, str | None]] = []
    for part in parts:
        key, sep, val = part.partition("=")
        out.append((key, val if sep else None))
    return out


def normalize_bdf(text: str) -> str | None:
    """0000:03:10.0 from a full or short (03:10.0) address; None when it is not one."""
    m = _BDF.match(text.strip())
    if m is None:
        return None
    domain = m.group(1) or "0000"
    return f"{domain.lower()}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def _device(value: str) -> dict[str, str]:
    """A -device argument as a flat dict: the JSON form, or QEMU's key=value form (first word: driver)."""
    text = value.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return {}
        if not isinstance(parsed, dict):
            return {}
        return {str(k): str(v) for k, v in parsed.items() if isinstance(v, str | int | bool)}
    opts = split_options(text)
    out: dict[str, str] = {}
    for i, (key, val) in enumerate(opts):
        if val is None and i == 0:
            out["driver"] = key
        elif val is not None:
            out[key] = val
    return out


def _name(value: str) -> str | None:
    """-name: `guest=NAME,...` (libvirt), `NAME,debug-threads=on` (Proxmox) or `NAME`."""
    opts = split_options(value)
    for key, val in opts:
        if key == "guest" and val is not None:
            return val or None
    first, val = opts[0]
    return first if val is None and first else None


def parse_cmdline(pid: int, raw: bytes) -> QemuGuest | None:
    """The guest a QEMU process runs, from its /proc/<pid>/cmdline bytes; None when it is not a
    QEMU system emulator with a name."""
    argv = [a.decode("utf-8", "replace") for a in raw[:MAX_CMDLINE].split(b"\0")]
    while argv and argv[-1] == "":
        argv.pop()
    if not argv or not _QEMU_NAME.match(os.path.basename(argv[0])):
        return None
    name: str | None = None
    uuid = ""
    vfs: list[str] = []
    sockets: dict[str, str] = {}  # chardev id -> socket path
    agent_chardev: str | None = None
    for option, value in _pairs(argv[1:]):
        if option == "name":
            name = _name(value) or name
        elif option == "uuid" and _UUID.match(value.strip()):
            uuid = value.strip().lower()
        elif option == "smbios" and not uuid:
            # Proxmox gives no -uuid: its VM's uuid is the SMBIOS system uuid, -smbios type=1,uuid=...
            fields = {k: v for k, v in split_options(value) if v is not None}
            if fields.get("type") == "1" and _UUID.match(fields.get("uuid", "")):
                uuid = fields["uuid"].lower()
        elif option == "chardev":
            opts = split_options(value)
            fields = {k: v for k, v in opts if v is not None}
            if opts and opts[0] == ("socket", None) and "id" in fields and "path" in fields:
                sockets[fields["id"]] = fields["path"]
            elif value.strip().startswith("{"):
                dev = _device(value)
                if dev.get("backend") == "socket" and "id" in dev and "path" in dev:
                    sockets[dev["id"]] = dev["path"]
        elif option == "device":
            dev = _device(value)
            if dev.get("driver") == "vfio-pci" and "host" in dev:
                bdf = normalize_bdf(dev["host"])
                if bdf is not None and bdf not in vfs:
                    vfs.append(bdf)
            elif dev.get("driver") == "virtserialport" and dev.get("name") == GUEST_AGENT_PORT:
                agent_chardev = dev.get("chardev")
    if not name:
        return None
    socket_path = sockets.get(agent_chardev) if agent_chardev else None
    return QemuGuest(pid=pid, name=name, uuid=uuid, vfs=tuple(vfs), agent_socket=socket_path)


def _pairs(args: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(option, value) for each `-option value` (or `--option value`) in argv. An option followed
    by another is a flag (-daemonize, -S, -enable-kvm, -nodefaults): it takes no value."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            yield arg.lstrip("-"), args[i + 1]
            i += 2
        else:
            i += 1


@dataclass(frozen=True)
class QemuScan:
    guests: tuple[QemuGuest, ...]
    errors: tuple[str, ...] = ()

    @property
    def by_pci(self) -> dict[str, Guest]:
        return {vf: g.guest() for g in self.guests for vf in g.vfs}

    def agent_socket(self, guest_name: str) -> str | None:
        return next((g.agent_socket for g in self.guests if g.name == guest_name and g.agent_socket), None)

    @property
    def pids(self) -> frozenset[int]:
        return frozenset(g.pid for g in self.guests)


def scan_processes(procfs_root: Path) -> QemuScan:
    """Every QEMU process under procfs_root (/proc, or a fixture tree)."""
    guests: list[QemuGuest] = []
    errors: list[str] = []
    try:
        entries = sorted(int(e.name) for e in os.scandir(procfs_root) if e.name.isdigit())
    except OSError as exc:
        return QemuScan((), (f"{procfs_root}: cannot list processes: {exc.strerror}",))
    for pid in entries:
        try:
            with open(procfs_root / str(pid) / "cmdline", "rb") as fh:
                raw = fh.read(MAX_CMDLINE)
        except OSError:
            continue  # gone meanwhile, or a kernel thread
        guest = parse_cmdline(pid, raw)
        if guest is not None:
            guests.append(guest)
    claimed: dict[str, str] = {}
    for g in guests:
        for vf in g.vfs:
            if vf in claimed and claimed[vf] != g.name:
                errors.append(f"VF {vf} is on the command lines of both {claimed[vf]} and {g.name}")
            claimed.setdefault(vf, g.name)
    return QemuScan(tuple(guests), tuple(errors))
