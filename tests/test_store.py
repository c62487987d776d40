"""The SQLite history: migrations, WAL, one transaction per tick, retention."""

import sqlite3

import pytest

from vftune.model import Decision, Guest, Inventory, PfInfo, PfSample, VfInfo, VfSample
from vftune.store.db import SCHEMA_VERSION, Store, StoreError, check_writable


def _sample(pci: str, t: float, rx_bps: float = 1e9) -> VfSample:
    return VfSample(pci=pci, pf="enp3s0f0", t=t, dt=1.0, rx_pps=1000.0, rx_bps=rx_bps, tx_pps=10.0,
                    tx_bps=1e5, interrupts_per_s=20000.0, interrupts=20000, itr=20000, guest_cpu=0.5)


def test_new_file_is_wal_and_current_schema(tmp_path):
    store = Store(tmp_path / "h.db")
    assert store.schema_version == SCHEMA_VERSION
    mode = sqlite3.connect(tmp_path / "h.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_old_file_is_migrated_forward_and_keeps_its_rows(tmp_path):
    from vftune.store import db as dbmod

    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript(dbmod.MIGRATIONS[0] + "\nPRAGMA user_version = 1;")
    con.execute("INSERT INTO decisions (t, target, setting, ok, reason) VALUES (1, 'x', 'itr', 1, 'kept')")
    con.commit()
    con.close()
    store = Store(path)
    assert store.schema_version == SCHEMA_VERSION
    assert [d["reason"] for d in store.decisions(None, 0, 10, 10)] == ["kept"]
    assert store.latest_cost_fit() is None  # the table from step 2 exists


def test_newer_schema_is_refused_with_its_version(tmp_path):
    path = tmp_path / "new.db"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    con.close()
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 5}"):
        Store(path)


def test_tick_history_and_decisions_round_trip(tmp_path):
    store = Store(tmp_path / "h.db")
    inv = Inventory(pfs=(PfInfo("enp3s0f0", "0000:03:00.0", 0x10FB, "ixgbe", 1, 63, (
        VfInfo("enp3s0f0", 0, "0000:03:10.0", "vfio-pci", Guest("vm1", "u-1")),)),))
    store.record_inventory(inv, 100.0)
    for t in (101.0, 102.0, 103.0):
        store.record_tick(t, [_sample("0000:03:10.0", t, rx_bps=t)],
                          [PfSample("enp3s0f0", t, 1.0, 5.0, 50.0, "napi")],
                          [Decision(t, "0000:03:10.0", "itr", 0, 20000, 20000, True, f"probe at {t}")])
    rows = store.samples("0000:03:10.0", 101.5, 103.0, 10)
    assert [r["t"] for r in rows] == [102.0, 103.0]
    assert rows[0]["rx_bps"] == 102.0 and rows[0]["fresh"] is True
    # limit keeps the newest rows of the window, oldest first
    assert [r["t"] for r in store.samples("0000:03:10.0", 0, 1e9, 2)] == [102.0, 103.0]
    decisions = store.decisions("0000:03:10.0", 0, 1e9, 10)
    assert [d["reason"] for d in decisions] == ["probe at 101.0", "probe at 102.0", "probe at 103.0"]
    assert decisions[0]["old"] == "0" and decisions[0]["applied"] == "20000"


def _pages(store, pci, limit):
    """Follow a VF's history pages to the end, as a client following next_cursor does."""
    pages, until, exclusive = [], 1e9, False
    while True:
        samples, decisions, older = store.history_page(pci, 0, until, limit, exclusive)
        pages.append(([r["t"] for r in samples], [d["id"] for d in decisions], older))
        if older is None:
            return pages
        until, exclusive = older, True


