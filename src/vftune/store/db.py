"""History in one SQLite file: inventory, per-VF samples, per-PF samples, decisions.

WAL mode so the API can read while the agent writes; the schema version lives in
PRAGMA user_version and MIGRATIONS moves a file forward one step at a time.
Timestamps are Unix seconds on the host's clock (the simulated host maps its
clock onto the wall clock at start).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from vftune.model import Decision, Inventory, PfSample, VfSample

# Each entry upgrades the schema from version i to i + 1. Never edit a released step: append.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE pfs (
        name TEXT PRIMARY KEY, pci TEXT NOT NULL, device_id INTEGER NOT NULL,
        driver TEXT NOT NULL, num_vfs INTEGER NOT NULL, total_vfs INTEGER NOT NULL,
        updated REAL NOT NULL
    );
    CREATE TABLE vfs (
        pci TEXT PRIMARY KEY, pf TEXT NOT NULL, idx INTEGER NOT NULL, driver TEXT,
        guest_name TEXT, guest_uuid TEXT, updated REAL NOT NULL
    );
    CREATE TABLE samples (
        t REAL NOT NULL, pci TEXT NOT NULL, dt REAL NOT NULL,
        rx_pps REAL NOT NULL, rx_bps REAL NOT NULL, tx_pps REAL NOT NULL, tx_bps REAL NOT NULL,
        interrupts_per_s REAL, itr INTEGER NOT NULL, guest_cpu REAL, fresh INTEGER NOT NULL
    );
    CREATE INDEX samples_pci_t ON samples (pci, t);
    CREATE INDEX samples_t ON samples (t);
    CREATE TABLE pf_samples (
        t REAL NOT NULL, pf TEXT NOT NULL, dt REAL NOT NULL,
        rx_pps REAL NOT NULL, rx_bps REAL NOT NULL, mode TEXT NOT NULL
    );
    CREATE INDEX pf_samples_pf_t ON pf_samples (pf, t);
    CREATE TABLE decisions (
        id INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, target TEXT NOT NULL,
        setting TEXT NOT NULL, old TEXT, requested TEXT, applied TEXT,
        ok INTEGER NOT NULL, reason TEXT NOT NULL, error TEXT
    );
    CREATE INDEX decisions_target_t ON decisions (target, t);
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, stopped REAL,
        backend TEXT NOT NULL, detail TEXT
    );
    """,
    """
    CREATE TABLE cost_fits (
        t REAL NOT NULL, alpha REAL NOT NULL, beta REAL NOT NULL, gamma REAL NOT NULL,
        rows INTEGER NOT NULL
    );
    """,
    """
    CREATE TABLE guest_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, guest TEXT NOT NULL,
        uuid TEXT, operation TEXT NOT NULL, vfs TEXT NOT NULL, source TEXT NOT NULL
    );
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(Exception):
    """The database cannot be opened or is from a newer vftune."""


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class Store:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # One connection shared by the agent thread and the API; the lock serialises use.
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from None

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"database {self.path} has schema version {version}, newer than this vftune's {SCHEMA_VERSION}"
            )
        for step in range(version, SCHEMA_VERSION):
            # executescript commits first, so wrap each step so it lands whole or not at all.
            self._db.executescript(f"BEGIN;\n{MIGRATIONS[step]}\nPRAGMA user_version = {step + 1};\nCOMMIT;")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writes -------------------------------------------------------------

    def record_inventory(self, inv: Inventory, t: float) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM pfs")
            self._db.execute("DELETE FROM vfs")
            self._db.executemany(
                "INSERT INTO pfs VALUES (?,?,?,?,?,?,?)",
                [(p.name, p.pci, p.device_id, p.driver, p.num_vfs, p.total_vfs, t) for p in inv.pfs],
            )
            self._db.executemany(
                "INSERT INTO vfs VALUES (?,?,?,?,?,?,?)",
                [
                    (
                        vf.pci, vf.pf, vf.index, vf.driver,
                        vf.guest.name if vf.guest else None,
                        vf.guest.uuid if vf.guest else None, t,
                    )
                    for vf in inv.vfs()
                ],
            )

    def record_tick(
        self,
        t: float,
        vf_samples: Sequence[VfSample],
        pf_samples: Sequence[PfSample],
        decisions: Iterable[Decision],
    ) -> None:
        """One transaction per tick: a reader never sees half a tick."""
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        t, s.pci, s.dt, s.rx_pps, s.rx_bps, s.tx_pps, s.tx_bps,
                        s.interrupts_per_s, s.itr, s.guest_cpu, int(s.fresh),
                    )
                    for s in vf_samples
                ],
            )
            self._db.executemany(
                "INSERT INTO pf_samples VALUES (?,?,?,?,?,?)",
                [(t, s.pf, s.dt, s.rx_pps, s.rx_bps, s.mode) for s in pf_samples],
            )
            self._insert_decisions(decisions)

    def record_decisions(self, decisions: Iterable[Decision]) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._insert_decisions(decisions)

    def _insert_decisions(self, decisions: Iterable[Decision]) -> None:
        self._db.executemany(
            "INSERT INTO decisions (t, target, setting, old, requested, applied, ok, reason, error)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            [
                (d.t, d.target, d.setting, _text(d.old), _text(d.requested), _text(d.applied),
                 int(d.ok), d.reason, d.error)
                for d in decisions
            ],
        )

    def record_cost_fit(self, t: float, alpha: float, beta: float, gamma: float, rows: int) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT INTO cost_fits VALUES (?,?,?,?,?)", (t, alpha, beta, gamma, rows))

    def record_guest_event(self, t: float, guest: str, uuid: str | None, operation: str,
                           vfs: Sequence[str], source: str) -> int:
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO guest_events (t, guest, uuid, operation, vfs, source) VALUES (?,?,?,?,?,?)",
                (t, guest, uuid, operation, " ".join(vfs), source),
            )
            return int(cur.lastrowid or 0)

    def guest_events(self, since: float, until: float, limit: int) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT * FROM guest_events WHERE t >= ? AND t <= ? ORDER BY id DESC LIMIT ?", (since, until, limit)
        )
        for r in rows:
            r["vfs"] = r["vfs"].split()
        return rows[::-1]

    def start_run(self, t: float, backend: str, detail: str) -> int:
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO runs (started, backend, detail) VALUES (?,?,?)", (t, backend, detail)
            )
            return int(cur.lastrowid or 0)

    def stop_run(self, run_id: int, t: float) -> None:
        with self._lock, self._db:
            self._db.execute("UPDATE runs SET stopped = ? WHERE id = ?", (t, run_id))

    def prune(self, before: float) -> int:
        """Drop samples older than `before`; decisions are kept (they are few and they explain)."""
        with self._lock, self._db:
            self._db.execute("BEGIN")
            n = self._db.execute("DELETE FROM samples WHERE t < ?", (before,)).rowcount
            n += self._db.execute("DELETE FROM pf_samples WHERE t < ?", (before,)).rowcount
            return n

    # -- reads --------------------------------------------------------------

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._db.execute(sql, args).fetchall()]

    def samples(self, pci: str, since: float, until: float, limit: int) -> list[dict[str, Any]]:
        # Newest `limit` rows of the window, returned oldest first.
        rows = self._rows(
            "SELECT * FROM samples WHERE pci = ? AND t >= ? AND t <= ? ORDER BY t DESC LIMIT ?",
            (pci, since, until, limit),
        )
        for r in rows:
            r["fresh"] = bool(r["fresh"])
        return rows[::-1]

    def decisions(
        self, target: str | None, since: float, until: float, limit: int
    ) -> list[dict[str, Any]]:
        where = "t >= ? AND t <= ?"
        args: list[float | str] = [since, until]
        if target is not None:
            where += " AND target = ?"
            args.append(target)
        rows = self._rows(
            f"SELECT * FROM decisions WHERE {where} ORDER BY id DESC LIMIT ?", (*args, limit)
        )
        for r in rows:
            r["ok"] = bool(r["ok"])
        return rows[::-1]

    def latest_cost_fit(self) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM cost_fits ORDER BY t DESC LIMIT 1")
        return rows[0] if rows else None

    def count(self, table: str) -> int:
        if table not in {"samples", "pf_samples", "decisions", "vfs", "pfs", "runs", "cost_fits", "guest_events"}:
            raise ValueError(f"unknown table {table!r}")
        return int(self._rows(f"SELECT COUNT(*) AS n FROM {table}")[0]["n"])


def check_writable(path: str | os.PathLike[str]) -> str | None:
    """Why a database path cannot be used, or None. Checked before anything is created."""
    p = Path(path)
    if p.is_dir():
        return f"--db {path}: is a directory"
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        return f"--db {path}: directory {parent} does not exist"
    if p.exists():
        if not os.access(p, os.R_OK | os.W_OK):
            return f"--db {path}: not readable and writable"
    elif not os.access(parent, os.W_OK | os.X_OK):
        return f"--db {path}: directory {parent} is not writable"
    return None
