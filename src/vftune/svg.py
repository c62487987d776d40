"""Line charts as inline SVG text: the status page's history and `vftune sim sweep --plot`.

No JavaScript and nothing fetched: a chart is a <svg> element with its axes, tick labels, one
polyline per series and a legend, drawn from numbers on the server. Linear or log axes; a
series may be drawn as steps (an ITR holds until the next decision). Used by the API's page
and by the CLI, so it lives beside model.py and imports nothing from vftune.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

# Colour-blind-safe (Okabe-Ito) palette.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]  # (x, y); y may be NaN for a gap
    step: bool = False  # hold each value until the next point
    color: str | None = None


@dataclass(frozen=True)
class Band:
    """A shaded x range (the PF in NAPI, say), with a label for the legend."""

    start: float
    end: float
    label: str
    color: str = "#f2e6c9"


@dataclass
class Axis:
    label: str
    fmt: Callable[[float], str] = field(default=lambda v: si(v))
    log: bool = False
    lo: float | None = None  # fixed range, else from the data
    hi: float | None = None


def si(value: float, unit: str = "") -> str:
    """12345 -> "12.3k"; with a unit: "12.3 kb/s". Three significant digits."""
    if not math.isfinite(value):
        return "-"
    text = f"{value:.3g}"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            text = f"{value / scale:.3g}{prefix}"
            break
    return f"{text} {unit}" if unit else text


def _nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    ticks, v = [], start
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 per decade; finer where the range spans less than that gives two of."""
    for mantissas in ((1, 2, 5), (1, 1.5, 2, 3, 5, 7)):
        ticks = []
        for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
            for m in mantissas:
                v = m * 10.0**e
                if lo <= v <= hi:
                    ticks.append(v)
        if len(ticks) >= 2:
            return ticks
    return [lo, hi]  # a range within one step: its ends are labelled


class _Scale:
    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool) -> None:
        self.log = log
        if log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi <= lo:
            hi = lo + 1.0
        self.lo, self.hi, self.a, self.b = lo, hi, a, b

    def __call__(self, v: float) -> float:
        if self.log:
            v = math.log10(v)
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)


def _range(values: list[float], axis: Axis) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v) and (v > 0 or not axis.log)]
    lo = axis.lo if axis.lo is not None else (min(finite) if finite else 0.0)
    hi = axis.hi if axis.hi is not None else (max(finite) if finite else 1.0)
    if axis.log:
        lo = max(lo, 1e-12) if finite else 1.0
        hi = max(hi, lo * 10) if hi <= lo else hi
    elif axis.lo is None and lo > 0 and (hi - lo) < hi:
        lo = 0.0  # rates read best from zero
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    return lo, hi