def test_history_pages_carry_the_decisions_of_their_own_span_each_once(tmp_path):
    store = Store(tmp_path / "h.db")
    vf = "0000:03:10.0"
    # Ten ticks; a burst of six decisions at t=104 (more than a page), two at t=107.
    for t in range(100, 110):
        n = {104: 6, 107: 2}.get(t, 1 if t % 3 == 0 else 0)
        store.record_tick(float(t), [_sample(vf, float(t))], [],
                          [Decision(float(t), vf, "itr", 0, 20000 + k, 20000 + k, True, f"d{t}.{k}") for k in range(n)])
    every = [d["id"] for d in store.decisions(vf, 0, 1e9, 1000)]
    pages = _pages(store, vf, 4)
    assert [t for p in reversed(pages) for t in p[0]] == [float(t) for t in range(100, 110)], "each sample once"
    assert [i for p in reversed(pages) for i in p[1]] == every, "each decision once, in order"
    for samples, ids, older in pages:
        times = {d["id"]: d["t"] for d in store.decisions(vf, 0, 1e9, 1000)}
        assert older is None or all(t >= older for t in samples + [times[i] for i in ids]), "the page's own span"
    # The burst is one page's: its six decisions stay together although a page holds four.
    assert any(len([i for i in ids if store.decisions(vf, 104, 104, 100)[0]["id"] <= i]) >= 6 for _, ids, _ in pages)


def test_prune_rolls_old_samples_up_to_minutes_and_keeps_decisions(tmp_path):
    store = Store(tmp_path / "h.db")
    for t in range(600):
        store.record_tick(float(t), [_sample("0000:03:10.0", t, rx_bps=1e9 + (t % 60))], [],
                          [Decision(t, "0000:03:10.0", "itr", 0, 1, 1, True, "r")] if t % 100 == 0 else [])
    assert store.prune(330.0) == 300  # whole minutes only: 0..299 s
    assert store.count("samples") == 300 and store.count("samples_1m") == 5
    assert store.count("decisions") == 6
    # A window reaching past the raw rows continues with the minute rows, oldest first.
    rows = store.samples("0000:03:10.0", 0, 1e9, 1000)
    assert [r["t"] for r in rows[:6]] == [60.0, 120.0, 180.0, 240.0, 300.0, 300.0]
    assert rows[0]["dt"] == 60.0 and rows[0]["rx_bps"] == pytest.approx(1e9 + 29.5)


@pytest.mark.parametrize("make_path, message", [
    (lambda p: p / "missing-dir" / "h.db", "does not exist"),
    (lambda p: p, "is a directory"),
])
def test_unusable_db_paths_are_named(tmp_path, make_path, message):
    path = make_path(tmp_path)
    problem = check_writable(path)
    assert problem is not None and message in problem and str(path) in problem


def test_db_that_sqlite_cannot_create_is_a_store_error(tmp_path):
    (tmp_path / "ro").mkdir()
    target = tmp_path / "ro" / "h.db"
    target.mkdir()  # a directory where the file should be: sqlite cannot open it
    with pytest.raises(StoreError, match=str(target)):
        Store(target)


def test_a_full_disk_stops_recording_not_the_agent_and_says_why(tmp_path, caplog):
    """SQLite's max_page_count makes the file 'full' as a full filesystem would (SQLITE_FULL)."""
    store = Store(tmp_path / "h.db")
    store.record_tick(1.0, [_sample("0000:03:10.0", 1.0)], [], [])
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    big = [_sample(f"0000:03:{n // 8:02x}.{n % 8}", 2.0) for n in range(2000)]
    store.record_tick(2.0, big, [], [])  # does not raise
    assert store.degraded is not None and "full" in store.degraded
    store.record_tick(3.0, big, [], [])  # within the retry minute: not even tried
    assert [r["t"] for r in store.samples("0000:03:10.0", 0, 10, 10)] == [1.0], "what was recorded stays readable"
    assert sum("history not recorded" in r.getMessage() for r in caplog.records) == 1, "said once, not per tick"
    store._db.execute("PRAGMA max_page_count = 1000000")
    store._retry_at = 0.0  # the minute has passed
    store.record_tick(4.0, [_sample("0000:03:10.0", 4.0)], [], [])
    assert store.degraded is None


