"""The QEMU guest agent protocol: one command in, one reply out, always within a deadline.

Two transports behind AgentChannel:
- UnixSocketChannel speaks the wire protocol itself (JSON objects, one a line) on the agent's
  UNIX socket: every command is preceded by 0xFF (which resets the agent's parser, in case
  an earlier client died mid-command) and guest-sync with a fresh random id; replies are
  skipped until one returns that id, so a reply left over from a call that timed out is never
  taken for the answer to the next one. Any error or timeout drops the connection.
- LibvirtChannel hands the command to libvirt_qemu.qemuAgentCommand on a virDomain; libvirt
  does its own guest-sync-delimited handshake and enforces the timeout (whole seconds).
Both raise AgentError with a kind a caller can act on: absent (no agent to talk to), timeout
(it did not answer in time), command (the agent answered with an error), protocol (garbage).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from vftune.hostdriver.base import HostError

AgentErrorKind = Literal["absent", "timeout", "command", "protocol"]
MAX_LINE_BYTES = 4 << 20  # guest-exec-status carries base64 output; qemu-ga caps capture at 16 MiB


class AgentError(HostError):
    """A guest-agent call that did not produce a result; the message is one line."""

    def __init__(self, kind: AgentErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class AgentChannel(Protocol):
    """One guest's agent. Thread-safe; every call returns or raises within `timeout_s`."""

    name: str  # for messages: the guest's name

    def command(self, execute: str, arguments: dict[str, Any] | None = None, timeout_s: float = 3.0) -> Any:
        """The "return" member of the reply; AgentError otherwise."""
        ...

    def close(self) -> None: ...


