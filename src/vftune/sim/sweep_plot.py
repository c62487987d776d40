"""`vftune sim sweep --plot FILE.svg`: throughput and CPU against ITR, one SVG file.

Two charts on a shared log ITR axis: the guest VFs' throughput (bits/s) and the share of the
host's cores spent on network work, the sweep's best ITR shaded in both, so the trade between
the two is read off one picture.
"""

from __future__ import annotations

from typing import Any

from vftune.svg import Axis, Band, Series, chart, document, si

WIDTH = 720


def sweep_svg(results: list[dict[str, Any]], seed: int) -> str:
    """Every sweep's pair of charts, stacked in one SVG document."""
    charts: list[str] = []
    for result in results:
        charts += _sweep_charts(result, f"{result['scenario']} (seed {seed})")
    names = ", ".join(r["scenario"] for r in results)
    return document(charts, WIDTH, f"{names}: throughput and CPU against ITR")


def _sweep_charts(result: dict[str, Any], title: str) -> list[str]:
    points = result["points"]
    best = result.get("best_itr")
    bands = [Band(best / 1.03, best * 1.03, f"best ITR {best}/s", color="#cfe8d8")] if best else []
    x = Axis("ITR, interrupts/s (log)", log=True)
    throughput = chart([Series("throughput", [(p["itr"], p["throughput_bps"]) for p in points], color="#009E73")],
                       x, Axis("bit/s", fmt=lambda v: si(v)),
                       f"{title}: throughput (rx + tx) against ITR; shaded: best {best}/s", width=WIDTH, height=260,
                       bands=bands, css_class="chart sweep-throughput")
    cpu = chart([Series("CPU", [(p["itr"], p["cpu"] * 100) for p in points], color="#D55E00")],
                x, Axis("% of host cores", fmt=lambda v: f"{v:.3g}%"),
                f"{title}: CPU on network work against ITR", width=WIDTH, height=260, bands=bands,
                css_class="chart sweep-cpu")
    return [throughput, cpu]
