"""History in one SQLite file: inventory, per-VF samples, per-PF samples, decisions.

WAL mode so the API can read while the agent writes; the schema version lives in
PRAGMA user_version and MIGRATIONS moves a file forward one step at a time.
Timestamps are Unix seconds on the host's clock (the simulated host maps its
clock onto the wall clock at start).
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vftune.model import Decision, Inventory, PfSample, VfSample
from vftune.store.journal import SCHEMA as JOURNAL_SCHEMA
from vftune.store.journal import STOP_BUSY_S
from vftune.store.reads import History

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
    # The durable write journal (store/journal.py) and how each run ended.
    JOURNAL_SCHEMA + """
    ALTER TABLE runs ADD COLUMN end_state TEXT;
    """,
    # Samples beyond the raw window, one row per VF and minute (t = the minute's end). Rows of
    # every history table arrive in time order, so retention deletes from the rowid head.
    """
    CREATE TABLE samples_1m (
        t REAL NOT NULL, pci TEXT NOT NULL, dt REAL NOT NULL,
        rx_pps REAL NOT NULL, rx_bps REAL NOT NULL, tx_pps REAL NOT NULL, tx_bps REAL NOT NULL,
        interrupts_per_s REAL, itr INTEGER NOT NULL, guest_cpu REAL, fresh INTEGER NOT NULL,
        last_t REAL NOT NULL
    );
    CREATE UNIQUE INDEX samples_1m_pci_t ON samples_1m (pci, t);
    """,
    # Compact history (30 days x 126 VFs under 2 GB) whose pages are range scans. Each VF, PF or
    # decision target is a small integer (targets) instead of its name on every row; the series
    # tables are WITHOUT ROWID, clustered on (target, t), so one VF's rows are neighbours on disk
    # and no separate index is kept; decisions are clustered on (target, t, id) with an index on
    # id for the all-targets feed and retention (ids stay increasing: sequences keeps the last).
    # Rows of the old tables are copied in key order, then the old tables go.
    """
    CREATE TABLE targets (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    INSERT INTO targets (name) SELECT pci FROM samples UNION SELECT pci FROM samples_1m
        UNION SELECT target FROM decisions UNION SELECT pf FROM pf_samples;
    CREATE TABLE sequences (name TEXT PRIMARY KEY, last INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO sequences VALUES ('decisions', COALESCE(
        (SELECT seq FROM sqlite_sequence WHERE name = 'decisions'), (SELECT MAX(id) FROM decisions), 0));

    CREATE TABLE samples2 (
        vf INTEGER NOT NULL, t REAL NOT NULL, dt REAL NOT NULL,
        rx_pps REAL NOT NULL, rx_bps REAL NOT NULL, tx_pps REAL NOT NULL, tx_bps REAL NOT NULL,
        interrupts_per_s REAL, itr INTEGER NOT NULL, guest_cpu REAL, fresh INTEGER NOT NULL,
        PRIMARY KEY (vf, t)
    ) WITHOUT ROWID;
    INSERT OR REPLACE INTO samples2 SELECT n.id, s.t, s.dt, s.rx_pps, s.rx_bps, s.tx_pps, s.tx_bps,
        s.interrupts_per_s, s.itr, s.guest_cpu, s.fresh
        FROM samples s JOIN targets n ON n.name = s.pci ORDER BY n.id, s.t, s.rowid;
    DROP TABLE samples;
    ALTER TABLE samples2 RENAME TO samples;

    CREATE TABLE samples_1m2 (
        vf INTEGER NOT NULL, t REAL NOT NULL, dt REAL NOT NULL,
        rx_pps REAL NOT NULL, rx_bps REAL NOT NULL, tx_pps REAL NOT NULL, tx_bps REAL NOT NULL,
        interrupts_per_s REAL, itr INTEGER NOT NULL, guest_cpu REAL, fresh INTEGER NOT NULL,
        last_t REAL NOT NULL,
        PRIMARY KEY (vf, t)
    ) WITHOUT ROWID;
    INSERT OR REPLACE INTO samples_1m2 SELECT n.id, s.t, s.dt, s.rx_pps, s.rx_bps, s.tx_pps, s.tx_bps,
        s.interrupts_per_s, s.itr, s.guest_cpu, s.fresh, s.last_t
        FROM samples_1m s JOIN targets n ON n.name = s.pci ORDER BY n.id, s.t;
    DROP TABLE samples_1m;
    ALTER TABLE samples_1m2 RENAME TO samples_1m;

    CREATE TABLE pf_samples2 (
        pf INTEGER NOT NULL, t REAL NOT NULL, dt REAL NOT NULL,
        rx_pps REAL NOT NULL, rx_bps REAL NOT NULL, mode TEXT NOT NULL,
        PRIMARY KEY (pf, t)
    ) WITHOUT ROWID;
    INSERT OR REPLACE INTO pf_samples2 SELECT n.id, s.t, s.dt, s.rx_pps, s.rx_bps, s.mode
        FROM pf_samples s JOIN targets n ON n.name = s.pf ORDER BY n.id, s.t, s.rowid;
    DROP TABLE pf_samples;
    ALTER TABLE pf_samples2 RENAME TO pf_samples;

    CREATE TABLE decisions2 (
        target INTEGER NOT NULL, t REAL NOT NULL, id INTEGER NOT NULL,
        setting TEXT NOT NULL, old TEXT, requested TEXT, applied TEXT,
        ok INTEGER NOT NULL, reason TEXT NOT NULL, error TEXT,
        PRIMARY KEY (target, t, id)
    ) WITHOUT ROWID;
    INSERT INTO decisions2 SELECT n.id, d.t, d.id, d.setting, d.old, d.requested, d.applied, d.ok,
        d.reason, d.error FROM decisions d JOIN targets n ON n.name = d.target ORDER BY n.id, d.t, d.id;
    DROP TABLE decisions;
    ALTER TABLE decisions2 RENAME TO decisions;
    CREATE UNIQUE INDEX decisions_id ON decisions (id);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
# The tables clustered on (target, t), by the name of their target column.
CLUSTER_KEY = {"samples": "vf", "samples_1m": "vf", "pf_samples": "pf"}
log = logging.getLogger("vftune.store")


class StoreError(Exception):
    """The database cannot be opened or is from a newer vftune."""


@dataclass(frozen=True)
class Retention:
    """How long each kind of row is kept, and how large the file may grow."""

    raw_s: float = 24 * 3600.0  # per-tick samples
    rollup_s: float = 30 * 86400.0  # 1-minute rows of samples, and events and decisions
    max_bytes: int = 2 * 1024**3  # live pages; beyond this the oldest rows go first
    batch_rows: int = 5000  # rows per DELETE: the writer lock is never held long
    budget_s: float = 0.25  # wall time one maintain() call may spend


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _is_full(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR) or "full" in str(exc) or "disk I/O" in str(exc)


# A sample's stored columns between (vf, t) and fresh, in the table's order, in one call.
_sample_columns = operator.attrgetter("dt", "rx_pps", "rx_bps", "tx_pps", "tx_bps", "interrupts_per_s", "itr",
                                      "guest_cpu")


def _private(path: Path) -> None:
    """The history names guests and UUIDs: the file and its -wal/-shm are the owner's only."""
    for p in (str(path), f"{path}-wal", f"{path}-shm"):
        try:
            if os.stat(p).st_mode & 0o077:  # one stat a file: this runs after every write
                os.chmod(p, 0o600)
        except OSError:
            pass


class Store(History):
    def __init__(self, path: str | os.PathLike[str], retention: Retention | None = None) -> None:
        self.path = Path(path)
        self.retention = retention or Retention()
        self._memory = str(path) == ":memory:"
        # The agent's thread writes through one connection under _lock; each API thread reads
        # through its own (WAL readers never wait for the writer, nor it for them).
        self._lock = threading.Lock()
        self._local = threading.local()  # a reader connection closes with its thread
        self.degraded: str | None = None  # why recording stopped (disk full), for /healthz
        self._ids: dict[str, int] = {}  # target name -> targets.id, filled only by committed rows
        self._retry_at = 0.0
        try:
            if not self._memory and not self.path.exists():
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            # A new file returns freed pages to the filesystem in maintain(); set before any table.
            self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from None
        if not self._memory:
            _private(self.path)

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
    def on_disk(self) -> bool:
        """A file other processes can open (not ":memory:")."""
        return not self._memory

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def hurry(self) -> None:
        """At stop: a write waits at most STOP_BUSY_S for another process's lock, then fails."""
        with contextlib.suppress(sqlite3.Error):
            self._db.execute(f"PRAGMA busy_timeout = {int(STOP_BUSY_S * 1000)}")

    # -- writes -------------------------------------------------------------

    def _write(self, what: str, work: Callable[[], Any]) -> Any:
        """Run one write transaction; a full disk stops recording (the agent keeps tuning and
        restoring) and is retried a minute later instead of raising into the tick."""
        if self.degraded is not None and time.monotonic() < self._retry_at:
            return None
        try:
            with self._lock, self._db:
                # IMMEDIATE: the work reads (ids, the decision sequence) before it writes.
                self._db.execute("BEGIN IMMEDIATE")
                result = work()
        except BaseException as exc:
            self._ids.clear()  # ids handed out in a rolled-back transaction do not exist
            if not isinstance(exc, sqlite3.Error) or not _is_full(exc):
                raise
            if self.degraded is None:
                log.error("history not recorded: %s while writing %s; tuning and restoring go on", exc, what)
            self.degraded = f"history not recorded: {exc} (writing {what})"
            self._retry_at = time.monotonic() + 60.0
            return None
        if self.degraded is not None:
            log.warning("history recorded again after: %s", self.degraded)
            self.degraded = None
        if not self._memory:
            _private(self.path)
        return result

    def record_inventory(self, inv: Inventory, t: float) -> None:
        def work() -> None:
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

        self._write("inventory", work)

    def record_tick(
        self,
        t: float,
        vf_samples: Sequence[VfSample],
        pf_samples: Sequence[PfSample],
        decisions: Iterable[Decision],
    ) -> None:
        """One transaction per tick: a reader never sees half a tick. A second sample of a VF at
        the same time replaces the first (the key is (VF, t))."""
        def work() -> None:
            ids = self._target_ids([s.pci for s in vf_samples] + [s.pf for s in pf_samples])
            self._db.executemany(
                "INSERT OR REPLACE INTO samples VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [(ids[s.pci], t, *_sample_columns(s), int(s.fresh)) for s in vf_samples],
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO pf_samples VALUES (?,?,?,?,?,?)",
                [(ids[s.pf], t, s.dt, s.rx_pps, s.rx_bps, s.mode) for s in pf_samples],
            )
            self._insert_decisions(decisions)

        self._write("a tick", work)

    def record_decisions(self, decisions: Iterable[Decision]) -> None:
        rows = list(decisions)
        if rows:
            self._write("decisions", lambda: self._insert_decisions(rows))

    def _target_ids(self, names: Iterable[str]) -> dict[str, int]:
        """targets.id of each name, adding new names; inside a write transaction."""
        missing = [n for n in dict.fromkeys(names) if n not in self._ids]
        if missing:
            self._db.executemany("INSERT OR IGNORE INTO targets (name) VALUES (?)", [(n,) for n in missing])
            for n in missing:
                self._ids[n] = int(self._db.execute("SELECT id FROM targets WHERE name = ?", (n,)).fetchone()[0])
        return self._ids

    def _insert_decisions(self, decisions: Iterable[Decision]) -> None:
        rows = list(decisions)
        if not rows:
            return
        ids = self._target_ids(d.target for d in rows)
        # Ids only grow, even when retention has removed every row (clients page with them).
        last = int(self._db.execute("SELECT last FROM sequences WHERE name = 'decisions'").fetchone()[0])
        self._db.executemany(
            "INSERT INTO decisions (target, t, id, setting, old, requested, applied, ok, reason, error)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            [
                (ids[d.target], d.t, last + n, d.setting, _text(d.old), _text(d.requested), _text(d.applied),
                 int(d.ok), d.reason, d.error)
                for n, d in enumerate(rows, 1)
            ],
        )
        self._db.execute("UPDATE sequences SET last = ? WHERE name = 'decisions'", (last + len(rows),))

    def record_cost_fit(self, t: float, alpha: float, beta: float, gamma: float, rows: int) -> None:
        self._write("a cost fit", lambda: self._db.execute("INSERT INTO cost_fits VALUES (?,?,?,?,?)",
                                                           (t, alpha, beta, gamma, rows)))

    def record_guest_event(self, t: float, guest: str, uuid: str | None, operation: str,
                           vfs: Sequence[str], source: str) -> int:
        def work() -> int:
            cur = self._db.execute(
                "INSERT INTO guest_events (t, guest, uuid, operation, vfs, source) VALUES (?,?,?,?,?,?)",
                (t, guest, uuid, operation, " ".join(vfs), source),
            )
            return int(cur.lastrowid or 0)

        return int(self._write("a guest event", work) or 0)

    def start_run(self, t: float, backend: str, detail: str) -> int:
        def work() -> int:
            cur = self._db.execute("INSERT INTO runs (started, backend, detail) VALUES (?,?,?)", (t, backend, detail))
            return int(cur.lastrowid or 0)

        return int(self._write("the run record", work) or 0)

    def stop_run(self, run_id: int, t: float, end_state: str = "clean") -> None:
        self._write("the run record", lambda: self._db.execute(
            "UPDATE runs SET stopped = ?, end_state = ? WHERE id = ?", (t, end_state, run_id)))

    def unfinished_runs(self) -> list[tuple[int, float]]:
        """Runs that never recorded a stop: (id, started), oldest first."""
        return [(int(r["id"]), float(r["started"]))
                for r in self._rows("SELECT id, started FROM runs WHERE stopped IS NULL ORDER BY id")]

    # -- retention ------------------------------------------------------------

    def prune(self, before: float) -> int:
        """Drop raw samples older than `before` (rolled up to 1-minute rows first), all of them."""
        n = 0
        while True:
            done = self._roll_up_and_drop(before)
            n += done
            if done == 0:
                return n

    def _oldest(self, table: str) -> float | None:
        """The oldest t of a table clustered on (target, t): the first row of each target's range."""
        row = self._db.execute(
            f"SELECT MIN((SELECT t FROM {table} WHERE {CLUSTER_KEY[table]} = n.id ORDER BY t LIMIT 1)) FROM targets n"
        ).fetchone()
        return None if row[0] is None else float(row[0])

    def _batch_end(self, table: str, before: float | None) -> float | None:
        """An end time (whole minutes from the oldest row, at most `before`) such that the rows
        older than it are about batch_rows: the first minute's count sets how many minutes."""
        first = self._oldest(table)
        if first is None or (before is not None and first >= before):
            return None
        minute = (first // 60) * 60
        per_minute: int = self._db.execute(
            f"SELECT COUNT(*) FROM {table} WHERE {CLUSTER_KEY[table]} IN (SELECT id FROM targets) AND t < ?",
            (minute + 60,)).fetchone()[0]
        end = float(minute + 60 * max(1, self.retention.batch_rows // max(1, per_minute)))
        return end if before is None else min(before, end)

    def _roll_up_and_drop(self, before: float) -> int:
        """One batch of the oldest raw samples before `before` (whole minutes only, so a minute
        is rolled up from all its rows at once): averaged into samples_1m, then deleted."""
        cutoff = (before // 60) * 60

        def work() -> int:
            upto = self._batch_end("samples", cutoff)
            if upto is None:
                return 0
            # The bare itr column takes the value of the minute's last row (SQLite: one max()).
            self._db.execute(
                "INSERT OR REPLACE INTO samples_1m SELECT s.vf, (CAST(s.t / 60 AS INTEGER) + 1) * 60, SUM(s.dt),"
                " AVG(s.rx_pps), AVG(s.rx_bps), AVG(s.tx_pps), AVG(s.tx_bps), AVG(s.interrupts_per_s), s.itr,"
                " AVG(s.guest_cpu), SUM(s.fresh) = COUNT(*), MAX(s.t)"
                " FROM samples s WHERE s.vf IN (SELECT id FROM targets) AND s.t < ? GROUP BY s.vf, CAST(s.t / 60 AS INTEGER)",
                (upto,))
            return int(self._db.execute("DELETE FROM samples WHERE vf IN (SELECT id FROM targets) AND t < ?",
                                        (upto,)).rowcount)

        return int(self._write("retention", work) or 0)

    def maintain(self, now: float) -> int:
        """Retention in small batches within one time budget; called from the tick, so it never
        holds the writer for long. Returns rows removed; the next call goes on where this stopped."""
        r = self.retention
        deadline = time.monotonic() + r.budget_s
        removed = 0
        steps: list[Callable[[], int]] = [
            lambda: self._roll_up_and_drop(now - r.raw_s),
            lambda: self._drop_series_head("pf_samples", now - r.raw_s),
            lambda: self._drop_series_head("samples_1m", now - r.rollup_s),
            lambda: self._drop_head("decisions", "id", now - r.rollup_s),
            lambda: self._drop_head("guest_events", "id", now - r.rollup_s),
            lambda: self._drop_head("cost_fits", "rowid", now - r.rollup_s),
        ]
        for step in steps:
            while time.monotonic() < deadline:
                n = step()
                removed += n
                if n == 0:
                    break
        while self.live_bytes() > r.max_bytes and time.monotonic() < deadline:
            n = self._drop_oldest()
            removed += n
            if n == 0:
                break
        if not self._memory and time.monotonic() < deadline:
            self._write("retention", lambda: self._db.execute("PRAGMA incremental_vacuum(2000)").fetchall())
        return removed

    def _drop_head(self, table: str, key: str, before: float | None) -> int:
        """Delete up to batch_rows of the table's first rows (by id: time order) older than
        `before` (None: whatever their age). Cheap: the head is found by the key, not a scan."""
        age = "" if before is None else " AND t < ?"
        args: tuple[Any, ...] = (self.retention.batch_rows,) + (() if before is None else (before,))
        return self._batch(f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM {table} ORDER BY {key} LIMIT ?)"
                           f"{age}", args)

    def _drop_series_head(self, table: str, before: float | None) -> int:
        """Delete about batch_rows of the oldest rows of a (target, t) table older than `before`
        (None: whatever their age): a range at the front of each target's rows."""
        def work() -> int:
            upto = self._batch_end(table, before)
            if upto is None:
                return 0
            return int(self._db.execute(
                f"DELETE FROM {table} WHERE {CLUSTER_KEY[table]} IN (SELECT id FROM targets) AND t < ?",
                (upto,)).rowcount)

        return int(self._write("retention", work) or 0)

    def _batch(self, sql: str, args: Sequence[Any]) -> int:
        result = self._write("retention", lambda: self._db.execute(sql, args).rowcount)
        return int(result or 0)

    def _drop_oldest(self) -> int:
        """Over the size cap: the head of whichever history table starts earliest."""
        heads: list[tuple[float, str]] = []
        with self._lock:
            for table in ("samples_1m", "samples", "pf_samples"):
                first = self._oldest(table)
                if first is not None:
                    heads.append((first, table))
            for table, key in (("decisions", "id"), ("guest_events", "id")):
                row = self._db.execute(f"SELECT t FROM {table} ORDER BY {key} LIMIT 1").fetchone()
                if row is not None:
                    heads.append((float(row[0]), table))
        if not heads:
            return 0
        first, table = min(heads)
        if table == "samples":
            # Raw samples still roll up: the minutes they cover stay in the history.
            return self._roll_up_and_drop(first + 120.0)
        if table in CLUSTER_KEY:
            return self._drop_series_head(table, None)
        return self._drop_head(table, "id", None)

    def live_bytes(self) -> int:
        page, count, free = (self._rows(f"PRAGMA {p}")[0] for p in ("page_size", "page_count", "freelist_count"))
        return int((list(count.values())[0] - list(free.values())[0]) * list(page.values())[0])

    # -- reads --------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
            con.execute("PRAGMA query_only=1")
            self._local.con = con
        return con

    def _tuples(self, sql: str, args: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows as tuples: the cheapest form SQLite's module hands out."""
        if self._memory or threading.current_thread() is threading.main_thread():
            with self._lock:
                cur = self._db.cursor()
                cur.row_factory = None
                rows = cur.execute(sql, args).fetchall()
        else:
            cur = self._reader().execute(sql, args)
            rows = cur.fetchall()
        return [c[0] for c in cur.description], rows


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
