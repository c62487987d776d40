"""The status page's small rules: a gap where nothing was recorded, "adaptive" for an ITR of
none in the decisions, and a log axis that keeps its line off the frame with two ticks or more."""

from __future__ import annotations

import math
import re

from vftune.api.routers.page import _gapped, _setting_value
from vftune.svg import Axis, Series, chart


def test_a_stretch_without_rows_is_a_gap_not_a_line():
    rows = [{"t": float(t), "v": 1.0} for t in (0, 1, 2, 3, 60, 61, 62)]
    points = _gapped(rows, 1.0, lambda r: r["v"])
    gaps = [p for p in points if math.isnan(p[1])]
    assert len(gaps) == 1 and 3 < gaps[0][0] < 60
    # Regular rows a little further apart than a bucket (recorded each second, bucketed by 1.25 s): no gap.
    uneven = [{"t": t, "v": 2.0} for t in (0.0, 1.0, 3.0, 4.0, 5.0, 7.0, 8.0)]
    assert not any(math.isnan(y) for _, y in _gapped(uneven, 1.25, lambda r: r["v"]))
    # A value the host did not see (None) is a gap too.
    assert math.isnan(_gapped([{"t": 0.0, "v": None}], 1.0, lambda r: r["v"])[0][1])


def test_decisions_read_adaptive_for_an_itr_of_none():
    assert _setting_value("itr", None) == "adaptive"
    assert _setting_value("itr_confirmed", 0) == "adaptive"
    assert _setting_value("itr", 4103) == "4103"
    assert _setting_value("rx_mode", None) == "-" and _setting_value("rx_mode", "napi") == "napi"


def test_a_flat_itr_on_a_log_axis_sits_inside_the_frame_with_ticks():
    svg = chart([Series("ITR", [(float(x), 7398.0) for x in range(10)], step=True)], Axis("x"),
                Axis("interrupts/s", log=True), "ITR", width=300, height=160)
    frame = re.search(r'<rect x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)" fill="none"', svg)
    top, height = int(frame.group(2)), int(frame.group(4))
    ys = [float(y) for y in re.findall(r",([\d.]+)", re.search(r'points="([^"]+)"', svg).group(1))]
    assert all(top + 2 < y < top + height - 2 for y in ys)
    assert len(re.findall(r'text-anchor="end"', svg)) >= 2