def test_retention_covers_events_and_decisions_and_the_size_cap_drops_oldest_first(tmp_path):
    from vftune.store.db import Retention

    store = Store(tmp_path / "h.db", Retention(raw_s=600, rollup_s=3600, batch_rows=100, budget_s=5.0))
    for t in range(0, 7200, 10):
        store.record_tick(float(t), [_sample("0000:03:10.0", t)], [],
                          [Decision(t, "0000:03:10.0", "itr", 0, 1, 1, True, "r")])
        store.record_guest_event(float(t), "vm1", None, "started", [], "test")
    store.maintain(7200.0)
    assert store.count("decisions") == store.count("guest_events") == 360  # the last hour
    assert min(r["t"] for r in store.samples("0000:03:10.0", 0, 1e9, 1000)) >= 3600
    raw = store.samples("0000:03:10.0", 6601, 1e9, 1000)
    assert all(r["dt"] == 1.0 for r in raw), "the raw window keeps raw rows"
    before = store.live_bytes()
    cap = before - 16 * 1024
    capped = Store(tmp_path / "h.db", Retention(raw_s=1e9, rollup_s=1e9, max_bytes=cap, batch_rows=20, budget_s=5.0))
    capped.maintain(7200.0)
    assert capped.live_bytes() <= cap
    # The oldest rows went, whichever table they were in; the newest stayed.
    assert capped.count("decisions") + capped.count("guest_events") + capped.count("samples_1m") < 360 + 360 + 50
    assert max(r["t"] for r in capped.samples("0000:03:10.0", 0, 1e9, 1000)) == 7190
    assert max(d["t"] for d in capped.decisions(None, 0, 1e9, 1000)) == 7190


def _old_schema_file(path, version: int = 5) -> None:
    """A history file as the previous vftune left it: its migrations (append-only, so these are
    exactly the DDL it ran), with rows in its layout: PCI text on every row, rowid tables."""
    from vftune.store import db as dbmod

    con = sqlite3.connect(path)
    con.executescript("".join(dbmod.MIGRATIONS[:version]) + f"\nPRAGMA user_version = {version};")
    for t in range(100, 400):
        con.execute("INSERT INTO samples VALUES (?, '0000:03:10.0', 1.0, 1000.5, ?, 10.0, 1e5, 20000.0, 20000, 0.5, 1)",
                    (t + 0.25, 1e9 + t))
    con.execute("INSERT INTO samples VALUES (300.25, '0000:03:10.0', 1.0, 1.0, 2.0, 3.0, 4.0, NULL, 0, NULL, 0)")
    con.execute("INSERT INTO samples_1m VALUES (60, '0000:03:10.0', 60.0, 1.0, 2.0, 3.0, 4.0, NULL, 8000, NULL, 1, 59.5)")
    con.execute("INSERT INTO pf_samples VALUES (100.0, 'enp3s0f0', 1.0, 5.0, 50.0, 'napi')")
    for n in range(5):
        con.execute("INSERT INTO decisions (t, target, setting, old, requested, applied, ok, reason)"
                    " VALUES (?, '0000:03:10.0', 'itr', '0', '20000', '20000', 1, ?)", (100.0 + n, f"probe {n}"))
    con.execute("DELETE FROM decisions WHERE reason = 'probe 4'")  # the sequence stays at 5
    con.commit()
    con.close()


def test_a_file_of_the_previous_schema_is_converted_at_open_and_serves_the_same_history(tmp_path):
    path = tmp_path / "old.db"
    _old_schema_file(path)
    store = Store(path)
    assert store.schema_version == SCHEMA_VERSION
    rows = store.samples("0000:03:10.0", 0, 1e9, 1000)
    # 300 raw rows (the duplicate time kept once: the later row), then the one minute row first.
    assert len(rows) == 301 and rows[0]["t"] == 60 and rows[0]["itr"] == 8000 and rows[0]["interrupts_per_s"] is None
    assert rows[1]["t"] == 100.25 and rows[1]["rx_bps"] == 1e9 + 100 and rows[1]["fresh"] is True
    assert [d["id"] for d in store.decisions("0000:03:10.0", 0, 1e9, 10)] == [1, 2, 3, 4]
    assert [d["target"] for d in store.decisions(None, 0, 1e9, 10)] == ["0000:03:10.0"] * 4
    store.record_decisions([Decision(500.0, "0000:03:10.0", "itr", 1, 2, 2, True, "after")])
    assert store.decisions(None, 0, 1e9, 10)[-1]["id"] == 6, "ids keep growing past the old sequence"
    from vftune.store.series import pf_series, vf_series

    assert vf_series(store, 0, 1e9, 60)["0000:03:10.0"][-1]["t"] == 399.25
    assert pf_series(store, 0, 1e9, 60)["enp3s0f0"][0]["rx_pps"] == 5.0
    # The old tables and their indexes are gone, the space is reusable.
    names = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_schema")}
    assert not {"samples_t", "samples_pci_t", "decisions_target_t", "samples_1m_pci_t"} & names


