"""Small sysfs/procfs file helpers: every failure becomes a one-line HostError naming the path and errno."""

from __future__ import annotations

import errno as errno_mod
import os
from pathlib import Path

from vftune.hostdriver.base import HostError


def describe_oserror(where: str | os.PathLike[str], exc: OSError) -> str:
    code = exc.errno if exc.errno is not None else errno_mod.EIO
    return f"{where}: {os.strerror(code)} (errno {code})"


def read_text(path: Path) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError as exc:
        raise HostError(describe_oserror(path, exc)) from None


def read_int(path: Path, base: int = 10) -> int:
    text = read_text(path)
    try:
        return int(text, base)
    except ValueError:
        raise HostError(f"{path}: not a number: {text!r}") from None


def read_optional(path: Path) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
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
