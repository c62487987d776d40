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
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
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
    """Raised by a restorer: the entry's target no longer exists; the entry is dropped."""


@dataclass(frozen=True)
class JournalEntry:
    id: int
    t: float
    kind: str
    target: str
    setting: str
    payload: dict[str, Any]


Restorer = Callable[[JournalEntry], Applied]


class Journal:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._restorers: dict[str, Restorer] = {}
        # Keys already journaled: remember() costs a commit only on the first write of a setting.
        self._known: set[tuple[str, str]] = set()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            if self.path == ":memory:":
                self._db.executescript(SCHEMA)
            else:
                # The history file's migrations create the table; an older file without it is
                # migrated by opening a Store first (the CLI always does).
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
            self._known = {(r[0], r[1]) for r in self._db.execute("SELECT target, setting FROM journal")}
        except sqlite3.Error as exc:
            raise JournalError(f"write journal in {self.path}: {exc}") from None

    @classmethod
    def memory(cls) -> Journal:
        return cls(":memory:")

    def register(self, kind: str, restorer: Restorer) -> None:
        self._restorers[kind] = restorer

    def remember(self, kind: str, target: str, setting: str, payload: dict[str, Any]) -> bool:
        """Journal the original of (target, setting) unless one is kept; True if this call stored it."""
        key = (target, setting)
        with self._lock:
            if key in self._known:
                return False
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
        with self._lock:
            self._db.execute("DELETE FROM journal WHERE id = ?", (entry.id,))
            self._known.discard((entry.target, entry.setting))

    def restore(self) -> list[Applied]:
        """Put back every pending entry a registered restorer knows, newest first."""
        results: list[Applied] = []
        for entry in self.pending():
            restorer = self._restorers.get(entry.kind)
            if restorer is None:
                results.append(Applied(entry.target, entry.setting, None, None, None, ok=False,
                                       error=f"journal entry {entry.id} of kind {entry.kind!r}: no restorer "
                                             "registered here; kept"))
                continue
            try:
                applied = restorer(entry)
            except TargetGone as exc:
                results.append(Applied(entry.target, entry.setting, None, None, None, ok=False,
                                       error=f"{exc}; journal entry dropped"))
                self._forget(entry)
                continue
            except Exception as exc:  # a restorer's bug must not stop the others from running
                log.exception("restoring journal entry %d (%s)", entry.id, entry.kind)
                applied = Applied(entry.target, entry.setting, None, None, None, ok=False,
                                  error=f"{type(exc).__name__}: {exc}")
            results.append(applied)
            if applied.ok:
                self._forget(entry)
        return results

    def close(self) -> None:
        with self._lock:
            self._db.close()
