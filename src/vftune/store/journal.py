"""The write journal: what a host had before vftune changed it, kept in SQLite until it is put back.

A crash (kill -9, a power cut, systemd's SIGKILL) must never leave a port mis-set, so the
original value of every (target, setting) is committed to the journal table *before* the host
write that changes it, with synchronous=FULL, and deleted only once it has been written back
and read back. The next start (or `vftune restore`) puts back whatever is still there.

Backend contract (the Linux backend's sysfs and VF-ITR writes, a guest-agent actuator, ...):

1. Register one restorer per entry kind, once, before using the journal:

       journal.register("guest_agent", restore_guest_agent)

   `kind` is a short string naming one way of putting a setting back; the restorer takes a
   JournalEntry and returns an Applied (ok=False with the reason when it could not). It raises
   TargetGone when the target no longer exists (a VF disabled, a guest undefined): the entry is
   dropped and reported, because it can never be put back. Any other exception is reported as
   a failed restore and the entry stays.
2. Before the first write of a (target, setting), call

       journal.remember(kind, target, setting, payload)

   where payload is a JSON-able dict holding everything the restorer needs (the old value, a
   path relative to a root, a guest and interface name). It has committed when it returns.
   If it returned True (a new entry) and the write then fails, call discard(target, setting).
   Only the first entry per (target, setting) is kept: that is the host's original, even across
   runs whose restore failed. If it raises JournalError, do not write: the original is not safe.
3. restore() runs every pending entry's restorer, newest first. An entry put back is deleted;
   a failed one stays for the next start or `vftune restore`. An entry whose kind nobody
   registered stays too (e.g. written by an actuator this build or this command does not load)
   and is reported as not restored.

The journal opens its own connection to the history file (WAL), so the tick's journal writes
never wait behind an API reader. Journal(":memory:") gives a process-local journal for tests
and backends that hold no host state across processes.

Faults of the history file itself (docs/reliability.md has the matrix):
- Restoring never needs a writable file: Journal.for_restore() falls back to a read-only
  connection, the host is written back all the same, and entries that could not be forgotten
  (read-only, full disk, another writer's lock) stay, counted in `kept`, for the next try.
- A marker file beside the history (DB.unrestored, fsynced) lists the (target, setting) keys
  the journal holds. A start that finds keys in the marker but not in the journal knows the
  journal was lost (deleted, truncated, garbled WAL): it says so at ERROR and refuses to
  journal those targets' current values as originals (they may be vftune's own) until an
  operator runs `vftune restore --accept-current`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vftune.model import Applied

log = logging.getLogger("vftune.journal")

SCHEMA = """
CREATE TABLE journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, kind TEXT NOT NULL,
    target TEXT NOT NULL, setting TEXT NOT NULL, payload TEXT NOT NULL,
    UNIQUE (target, setting)
);
"""


class JournalError(Exception):
    """The journal cannot be written: nothing may be changed on the host."""


class TargetGone(Exception):
    """Raised by a restorer: the entry's target no longer exists (its device is there, the
    setting is not: a VF disabled, a guest undefined); the entry is dropped unless the caller
    keeps gone entries (`vftune restore` without --forget-missing)."""


class TargetAbsent(Exception):
    """Raised by a restorer: the entry's host is not where it looks (its PCI device or interface
    is not under the root given): likely a wrong --sysfs-root, so the entry is always kept
    unless the caller forgets missing entries."""


MARKER_SUFFIX = ".unrestored"
STOP_BUSY_S = 0.25  # at stop, how long one journal write may wait for another writer's lock


@dataclass(frozen=True)
class JournalEntry:
    id: int
    t: float
    kind: str
    target: str
    setting: str
    payload: dict[str, Any]


Restorer = Callable[[JournalEntry], Applied]


def _fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Marker:
    """The keys the journal holds, in a small file beside the history file, kept apart from
    SQLite so that losing the database (or its WAL) cannot lose the knowledge that writes
    are outstanding."""

    def __init__(self, db_path: str) -> None:
        self.path = db_path + MARKER_SUFFIX

    def read(self) -> set[tuple[str, str]]:
        try:
            with open(self.path, "rb") as fh:
                data = json.loads(fh.read(4 * 1024 * 1024))
        except FileNotFoundError:
            return set()
        except (OSError, ValueError):
            # Unreadable or garbled: outstanding writes of unknown targets.
            return {("?", "?")}
        keys = data.get("keys", []) if isinstance(data, dict) else []
        return {(str(k[0]), str(k[1])) for k in keys if isinstance(k, list) and len(k) == 2}

    def write(self, keys: set[tuple[str, str]]) -> None:
        """Replace the marker atomically and durably; no keys: remove it. Raises OSError."""
        if not keys:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                return
            _fsync_dir(self.path)
            return
        tmp = self.path + ".new"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"pid": os.getpid(), "t": time.time(), "keys": sorted(keys)}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path)


class Journal:
    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._restorers: dict[str, Restorer] = {}
        # Keys already journaled: remember() costs a commit only on the first write of a setting.
        self._known: set[tuple[str, str]] = set()
        # Why entries cannot be forgotten (read-only, full, locked): set by the first failure.
        self.unwritable: str | None = "opened read-only" if read_only else None
        self.kept = 0  # entries restored on the host but still in the journal (not forgettable)
        self.absent = 0  # entries of the last restore whose device is not under the roots (TargetAbsent)
        self.dropped = 0  # entries of the last restore forgotten without being put back
        self._marker = None if self.path == ":memory:" else Marker(self.path)
        self._marked: set[tuple[str, str]] = set()
        # Keys the marker lists but the journal lost: their originals are unknown.
        self.untrusted: set[tuple[str, str]] = set()
        try:
            if read_only:
                uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None,
                                           timeout=5.0)
            else:
                self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            if self.path == ":memory:":
                self._db.executescript(SCHEMA)
            elif not read_only:
                # The history file's migrations create the table; an older file without it is
                # migrated by opening a Store first (the CLI always does).
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
            self._known = {(r[0], r[1]) for r in self._db.execute("SELECT target, setting FROM journal")}
        except sqlite3.Error as exc:
            raise JournalError(f"write journal in {self.path}: {exc}") from None
        if self._marker is not None:
            self._marked = self._marker.read()
            self.untrusted = self._marked - self._known
            if self._marked != self._known and not read_only:
                # The marker follows the journal again; lost keys stay untrusted in it.
                self._mark(self._known | self.untrusted)

    @classmethod
    def memory(cls) -> Journal:
        return cls(":memory:")

    @classmethod
    def for_restore(cls, path: str | os.PathLike[str]) -> Journal:
        """Writable if the file can be written, else read-only: restoring needs only reads."""
        journal: Journal | None = None
        try:
            journal = cls(path)
            journal._db.execute("BEGIN IMMEDIATE")
            journal._db.execute("ROLLBACK")
            return journal
        except (JournalError, sqlite3.Error) as exc:
            reason = str(exc)
            if journal is not None:
                journal.close()
        journal = cls(path, read_only=True)
        journal.unwritable = f"history file not writable ({reason.rsplit(': ', 1)[-1]})"
        return journal

    def _mark(self, keys: set[tuple[str, str]]) -> None:
        if self._marker is None or keys == self._marked:
            return
        try:
            self._marker.write(keys)
        except OSError as exc:
            log.warning("write-journal marker %s not updated: %s", self._marker.path, exc.strerror or exc)
            return
        self._marked = set(keys)

    def hurry(self) -> None:
        """At stop: never wait long for another writer's lock (the unit's stop timeout)."""
        # Not under _lock: a tick's remember() may be the one waiting for the other writer.
        with contextlib.suppress(sqlite3.Error):
            self._db.execute(f"PRAGMA busy_timeout = {int(STOP_BUSY_S * 1000)}")

    def accept_current(self) -> int:
        """The operator's word that the untrusted targets' current values are their originals."""
        n = len(self.untrusted)
        self.untrusted = set()
        self._mark(set(self._known))
        return n

    def register(self, kind: str, restorer: Restorer) -> None:
        self._restorers[kind] = restorer

    def remember(self, kind: str, target: str, setting: str, payload: dict[str, Any]) -> bool:
        """Journal the original of (target, setting) unless one is kept; True if this call stored it."""
        key = (target, setting)
        with self._lock:
            if key in self._known:
                return False
            if key in self.untrusted or ("?", "?") in self.untrusted:
                raise JournalError(f"{target} {setting}: a run's write journal was lost and this value may be "
                                   "vftune's own, not the original; not writing it until an operator runs "
                                   "`vftune restore --accept-current`")
            if self.unwritable is not None:
                raise JournalError(f"write journal in {self.path}: {self.unwritable}; not writing {target} {setting}")
            # The marker first: a crash between the two leaves a key marked but not journaled,
            # which only makes the next start careful about a value that was never changed.
            self._mark(self._marked | {key})
            try:
                cur = self._db.execute(
                    "INSERT OR IGNORE INTO journal (t, kind, target, setting, payload) VALUES (?,?,?,?,?)",
                    (time.time(), kind, target, setting, json.dumps(payload, sort_keys=True)),
                )
            except sqlite3.Error as exc:
                raise JournalError(f"write journal in {self.path}: {exc}; not writing {target} {setting}") from None
            self._known.add(key)
            return cur.rowcount > 0

    def discard(self, target: str, setting: str) -> None:
        """Drop an entry remember() just stored when the write it guarded failed: nothing changed."""
        with self._lock:
            try:
                self._db.execute("DELETE FROM journal WHERE target = ? AND setting = ?", (target, setting))
            except sqlite3.Error:
                return  # kept: restoring an unchanged value is harmless
            self._known.discard((target, setting))
            self._mark(self._known | self.untrusted)

    def pending(self) -> list[JournalEntry]:
        """Entries not yet put back, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, t, kind, target, setting, payload FROM journal ORDER BY id DESC").fetchall()
        out = []
        for r in rows:
            try:
                payload = json.loads(r[5])
            except ValueError:
                payload = {}
            out.append(JournalEntry(r[0], r[1], r[2], r[3], r[4], payload if isinstance(payload, dict) else {}))
        return out

    def _forget(self, entry: JournalEntry) -> None:
        """Delete a put-back entry; when the file cannot be written, keep it (a second restore of an
        original is harmless) and stop trying for this run, so a locked file costs one wait."""
        with self._lock:
            if self.unwritable is None:
                try:
                    self._db.execute("DELETE FROM journal WHERE id = ?", (entry.id,))
                except sqlite3.Error as exc:
                    self.unwritable = f"cannot forget restored entries: {exc}"
                    log.error("write journal in %s: %s; restoring goes on, the entries stay for the next "
                              "start or `vftune restore`", self.path, exc)
                else:
                    self._known.discard((entry.target, entry.setting))
                    return
            self.kept += 1

    def restore(self, forget_gone: bool = True, forget_absent: bool = False) -> list[Applied]:
        """Put back every pending entry a registered restorer knows, newest first.

        forget_gone: drop entries whose target is gone from a device still there (TargetGone);
        forget_absent: also those whose device is not under the root given (TargetAbsent)."""
        results: list[Applied] = []
        self.absent = self.dropped = 0
        try:
            entries = self.pending()
        except sqlite3.Error as exc:
            return [Applied("journal", "read", None, None, None, ok=False,
                            error=f"write journal in {self.path} unreadable: {exc}")]
        for entry in entries:
            restorer = self._restorers.get(entry.kind)
            if restorer is None:
                results.append(Applied(entry.target, entry.setting, None, None, None, ok=False,
                                       error=f"journal entry {entry.id} of kind {entry.kind!r}: no restorer "
                                             "registered here; kept"))
                continue
            try:
                applied = restorer(entry)
            except (TargetGone, TargetAbsent) as exc:
                drop = forget_absent or (forget_gone and isinstance(exc, TargetGone))
                self.absent += isinstance(exc, TargetAbsent)
                self.dropped += drop
                results.append(Applied(entry.target, entry.setting, None, None, None, ok=False,
                                       error=f"{exc}; journal entry {'dropped' if drop else 'kept'}"))
                if drop:
                    self._forget(entry)
                continue
            except Exception as exc:  # a restorer's bug must not stop the others from running
                log.exception("restoring journal entry %d (%s)", entry.id, entry.kind)
                applied = Applied(entry.target, entry.setting, None, None, None, ok=False,
                                  error=f"{type(exc).__name__}: {exc}")
            results.append(applied)
            if applied.ok:
                self._forget(entry)
        with self._lock:
            if self.unwritable is None:
                self._mark(self._known | self.untrusted)
        return results

    def close(self) -> None:
        with self._lock:
            self._db.close()
