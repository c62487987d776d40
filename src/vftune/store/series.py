"""Read-only history for charts: the store's samples averaged into fixed time buckets.

One query per table over a window (the status page asks for the last hour), so a page costs
two queries however many VFs a host has, and a chart gets a few hundred points, not one per tick.
"""

from __future__ import annotations

from typing import Any

from vftune.store.reads import History


def vf_series(store: History, since: float, until: float, bucket_s: float) -> dict[str, list[dict[str, Any]]]:
    """Per VF PCI address, oldest first: t (bucket end), itr (the last one set in the bucket; 0 =
    adaptive), throughput_bps (rx + tx), rx_bps, interrupts_per_s (None when the host saw none),
    guest_cpu."""
    rows = store._rows(
        # SQLite: with exactly one max() a bare column (itr) comes from the row holding the max.
        "SELECT n.name AS pci, CAST((s.t - ?) / ? AS INTEGER) AS b, MAX(s.t) AS t, s.itr,"
        " AVG(s.rx_bps + s.tx_bps) AS throughput_bps, AVG(s.rx_bps) AS rx_bps,"
        " AVG(s.interrupts_per_s) AS interrupts_per_s, AVG(s.guest_cpu) AS guest_cpu"
        # Per VF a range of its rows (the table is clustered on (vf, t)).
        " FROM targets n JOIN samples s ON s.vf = n.id AND s.t >= ? AND s.t <= ? GROUP BY n.name, b ORDER BY n.name, b",
        (since, bucket_s, since, until),
    )
    return _grouped(rows, "pci")


def pf_series(store: History, since: float, until: float, bucket_s: float) -> dict[str, list[dict[str, Any]]]:
    """Per PF name, oldest first: t, rx_pps, napi_share (the share of the bucket's samples in NAPI),
    mode (the last mode in force in the bucket)."""
    rows = store._rows(
        "SELECT n.name AS pf, CAST((s.t - ?) / ? AS INTEGER) AS b, MAX(s.t) AS t, s.mode, AVG(s.rx_pps) AS rx_pps,"
        " AVG(s.mode = 'napi') AS napi_share FROM targets n JOIN pf_samples s ON s.pf = n.id AND s.t >= ? AND s.t <= ?"
        " GROUP BY n.name, b ORDER BY n.name, b",
        (since, bucket_s, since, until),
    )
    return _grouped(rows, "pf")


def _grouped(rows: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    """Rows by `key`, each without its key and bucket number; order kept."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r.pop(key), []).append(r)
        r.pop("b")
    return out
