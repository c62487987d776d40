"""Read-only history for charts: the store's samples averaged into fixed time buckets.

One query per table over a window (the status page asks for the last hour), so a page costs
two queries however many VFs a host has, and a chart gets a few hundred points, not one per tick.
"""

from __future__ import annotations

from typing import Any

from vftune.store.db import Store


def vf_series(store: Store, since: float, until: float, bucket_s: float) -> dict[str, list[dict[str, Any]]]:
    """Per VF PCI address, oldest first: t (bucket end), itr (the last one set in the bucket; 0 =
    adaptive), throughput_bps (rx + tx), rx_bps, interrupts_per_s (None when the host saw none),
    guest_cpu."""
    rows = store._rows(
        # SQLite: with exactly one max() a bare column (itr) comes from the row holding the max.
        "SELECT pci, CAST((t - ?) / ? AS INTEGER) AS b, MAX(t) AS t, itr, AVG(rx_bps + tx_bps) AS throughput_bps,"
        " AVG(rx_bps) AS rx_bps, AVG(interrupts_per_s) AS interrupts_per_s, AVG(guest_cpu) AS guest_cpu"
        " FROM samples WHERE t >= ? AND t <= ? GROUP BY pci, b ORDER BY pci, b",
        (since, bucket_s, since, until),
    )
    return _grouped(rows, "pci")


def pf_series(store: Store, since: float, until: float, bucket_s: float) -> dict[str, list[dict[str, Any]]]:
    """Per PF name, oldest first: t, rx_pps, napi_share (the share of the bucket's samples in NAPI),
    mode (the last mode in force in the bucket)."""
    rows = store._rows(
        "SELECT pf, CAST((t - ?) / ? AS INTEGER) AS b, MAX(t) AS t, mode, AVG(rx_pps) AS rx_pps,"
        " AVG(mode = 'napi') AS napi_share FROM pf_samples WHERE t >= ? AND t <= ? GROUP BY pf, b ORDER BY pf, b",
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