def chart(
    series: Sequence[Series],
    x: Axis,
    y: Axis,
    title: str,
    width: int = 480,
    height: int = 200,
    bands: Sequence[Band] = (),
    css_class: str = "chart",
) -> str:
    """One chart as an <svg> element. Series without finite points leave a "no data" note."""
    left, right, top, bottom = 56, 12, 22, 40
    legend_rows = math.ceil(len(series) / 3) if len(series) > 1 else 0
    bottom += 14 * legend_rows
    pw, ph = width - left - right, height - top - bottom
    xs = [p[0] for s in series for p in s.points] + [v for b in bands for v in (b.start, b.end)]
    ys = [p[1] for s in series for p in s.points]
    x_lo, x_hi = _range(xs, x)
    y_lo, y_hi = _range(ys, y)
    if not y.log and y.hi is None:  # up to the next labelled line, so a plateau does not hug the frame
        t = _nice_ticks(y_lo, y_hi)
        if len(t) >= 2 and t[-1] < y_hi:
            y_hi = t[-1] + (t[1] - t[0])
    if y.log and y.lo is None and y.hi is None:  # a margin inside the frame: no line on its border
        y_lo, y_hi = y_lo / 1.6, y_hi * 1.6
    sx = _Scale(x_lo, x_hi, left, left + pw, x.log)
    sy = _Scale(y_lo, y_hi, top + ph, top, y.log)
    out = [f'<svg class="{css_class}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<title>{escape(title)}</title>',
           f'<text x="{left}" y="14" font-size="12" font-weight="bold">{escape(title)}</text>']
    for b in bands:
        x0, x1 = sx(max(b.start, x_lo)), sx(min(b.end, x_hi))
        if x1 > x0:
            out.append(f'<rect class="band" x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" height="{ph}" '
                       f'fill="{b.color}"><title>{escape(b.label)}</title></rect>')
    y_ticks = _log_ticks(y_lo, y_hi) if y.log else _nice_ticks(y_lo, y_hi)
    for v in y_ticks:
        py = sy(v)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py:.1f}" y2="{py:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 4}" y="{py + 4:.1f}" font-size="10" text-anchor="end">{escape(y.fmt(v))}</text>')
    x_ticks = _log_ticks(x_lo, x_hi) if x.log else _nice_ticks(x_lo, x_hi, 5)
    for v in x_ticks:
        px = sx(v)
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="#666"/>')
        out.append(f'<text x="{px:.1f}" y="{top + ph + 15}" font-size="10" text-anchor="middle">'
                   f'{escape(x.fmt(v))}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#666"/>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + 29}" font-size="10" text-anchor="middle">'
               f'{escape(x.label)}</text>')
    out.append(f'<text x="12" y="{top + ph / 2:.1f}" font-size="10" text-anchor="middle" '
               f'transform="rotate(-90 12 {top + ph / 2:.1f})">{escape(y.label)}</text>')
    drawn = 0
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        for run in _runs(s, x.log or False, y.log):
            pts = []
            for j, (px, py) in enumerate(run):
                if s.step and j:
                    pts.append(f"{sx(px):.1f},{sy(run[j - 1][1]):.1f}")
                pts.append(f"{sx(px):.1f},{sy(py):.1f}")
            out.append(f'<polyline class="series" data-series="{escape(s.name)}" points="{" ".join(pts)}" '
                       f'fill="none" stroke="{color}" stroke-width="1.5"/>')
            drawn += len(run)
        if len(series) > 1:
            lx = left + (i % 3) * (pw / 3)
            ly = top + ph + 42 + 14 * (i // 3)
            out.append(f'<rect x="{lx:.1f}" y="{ly - 8}" width="10" height="3" fill="{color}"/>'
                       f'<text x="{lx + 14:.1f}" y="{ly - 4}" font-size="10">{escape(s.name)}</text>')
    if not drawn:
        out.append(f'<text class="nodata" x="{left + pw / 2:.1f}" y="{top + ph / 2:.1f}" font-size="12" '
                   f'text-anchor="middle" fill="#999">no data yet</text>')
    out.append("</svg>")
    return "".join(out)


def _runs(s: Series, log_x: bool, log_y: bool) -> list[list[tuple[float, float]]]:
    """The series split at gaps (NaN, or non-positive values on a log axis)."""
    runs: list[list[tuple[float, float]]] = [[]]
    for px, py in s.points:
        ok = math.isfinite(px) and math.isfinite(py) and (px > 0 or not log_x) and (py > 0 or not log_y)
        if ok:
            runs[-1].append((px, py))
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def document(charts: Sequence[str], width: int, title: str) -> str:
    """Charts stacked into one standalone SVG file (for --plot)."""
    heights = [int(c.split('height="', 1)[1].split('"', 1)[0]) for c in charts]
    total = sum(heights) + 10 * len(charts)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
             f'viewBox="0 0 {width} {total}" font-family="sans-serif"><title>{escape(title)}</title>'
             f'<rect width="100%" height="100%" fill="white"/>']
    y = 0
    for c, h in zip(charts, heights):
        parts.append(f'<g transform="translate(0 {y})">{c}</g>')
        y += h + 10
    parts.append("</svg>")
    return "".join(parts)
