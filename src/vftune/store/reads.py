"""The history's queries, over whichever connection reads: the agent's Store (its API threads
each read through their own connection) or a page worker's read-only one (store/pages.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SAMPLE_COLUMNS = "t, dt, rx_pps, rx_bps, tx_pps, tx_bps, interrupts_per_s, itr, guest_cpu, fresh"
SAMPLE_NAMES = tuple(c.strip() for c in SAMPLE_COLUMNS.split(","))
assert SAMPLE_NAMES[0] == "t" and SAMPLE_NAMES[-1] == "fresh", "sample_rows' callers index them"
TABLES = frozenset({"samples", "samples_1m", "pf_samples", "decisions", "vfs", "pfs", "runs", "cost_fits",
                    "guest_events", "journal", "targets"})


def sample_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """A sample_rows() tuple as the API documents a sample: fresh a bool."""
    out = dict(zip(SAMPLE_NAMES, row))
    out["fresh"] = bool(row[-1])
    return out


class Reads:
    """Pages of samples and decisions, events, counts: each a range of one clustered table."""

    def _tuples(self, sql: str, args: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        raise NotImplementedError

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        names, rows = self._tuples(sql, args)
        return [dict(zip(names, r)) for r in rows]

    def sample_rows(self, pci: str, since: float, until: float, limit: int,
                    exclusive: bool = False) -> list[tuple[Any, ...]]:
        """samples() as SQLite gives them: tuples of SAMPLE_NAMES' values in that order (fresh
        an int), oldest first. A page encodes these without a dict per row (store/pages.py)."""
        op = "<" if exclusive else "<="
        vf = "(SELECT id FROM targets WHERE name = ?)"
        _, rows = self._tuples(
            f"SELECT {SAMPLE_COLUMNS} FROM samples WHERE vf = {vf} AND t >= ? AND t {op} ? ORDER BY t DESC LIMIT ?",
            (pci, since, until, limit),
        )
        if len(rows) < limit:
            older = rows[-1][0] if rows else until
            _, rolled = self._tuples(
                f"SELECT {SAMPLE_COLUMNS} FROM samples_1m WHERE vf = {vf} AND t >= ?"
                f" AND t {'<' if exclusive and not rows else '<='} ?"
                " ORDER BY t DESC LIMIT ?", (pci, since, older, limit - len(rows)))
            rows.extend(rolled)
        return rows[::-1]

    def samples(self, pci: str, since: float, until: float, limit: int,
                exclusive: bool = False) -> list[dict[str, Any]]:
        """The newest `limit` samples of the window, oldest first: raw rows, then 1-minute rows
        for the part of the window older than the raw ones. Each is a range of the VF's rows."""
        return [sample_dict(r) for r in self.sample_rows(pci, since, until, limit, exclusive)]

    def history_page(self, pci: str, since: float, until: float, limit: int,
                     exclusive: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float | None]:
        """One page of a VF's history: its newest `limit` samples of the window and the decisions
        of the time those samples span (at most `limit`), each oldest first, and the time the next
        page starts below (None on the last page). Paging on by that time gives every sample and
        every decision once."""
        rows, decisions, older = self.history_page_rows(pci, since, until, limit, exclusive)
        return [sample_dict(r) for r in rows], decisions, older

    def history_page_rows(self, pci: str, since: float, until: float, limit: int, exclusive: bool = False,
                          ) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]], float | None]:
        """history_page() with the samples as sample_rows() gives them."""
        samples = self.sample_rows(pci, since, until, limit, exclusive)
        more = len(samples) == limit
        start = samples[0][0] if more else since
        decisions = self.decisions(pci, start, until, limit, exclusive=exclusive)
        if len(decisions) == limit:
            # More decisions than a page in the samples' span: the page ends at the oldest one
            # kept, with every decision of that instant (the next page starts below it).
            oldest = decisions[0]
            if oldest["t"] > start:
                start, more = oldest["t"], True
                samples = [s for s in samples if s[0] >= start]
            decisions = [d for d in self.decisions(pci, oldest["t"], oldest["t"], 2**31 - 1)
                         if d["id"] < oldest["id"]] + decisions
        return samples, decisions, start if more else None

    def decisions(
        self, target: str | None, since: float, until: float, limit: int, before_id: int | None = None,
        exclusive: bool = False,
    ) -> list[dict[str, Any]]:
        """The newest `limit` decisions of the window (before `until` when exclusive), oldest
        first. One target: a range of its rows, newest first; every target: the id index backwards."""
        columns = "d.id, d.t, {} AS target, d.setting, d.old, d.requested, d.applied, d.ok, d.reason, d.error"
        args: list[float | str | int] = []
        if target is not None:
            source = f"SELECT {columns.format('?')} FROM decisions d WHERE d.target = (SELECT id FROM targets WHERE name = ?)"
            args += [target, target]
            order = "d.t DESC, d.id DESC"
        else:
            source = f"SELECT {columns.format('n.name')} FROM decisions d JOIN targets n ON n.id = d.target WHERE 1"
            order = "d.id DESC"
        where = f" AND d.t >= ? AND d.t {'<' if exclusive else '<='} ?"
        args += [since, until]
        if before_id is not None:
            where += " AND d.id < ?"
            args.append(before_id)
        rows = self._rows(f"{source}{where} ORDER BY {order} LIMIT ?", (*args, limit))
        for r in rows:
            r["ok"] = bool(r["ok"])
        return rows[::-1]

    def guest_events(self, since: float, until: float, limit: int, before_id: int | None = None) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT * FROM guest_events WHERE t >= ? AND t <= ? AND id < ? ORDER BY id DESC LIMIT ?",
            (since, until, before_id if before_id is not None else 2**62, limit),
        )
        for r in rows:
            r["vfs"] = r["vfs"].split()
        return rows[::-1]

    def latest_cost_fit(self) -> dict[str, Any] | None:
        rows = self._rows("SELECT * FROM cost_fits ORDER BY t DESC LIMIT 1")
        return rows[0] if rows else None

    def count(self, table: str) -> int:
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        return int(self._rows(f"SELECT COUNT(*) AS n FROM {table}")[0]["n"])


class History(Reads):
    """The history as the API uses it: the reads, the file, why recording stopped (a full disk),
    and a guest event's record. The agent's Store is one; the API's process has its own
    (api/process.py), which reads the file itself and asks the agent to write."""

    path: Path
    degraded: str | None = None

    @property
    def on_disk(self) -> bool:
        """A file other processes can open (not ":memory:")."""
        return True

    def record_guest_event(self, t: float, guest: str, uuid: str | None, operation: str,
                           vfs: Sequence[str], source: str) -> int:
        raise NotImplementedError


class ReadOnly(Reads):
    """The history file opened for queries only, by a process that never writes it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._con = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        self._con.execute("PRAGMA query_only=1")

    def _tuples(self, sql: str, args: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        cur = self._con.execute(sql, args)
        rows = cur.fetchall()
        return [c[0] for c in cur.description], rows

    def close(self) -> None:
        self._con.close()