def _request(execute: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    return {"execute": execute, **({"arguments": arguments} if arguments else {})}


def _result(name: str, execute: str, reply: Any) -> Any:
    if not isinstance(reply, dict):
        raise AgentError("protocol", f"guest {name}: {execute}: reply is not a JSON object")
    if "error" in reply:
        err = reply["error"] if isinstance(reply["error"], dict) else {}
        desc = str(err.get("desc", reply["error"])).replace("\n", " ")
        raise AgentError("command", f"guest {name}: {execute}: {desc}")
    if "return" not in reply:
        raise AgentError("protocol", f"guest {name}: {execute}: reply has neither return nor error")
    return reply["return"]


class UnixSocketChannel:
    """The agent's UNIX socket (qemu-ga -m unix-listen, or a QEMU chardev socket on the host)."""

    def __init__(self, path: str | Path, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or str(path)
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._buf = b""

    def command(self, execute: str, arguments: dict[str, Any] | None = None, timeout_s: float = 3.0) -> Any:
        deadline = time.monotonic() + timeout_s
        # A caller waiting for the lock past its deadline gets a timeout, not a blocked thread.
        if not self._lock.acquire(timeout=max(0.0, timeout_s)):
            raise AgentError("timeout", f"guest {self.name}: {execute}: channel busy for {timeout_s:g} s")
        try:
            try:
                sock = self._connected(deadline, execute)
                sync_id = secrets.randbelow(2**31 - 1) + 1
                # 0xFF first: the agent drops whatever half-command an earlier client left behind.
                self._send(sock, _request("guest-sync", {"id": sync_id}), prefix=b"\xff")
                while self._read_object(sock, deadline, execute) != {"return": sync_id}:
                    pass  # a stale reply from an earlier call, or an error for a garbled line
                self._send(sock, _request(execute, arguments))
                reply = self._read_object(sock, deadline, execute)
            except BaseException:
                self._drop()
                raise
        finally:
            self._lock.release()
        return _result(self.name, execute, reply)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock, self._buf = None, b""

    def _connected(self, deadline: float, execute: str) -> socket.socket:
        if self._sock is not None:
            return self._sock
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.connect(str(self.path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            raise AgentError("absent", f"guest {self.name}: no guest agent at {self.path}: "
                             f"{exc.strerror or exc}") from None
        except TimeoutError:
            sock.close()
            raise AgentError("timeout", f"guest {self.name}: {execute}: connecting to {self.path} timed out") from None
        except OSError as exc:
            sock.close()
            raise AgentError("absent", f"guest {self.name}: guest agent at {self.path}: "
                             f"{exc.strerror or exc}") from None
        self._sock = sock
        return sock

    def _send(self, sock: socket.socket, obj: dict[str, Any], prefix: bytes = b"") -> None:
        try:
            sock.sendall(prefix + json.dumps(obj).encode() + b"\n")
        except TimeoutError:
            raise AgentError("timeout", f"guest {self.name}: {obj['execute']}: send timed out") from None
        except OSError as exc:
            raise AgentError("absent", f"guest {self.name}: {obj['execute']}: {exc.strerror or exc}") from None

    def _read_object(self, sock: socket.socket, deadline: float, execute: str) -> Any:
        """The next line that is JSON; lines that are not are skipped (a resync's leftovers)."""
        while True:
            line = self._read_line(sock, deadline, execute)
            try:
                return json.loads(line)
            except ValueError:
                continue

    def _read_line(self, sock: socket.socket, deadline: float, execute: str) -> bytes:
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_LINE_BYTES:
                raise AgentError("protocol", f"guest {self.name}: {execute}: reply line over {MAX_LINE_BYTES} bytes")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AgentError("timeout", f"guest {self.name}: {execute}: no reply from the guest agent in time")
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                raise AgentError("timeout", f"guest {self.name}: {execute}: no reply from the guest agent "
                                 "in time") from None
            except OSError as exc:
                raise AgentError("absent", f"guest {self.name}: {execute}: {exc.strerror or exc}") from None
            if not chunk:
                raise AgentError("absent", f"guest {self.name}: {execute}: the guest agent closed the connection")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line


# libvirt error codes (virterror.h) that mean "no agent to talk to" or "it did not answer".
_VIR_ERR_NO_SUPPORT = 3
_VIR_ERR_OPERATION_INVALID = 55
_VIR_ERR_AGENT_UNRESPONSIVE = 86
_VIR_ERR_AGENT_UNSYNCED = 97


class LibvirtChannel:
    """qemuAgentCommand on a virDomain (libvirt-python); libvirt syncs and times out itself."""

    def __init__(self, domain: Any, name: str | None = None) -> None:
        import libvirt
        import libvirt_qemu

        self._libvirt, self._qemu = libvirt, libvirt_qemu
        self._domain = domain
        self.name = name or domain.name()

    def command(self, execute: str, arguments: dict[str, Any] | None = None, timeout_s: float = 3.0) -> Any:
        # libvirt takes whole seconds (0 would mean "do not wait"); round up, at least 1.
        timeout = max(1, math.ceil(timeout_s))
        try:
            out = self._qemu.qemuAgentCommand(self._domain, json.dumps(_request(execute, arguments)), timeout, 0)
        except self._libvirt.libvirtError as exc:
            code = exc.get_error_code()
            msg = f"guest {self.name}: {execute}: {(exc.get_error_message() or str(exc)).strip()}"
            if code in (_VIR_ERR_AGENT_UNRESPONSIVE, _VIR_ERR_AGENT_UNSYNCED):
                raise AgentError("timeout", msg) from None
            if code in (_VIR_ERR_NO_SUPPORT, _VIR_ERR_OPERATION_INVALID):
                raise AgentError("absent", msg) from None
            raise AgentError("command", msg) from None
        if out is None:
            raise AgentError("protocol", f"guest {self.name}: {execute}: libvirt returned no reply")
        try:
            reply = json.loads(out)
        except ValueError:
            raise AgentError("protocol", f"guest {self.name}: {execute}: reply is not JSON") from None
        return _result(self.name, execute, reply)

    def close(self) -> None:
        """The domain belongs to the caller's connection."""


# -- commands built on the channel -------------------------------------------------------------


@dataclass(frozen=True)
class ExecResult:
    """A finished guest-exec: exit code (None when killed by `signal`), decoded output."""

    exitcode: int | None
    signal: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exitcode == 0 and not self.stderr.strip()

    def failure(self) -> str:
        """The guest's own message, one line."""
        said = " ".join(self.stderr.split()) or " ".join(self.stdout.split())
        status = f"exit {self.exitcode}" if self.exitcode is not None else f"killed by signal {self.signal}"
        return f"{said} ({status})" if said else status


def _decode(name: str, status: dict[str, Any], key: str) -> str:
    data = status.get(key)
    if data is None:
        return ""
    try:
        return base64.b64decode(str(data), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        raise AgentError("protocol", f"guest {name}: guest-exec-status: {key} is not base64") from None


def guest_exec(
    channel: AgentChannel,
    path: str,
    args: list[str],
    deadline: float,
    *,
    call_timeout_s: float = 3.0,
    wait: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ExecResult:
    """Run `path args` in the guest and poll guest-exec-status until it exits or `deadline`
    (on `clock`) passes. The guest process is not killed on timeout: the agent has no command
    for that, so the error says it may still be running."""
    def remaining() -> float:
        left = deadline - clock()
        if left <= 0:
            raise AgentError("timeout", f"guest {channel.name}: {path} {' '.join(args)}: did not finish in time "
                             "(it may still run in the guest)")
        return min(call_timeout_s, left)

    started = channel.command("guest-exec", {"path": path, "arg": args, "capture-output": True}, remaining())
    if not isinstance(started, dict) or not isinstance(started.get("pid"), int):
        raise AgentError("protocol", f"guest {channel.name}: guest-exec: no pid in reply")
    delay = 0.005
    while True:
        status = channel.command("guest-exec-status", {"pid": started["pid"]}, remaining())
        if not isinstance(status, dict):
            raise AgentError("protocol", f"guest {channel.name}: guest-exec-status: reply is not an object")
        if status.get("exited"):
            exitcode, sig = status.get("exitcode"), status.get("signal")
            return ExecResult(exitcode if isinstance(exitcode, int) else None, sig if isinstance(sig, int) else None,
                              _decode(channel.name, status, "out-data"), _decode(channel.name, status, "err-data"))
        remaining()
        wait(min(delay, max(0.0, deadline - clock())))
        delay = min(delay * 2, 0.2)


def hardware_addresses(channel: AgentChannel, timeout_s: float) -> dict[str, str]:
    """Interface name -> lower-case MAC from guest-network-get-interfaces."""
    reply = channel.command("guest-network-get-interfaces", None, timeout_s)
    if not isinstance(reply, list):
        raise AgentError("protocol", f"guest {channel.name}: guest-network-get-interfaces: reply is not a list")
    found: dict[str, str] = {}
    for entry in reply:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) \
                and isinstance(entry.get("hardware-address"), str):
            found[entry["name"]] = entry["hardware-address"].lower()
    return found


def not_allowed(info: Any, required: tuple[str, ...]) -> str | None:
    """From a guest-info reply: None when the agent allows every `required` command, else why not,
    e.g. "its guest agent (qemu-ga 7.2.22) does not allow guest-exec" (RHEL blocks some by default)."""
    listed = info.get("supported_commands") if isinstance(info, dict) else None
    enabled = {c.get("name") for c in listed or () if isinstance(c, dict) and c.get("enabled", True)}
    off = [c for c in required if c not in enabled]
    if not off:
        return None
    version = info.get("version", "?") if isinstance(info, dict) else "?"
    return f"its guest agent (qemu-ga {version}) does not allow {', '.join(off)}"