def test_decision_ids_never_go_back_even_when_retention_removed_every_row(tmp_path):
    from vftune.store.db import Retention

    store = Store(tmp_path / "h.db", Retention(rollup_s=100, budget_s=5.0))
    store.record_decisions([Decision(float(t), "enp3s0f0", "mode", "napi", "de", "de", True, "r") for t in range(3)])
    store.maintain(1000.0)
    assert store.count("decisions") == 0
    store.record_decisions([Decision(1000.0, "enp3s0f0", "mode", "de", "napi", "napi", True, "r")])
    assert [d["id"] for d in store.decisions(None, 0, 1e9, 10)] == [4]


def test_two_samples_of_a_vf_at_the_same_time_keep_the_later_one(tmp_path):
    store = Store(tmp_path / "h.db")
    store.record_tick(5.0, [_sample("0000:03:10.0", 5.0, rx_bps=1.0)], [], [])
    store.record_tick(5.0, [_sample("0000:03:10.0", 5.0, rx_bps=2.0)], [], [])
    assert [r["rx_bps"] for r in store.samples("0000:03:10.0", 0, 10, 10)] == [2.0]


def _plans(store: Store, run) -> dict[str, list[str]]:
    """EXPLAIN QUERY PLAN of every statement `run` makes the store execute on its connection."""
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    try:
        run()
    finally:
        store._db.set_trace_callback(None)
    return {sql: [r[3] for r in store._db.execute("EXPLAIN QUERY PLAN " + sql)]
            for sql in dict.fromkeys(seen) if sql.lstrip().upper().startswith(("SELECT", "DELETE", "INSERT"))}


def test_history_pages_and_retention_are_range_scans_not_table_scans(tmp_path):
    from vftune.store.db import Retention

    store = Store(tmp_path / "h.db", Retention(raw_s=120, rollup_s=600, batch_rows=50, budget_s=5.0))
    vfs = [f"0000:03:10.{n}" for n in range(4)]
    for t in range(0, 900, 2):
        store.record_tick(float(t), [_sample(pci, t) for pci in vfs], [PfSample("enp3s0f0", t, 1.0, 5.0, 50.0, "napi")],
                          [Decision(t, vfs[0], "itr", 0, 1, 1, True, "r")])
    pages = _plans(store, lambda: (store.samples(vfs[1], 0, 1e9, 1000), store.decisions(vfs[0], 0, 1e9, 1000),
                                   store.decisions(None, 0, 1e9, 100, before_id=400)))
    plan = "\n".join(line for lines in pages.values() for line in lines)
    assert "SEARCH samples USING PRIMARY KEY (vf=? AND t>? AND t<?)" in plan
    assert "SEARCH samples_1m USING PRIMARY KEY (vf=? AND t>? AND t<?)" in plan
    assert "SEARCH d USING PRIMARY KEY (target=? AND t>? AND t<?)" in plan
    assert "SEARCH d USING INDEX decisions_id (id<?)" in plan or "SEARCH d USING COVERING INDEX decisions_id (id<?)" in plan
    kept = _plans(store, lambda: store.maintain(900.0))
    assert kept, "retention ran"
    for sql, lines in {**pages, **kept}.items():
        # A whole-table pass over a history table (a LIMIT over an id index is a head read: fine).
        scans = [x for x in lines if x.startswith("SCAN") and "INDEX" not in x
                 and x.split()[1] in {"samples", "samples_1m", "pf_samples", "decisions", "s", "d"}]
        assert not scans, (sql, lines)
        assert "USE TEMP B-TREE FOR ORDER BY" not in lines, (sql, lines)
    assert store.count("samples") and min(r["t"] for r in store.samples(vfs[0], 0, 1e9, 1000)) >= 300
