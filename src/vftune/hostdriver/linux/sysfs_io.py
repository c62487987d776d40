"""Small sysfs/procfs file helpers: every failure becomes a one-line HostError naming the path and errno."""

from __future__ import annotations

import errno as errno_mod
import os
from pathlib import Path

from vftune.hostdriver.base import HostError


def describe_oserror(where: str | os.PathLike[str], exc: OSError) -> str:
    code = exc.errno if exc.errno is not None else errno_mod.EIO
    return f"{where}: {os.strerror(code)} (errno {code})"


_CHUNK = 64 * 1024


def read_bytes(path: str | os.PathLike[str], limit: int = 16 * 1024 * 1024) -> bytes:
    """A file's bytes, at most `limit`, with the system calls alone (open, read until the end,
    close): a Python file object costs several times the reads of a sysfs attribute or a
    procfs file. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        got = 0
        while got < limit:
            more = os.read(fd, min(_CHUNK, limit - got))
            if not more:
                break
            chunks.append(more)
            got += len(more)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def _as_text(data: bytes) -> str:
    """What reading the bytes in text mode gives (ASCII, undecodable bytes as U+FFFD, universal
    newlines), stripped."""
    text = data.decode("ascii", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.strip()


def read_text(path: Path) -> str:
    try:
        return _as_text(read_bytes(path))
    except OSError as exc:
        raise HostError(describe_oserror(path, exc)) from None


def read_int(path: Path, base: int = 10) -> int:
    text = read_text(path)
    try:
        if not text.isascii() or len(text) > 40:
            raise ValueError(text)
        return int(text, base)
    except ValueError:
        raise HostError(f"{path}: not a number: {text[:40]!r}") from None


def as_count(text: str | None) -> int | None:
    """A sysfs number as the kernel writes it (ASCII digits, sane width), else None."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 20:
        return None
    return int(text)


def read_source(path: Path, limit: int = 16 * 1024 * 1024) -> str:
    """A procfs/sysfs file as text whatever its bytes (undecodable ones become U+FFFD), at most
    `limit` bytes: a parser gets text, and any problem with the file is one HostError."""
    try:
        data = read_bytes(path, limit)
    except OSError as exc:
        raise HostError(describe_oserror(path, exc)) from None
    return data.decode("utf-8", errors="replace")


def read_optional(path: Path) -> str | None:
    try:
        return _as_text(read_bytes(path))
    except OSError:
        return None


def write_text(path: Path, value: str) -> None:
    """One write(2) of the value with a newline, as `echo value > file` does; sysfs needs one write."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    except OSError as exc:
        raise HostError(describe_oserror(path, exc)) from None
    try:
        os.write(fd, f"{value}\n".encode("ascii"))
    except OSError as exc:
        raise HostError(describe_oserror(path, exc)) from None
    finally:
        os.close(fd)
