"""Charts drawn on the server: `vftune sim sweep --plot` and the chart primitive the page uses."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

from conftest import VFTUNE
from vftune.svg import Axis, Series, chart

NS = {"s": "http://www.w3.org/2000/svg"}


def _points(polyline) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in polyline.get("points").split()]


def test_sweep_plot_draws_throughput_and_cpu_against_itr(tmp_path):
    out = tmp_path / "sweep.svg"
    run = subprocess.run([*VFTUNE, "sim", "sweep", "--scenario", "paper-3vm", "--json", "--plot", str(out)],
                         capture_output=True, text=True, timeout=120, check=True)
    import json

    result = json.loads(run.stdout)
    root = ET.parse(out).getroot()  # well-formed, standalone
    charts = root.findall(".//s:svg", NS)
    assert [c.get("class") for c in charts] == ["chart sweep-throughput", "chart sweep-cpu"]
    for c in charts:
        (line,) = c.findall(".//s:polyline", NS)
        pts = _points(line)
        assert len(pts) == len(result["points"])
        assert all(b[0] > a[0] for a, b in zip(pts, pts[1:])), "ITR ascends left to right"
        assert c.findall(".//s:rect[@class='band']", NS), "the best ITR is marked"
    # SVG y grows downwards: the best ITR is drawn on the throughput line's plateau, within 2% of
    # the 198-px plot's height of its highest point (the sweep's best may trade a tie for less CPU).
    tp = _points(charts[0].find(".//s:polyline", NS))
    best_i = [p["itr"] for p in result["points"]].index(result["best_itr"])
    assert tp[best_i][1] <= min(y for _, y in tp) + 4


def test_sweep_plot_to_an_unwritable_path_is_one_line_and_exit_2(tmp_path):
    run = subprocess.run([*VFTUNE, "sim", "sweep", "--scenario", "paper-3vm", "--plot", str(tmp_path / "no/such.svg")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("vftune: --plot ")


def test_a_chart_without_data_says_so_and_log_axes_skip_zeros():
    empty = ET.fromstring(chart([Series("x", [])], Axis("t"), Axis("y"), "empty"))
    assert empty.find(".//s:text[@class='nodata']", NS) is not None
    gaps = ET.fromstring(chart([Series("itr", [(0, 20000), (1, 0), (2, 0), (3, 8000), (4, 9000)], step=True)],
                               Axis("t"), Axis("y", log=True), "itr"))
    runs = gaps.findall(".//s:polyline", NS)
    assert [len(_points(r)) for r in runs] == [1, 3], "an adaptive (0) stretch is a gap, steps hold the value"
