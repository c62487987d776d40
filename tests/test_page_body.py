"""A history page's bytes are what they were before pages were encoded from cached row texts:
the same JSON, to the byte, for the same store (awkward floats, NULLs, large integers, rows
replaced at the same time, minute rows, pages cut by decisions), cold cache or warm."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from vftune.model import Decision, VfSample
from vftune.store.db import Store
from vftune.store.pages import RowCache, vf_page_body
from vftune.store.reads import SAMPLE_COLUMNS

VF = "0000:03:10.0"
AWKWARD = [0.1, 0.2, 0.1 + 0.2, 1e-7, 1 / 3, 2 / 3, 1e16, 1.2345678901234567e17, 2.5e300, 5e-324, 0.0, -0.0,
           123456789.123456789, 9007199254740993.0, 1e15, 100.0, 3.0]


def _old_body(store: Store, head: dict[str, Any], pci: str, since: float, until: float, limit: int,
              exclusive: bool) -> bytes:
    """The page as it was built before the row cache, verbatim: a dict per row, then orjson."""
    op = "<" if exclusive else "<="
    vf = "(SELECT id FROM targets WHERE name = ?)"
    rows = store._rows(
        f"SELECT {SAMPLE_COLUMNS} FROM samples WHERE vf = {vf} AND t >= ? AND t {op} ? ORDER BY t DESC LIMIT ?",
        (pci, since, until, limit))
    if len(rows) < limit:
        older = rows[-1]["t"] if rows else until
        rows.extend(store._rows(
            f"SELECT {SAMPLE_COLUMNS} FROM samples_1m WHERE vf = {vf} AND t >= ?"
            f" AND t {'<' if exclusive and not rows else '<='} ? ORDER BY t DESC LIMIT ?",
            (pci, since, older, limit - len(rows))))
    for r in rows:
        r["fresh"] = bool(r["fresh"])
    samples = rows[::-1]
    more = len(samples) == limit
    start = samples[0]["t"] if more else since
    decisions = store.decisions(pci, start, until, limit, exclusive=exclusive)
    if len(decisions) == limit:
        oldest = decisions[0]
        if oldest["t"] > start:
            start, more = oldest["t"], True
            samples = [s for s in samples if s["t"] >= start]
        decisions = [d for d in store.decisions(pci, oldest["t"], oldest["t"], 2**31 - 1)
                     if d["id"] < oldest["id"]] + decisions
    return orjson.dumps({**head, "samples": samples, "decisions": decisions,
                         "next_cursor": repr(start) if more else None})


def _value(rng: random.Random) -> float:
    return rng.choice(AWKWARD) if rng.random() < 0.5 else rng.random() * 10 ** rng.randint(-9, 12)


def _seeded_store(path, seed: int) -> Store:
    rng = random.Random(seed)
    store = Store(path)
    for k in range(400):
        t = 1000.0 + k * rng.choice([1.0, 0.1, 1e-7 + 1, 0.3])
        sample = VfSample(
            pci=VF, pf="eth0", t=t, dt=rng.choice([1.0, 0.25, 0.1, 1e-7]), rx_pps=_value(rng), rx_bps=_value(rng),
            tx_pps=_value(rng), tx_bps=_value(rng), interrupts_per_s=None if rng.random() < 0.3 else _value(rng),
            interrupts=None, itr=rng.choice([0, 488, 8000, 2**40 + 1, 2**62]),
            guest_cpu=None if rng.random() < 0.3 else _value(rng), fresh=rng.random() < 0.7)
        decisions = [Decision(t, VF, "itr", rng.choice([0, "napi", None]), 20000 + j, 20000 + j, rng.random() < 0.9,
                              f"probe, {t!r}", error=None if rng.random() < 0.8 else "refused: x,y")
                     for j in range(rng.choice([0, 0, 0, 1, 3]))]
        store.record_tick(t, [sample], [], decisions)
        if rng.random() < 0.05:  # the same time again, other values: the later row replaces it
            store.record_tick(t, [sample.__class__(**{**sample.__dict__, "rx_pps": _value(rng)})], [], [])
    return store


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_history_pages_are_the_bytes_they_were_for_the_same_store(tmp_path, seed):
    store = _seeded_store(tmp_path / "h.db", seed)
    store.prune(1000.0 + 200)  # part of it as minute rows
    cache = RowCache(rows=150)  # small: pages turn its generations over
    for limit in (1, 7, 50, 1000):
        for _ in range(2):  # the second pass from a warm cache
            until, exclusive = 1e9, False
            while True:
                head = {"pci": VF, "since": 0.0, "until": 1e9}
                new = vf_page_body(store, head, VF, 0.0, until, limit, exclusive, cache)
                assert new == _old_body(store, head, VF, 0.0, until, limit, exclusive)
                cursor = orjson.loads(new)["next_cursor"]
                if cursor is None:
                    break
                until, exclusive = float(cursor), True
    assert vf_page_body(store, {"pci": "0000:03:10.1"}, "0000:03:10.1", 0.0, 1e9, 10, False, cache) == \
        _old_body(store, {"pci": "0000:03:10.1"}, "0000:03:10.1", 0.0, 1e9, 10, False)


def test_a_row_replaced_with_other_values_at_the_same_time_is_served_as_it_is_now(tmp_path):
    store = Store(tmp_path / "h.db")
    cache = RowCache()

    def sample(rx_pps: float) -> VfSample:
        return VfSample(VF, "eth0", 5.0, 1.0, rx_pps, 0.1, 0.0, 0.0, None, None, 8000, None, True)

    store.record_tick(5.0, [sample(1.0)], [], [])
    first = vf_page_body(store, {}, VF, 0.0, 10.0, 10, False, cache)
    store.record_tick(5.0, [sample(1e-7)], [], [])
    again = vf_page_body(store, {}, VF, 0.0, 10.0, 10, False, cache)
    assert orjson.loads(first)["samples"][0]["rx_pps"] == 1.0
    assert orjson.loads(again)["samples"][0]["rx_pps"] == 1e-7
    assert again == _old_body(store, {}, VF, 0.0, 10.0, 10, False)
