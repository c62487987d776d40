"""One writer per history file: an exclusive flock on DB.lock beside it.

Two agents (or an agent and `vftune restore`) on one journal undo each other's originals: the
second restores the first's entries at its start, and a crash of either leaves values set for
good. The lock lives in its own file, not in SQLite, so a read-only or broken database still
takes it; the kernel drops it when the holder dies, kill -9 included. The holder's pid is
written into the file so that the one refused can name it.
"""

from __future__ import annotations

import errno
import fcntl
import os

LOCK_SUFFIX = ".lock"


class Busy(Exception):
    """Another process holds the history file's lock."""

    def __init__(self, path: str, holder: int | None) -> None:
        self.path, self.holder = path, holder
        who = f"pid {holder}" if holder else "another process"
        super().__init__(f"{path} is held by {who} (a running vftune agent or restore); stop it first")


class WriterLock:
    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(db_path) + LOCK_SUFFIX
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock; raises Busy when held elsewhere. False when no lock file can be made
        (a read-only file system that never had one): nothing can write there either."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            writable = True
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                return False
            writable = False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise Busy(os.fspath(self.path)[: -len(LOCK_SUFFIX)], holder) from None
        if writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the pid stays in the file; only a held lock means anything
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
