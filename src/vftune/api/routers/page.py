"""The status page at `/` and one page per VF at `/vf/{pci}`: server-rendered HTML with inline
SVG charts.

`/`: what the set rates bought against the VFs' adaptive ITRs; per PF its receive rate over the
last hour with its NAPI periods shaded and the mode it runs now, and a table of its VFs (each
linking to its page); the latest decisions. `/vf/{pci}`: the VF's ITR, receive and transmit
throughput, interrupts and its guest's CPU over the hour, and its decisions. The VFs' charts are
on their own pages so that a host of 126 VFs keeps `/` small. No JavaScript, nothing fetched
from elsewhere (an air-gapped host shows it whole); `/` reloads itself every 30 s.
"""

from __future__ import annotations

import time
from html import escape
from typing import Any

from fastapi import APIRouter, Depends, Path
from fastapi.responses import HTMLResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vftune.api.deps import PCI_ADDRESS, AgentHandle, agent, store
from vftune.model import AgentView, PfView, VfView, VsAdaptive
from vftune.store.reads import History
from vftune.store.series import pf_series, vf_series
from vftune.svg import Axis, Band, Series, chart, si

router = APIRouter()

WINDOW_S = 3600.0  # the longest history shown
MIN_WINDOW_S = 300.0  # a young agent's charts span its life, but no less than this
POINTS = 240  # per chart at most: a bucket of 15 s over the hour

STYLE = """
body{font-family:system-ui,sans-serif;margin:1em 2em;color:#222;background:#fff}
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .3em;border-bottom:1px solid #ccc}
h3{font-size:.95em;margin:.8em 0 .2em}.muted{color:#666}.now{font-weight:bold;color:#0072B2}
table{border-collapse:collapse;font-size:.85em}td,th{padding:2px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}tr:nth-child(even){background:#f6f6f6}
.charts{display:flex;flex-wrap:wrap;gap:4px}svg.chart{font-family:system-ui,sans-serif;background:#fff}
nav a{margin-right:1em}
"""


def _minutes(span_s: float) -> Axis:
    return Axis("minutes ago", fmt=lambda v: f"{-v:.0f}", lo=-span_s / 60, hi=0.0)


def _x(t: float, now: float) -> float:
    return (t - now) / 60.0


def _bought_text(view: AgentView) -> str:
    if view.vs_adaptive is None:
        return "Bought against adaptive ITR: nothing measured yet (no VF holds a set rate measured on both sides)"
    return f"Bought against adaptive ITR: {view.vs_adaptive.text}"


def _bought(value: VsAdaptive | None) -> tuple[str, str]:
    """A VF's merit and CPU per Gb against its adaptive ITR, as table cells."""
    if value is None:
        return "-", "-"
    if value.merit == "response time":
        merit = f"{value.response_time_change * 100:+.0f}% response time"
    else:
        merit = f"{value.merit_change * 100:+.0f}% throughput"
    return merit, f"{value.cpu_per_gbit_change * 100:+.0f}%"


def _gapped(rows: list[dict[str, Any]], bucket_s: float, value: Any) -> list[tuple[float, float]]:
    """(t, value(row)) per row, with a gap (NaN) where rows are missing: no line across a time
    the agent recorded nothing (it was stopped, or the VF was away). Missing: more than three
    times the rows' usual spacing apart (a bucket, or the recording period when that is longer)."""
    steps = sorted(b["t"] - a["t"] for a, b in zip(rows, rows[1:]))
    usual = max(bucket_s, steps[len(steps) // 2] if steps else bucket_s)
    points: list[tuple[float, float]] = []
    last: float | None = None
    for r in rows:
        if last is not None and r["t"] - last > 3 * usual:
            points.append(((last + r["t"]) / 2, float("nan")))
        y = value(r)
        points.append((r["t"], float("nan") if y is None else float(y)))
        last = r["t"]
    return points


def _vf_phase(vf: VfView) -> str:
    if vf.state == "searching":
        probes, expected = vf.policy_state.get("probes"), vf.policy_state.get("expected_probes")
        if isinstance(probes, int) and isinstance(expected, int) and expected:
            return f"searching, step {min(probes + 1, expected)} of {expected}"
    return {"converged": "converged", "pinned": "pinned", "excluded": "excluded by config",
            "adaptive": "following its own adaptive ITR"}.get(vf.state, vf.state)


def _itr_text(itr: int) -> str:
    return "adaptive" if itr == 0 else si(itr, "/s")


def _pf_header(pf: PfView) -> str:
    now = (pf.mode_now or pf.mode).upper()
    switches = "" if pf.switches is None else f", {pf.switches} DE/NAPI switches"
    cliff = pf.controller_state.get("cliff")
    detail = [f"{pf.controller or pf.mode} controller"]
    if isinstance(cliff, float | int):
        detail.append(f"cliff {si(float(cliff), 'p/s')} from {pf.controller_state.get('cliff_source')}")
    if pf.napi_budget:
        detail.append(f"NAPI budget {pf.napi_budget} packets")
    return (f'<h2 id="pf-{escape(pf.name)}">{escape(pf.name)} <span class="muted">{escape(pf.pci)}</span> '
            f'&mdash; now <span class="now">{escape(now)}</span>{switches} '
            f'<span class="muted">({escape(", ".join(detail))})</span></h2>')


def _pf_chart(pf: PfView, rows: list[dict[str, Any]], now: float, span_s: float, bucket_s: float) -> str:
    points = [(_x(t, now), y) for t, y in _gapped(rows, bucket_s, lambda r: r["rx_pps"])]
    bands = [Band(_x(r["t"] - bucket_s, now), _x(r["t"], now), "NAPI") for r in rows if r["napi_share"] >= 0.5]
    return chart([Series("rx packets/s", points)], _minutes(span_s), Axis("packets/s", fmt=lambda v: si(v)),
                 f"{pf.name}: received packets/s (shaded: NAPI, else DE)", width=720, height=190, bands=bands,
                 css_class="chart pf-chart")


def _vf_charts(vf: VfView, rows: list[dict[str, Any]], now: float, span_s: float, bucket_s: float) -> str:
    x = _minutes(span_s)

    def series(value: Any) -> list[tuple[float, float]]:
        return [(_x(t, now), y) for t, y in _gapped(rows, bucket_s, value)]

    return "".join((
        chart([Series("ITR", series(lambda r: r["itr"] or None), step=True)], x, Axis("interrupts/s", log=True),
              "ITR set (gaps: its own adaptive ITR)", width=360, height=190, css_class="chart vf-chart"),
        chart([Series("receive", series(lambda r: r["rx_bps"]), color="#009E73"),
               Series("transmit", series(lambda r: max(0.0, r["throughput_bps"] - r["rx_bps"])), color="#0072B2")],
              x, Axis("bit/s"), "throughput, bit/s", width=360, height=204, css_class="chart vf-chart"),
        chart([Series("interrupts", series(lambda r: r["interrupts_per_s"]), color="#D55E00")], x,
              Axis("interrupts/s"), "interrupts/s (host view)", width=360, height=190, css_class="chart vf-chart"),
        chart([Series("guest CPU", series(lambda r: r["guest_cpu"]), color="#CC79A7")], x,
              Axis("CPU", fmt=lambda v: f"{v * 100:.0f}%"), "its guest's CPU (all its vCPUs)", width=360, height=190,
              css_class="chart vf-chart"),
    ))


def _vf_table(vfs: list[VfView]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("VF", "guest", "phase", "objective", "ITR", "rx", "tx", "interrupts",
                                             "bought vs adaptive", "CPU per Gb", "socket drops", "last decision"))
    rows = []
    for vf in vfs:
        # The rate when known, else the word saying why not; the reason shows on hover.
        dropped = si(vf.rx_dropped_pps, "p/s") if vf.rx_dropped_pps is not None else vf.rx_dropped_source
        merit, per_gbit = _bought(vf.vs_adaptive)
        age = f"measured {vf.vs_adaptive.age_s / 60:.0f} min ago" if vf.vs_adaptive else ""
        rows.append(
            f'<tr><td><a href="/vf/{escape(vf.pci)}">{escape(vf.pci)}</a></td><td>{escape(vf.guest or "-")}</td>'
            f"<td>{escape(_vf_phase(vf))}</td><td>{escape(vf.objective)}</td>"
            f'<td class="n">{_itr_text(vf.itr)}</td>'
            f'<td class="n">{si(vf.rx_bps, "b/s") if vf.rx_bps is not None else "-"}</td>'
            f'<td class="n">{si(vf.tx_bps, "b/s") if vf.tx_bps is not None else "-"}</td>'
            f'<td class="n">{si(vf.interrupts_per_s, "/s") if vf.interrupts_per_s is not None else "-"}</td>'
            f'<td class="n" title="{escape(age)}">{escape(merit)}</td><td class="n">{escape(per_gbit)}</td>'
            f'<td class="n" title="{escape(vf.rx_dropped_reason)}">{escape(dropped)}</td>'
            f'<td class="muted">{escape(vf.last_decision or "")}</td></tr>'
        )
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _setting_value(setting: str, value: object) -> str:
    """A decision's value: an ITR of 0 or none is the VF's own adaptive ITR."""
    if setting.startswith("itr") and setting != "itr_bounds" and value in (None, 0, "0"):
        return "adaptive"
    return "-" if value is None else str(value)


def _decisions(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="muted">No decisions in the last hour.</p>'
    body = "".join(
        f"<tr><td>{time.strftime('%H:%M:%S', time.localtime(r['t']))}</td><td>{escape(r['target'])}</td>"
        f"<td>{escape(r['setting'])}</td><td>{escape(_setting_value(r['setting'], r['old']))} &rarr; "
        f"{escape(_setting_value(r['setting'], r['applied']))}</td>"
        f"<td>{'ok' if r['ok'] else 'FAILED: ' + escape(r['error'] or '')}</td><td>{escape(r['reason'])}</td></tr>"
        for r in reversed(rows)
    )
    return ("<table><tr><th>time</th><th>target</th><th>setting</th><th>old &rarr; now</th><th>result</th>"
            f"<th>reason</th></tr>{body}</table>")


def _head(title: str, refresh: bool) -> str:
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            + ('<meta http-equiv="refresh" content="30">' if refresh else "")
            + f'<meta name="viewport" content="width=device-width"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>")


NAV = ('<nav><a href="/">status</a><a href="/docs">API docs</a><a href="/redoc">ReDoc</a><a href="/metrics">metrics</a>'
       '<a href="/v1/host">/v1/host</a><a href="/v1/vfs">/v1/vfs</a><a href="/#decisions">decisions</a></nav>')


def _span(view: AgentView, now: float) -> tuple[float, float]:
    # The host's clock and the wall agree at start (Agent.wall), so this is the agent's age in host time.
    span_s = min(WINDOW_S, max(MIN_WINDOW_S, now - view.started))
    return span_s, max(view.interval_s, span_s / POINTS)


def render(view: AgentView, db: History | None, now: float) -> str:
    span_s, bucket_s = _span(view, now)
    since = now - span_s
    pf_rows = pf_series(db, since, now, bucket_s) if db else {}
    decisions = db.decisions(None, now - WINDOW_S, now, 40) if db else []
    parts = [
        _head(f"vftune: {view.vf_count} VFs on {view.backend}", refresh=True),
        f"<h1>vftune</h1><p>{escape(view.backend)} ({escape(view.detail)}) &middot; {view.vf_count} VFs &middot; "
        f"tick {view.interval_s:g} s &times; {view.ticks}</p>",
        f'<p class="bought">{escape(_bought_text(view))}</p>', NAV,
    ]
    for line in view.capabilities.missing:
        parts.append(f'<p class="muted">missing: {escape(line)}</p>')
    for pf in view.pfs:
        vfs = [vf for vf in view.vfs if vf.pf == pf.name]
        parts += [_pf_header(pf), _pf_chart(pf, pf_rows.get(pf.name, []), now, span_s, bucket_s), _vf_table(vfs)]
    parts += ['<p class="muted">Each VF\'s charts are on its own page (its address). "bought vs adaptive": the set '
              "rate's throughput, or response time for request/response loads, against the VF's own adaptive ITR, "
              "from the tuner's windows at each; CPU per Gb likewise (- is cheaper).</p>",
              '<h2 id="decisions">Decisions in the last hour (newest first)</h2>', _decisions(decisions),
              "</body></html>"]
    return "".join(parts)


def render_vf(view: AgentView, vf: VfView, db: History | None, now: float) -> str:
    span_s, bucket_s = _span(view, now)
    rows = vf_series(db, now - span_s, now, bucket_s).get(vf.pci, []) if db else []
    decisions = db.decisions(vf.pci, now - WINDOW_S, now, 40) if db else []
    merit, per_gbit = _bought(vf.vs_adaptive)
    bought = ("not measured (it runs its adaptive ITR, searches, or one side is not measured yet)"
              if vf.vs_adaptive is None else
              f"{merit}, CPU per Gb {per_gbit}, measured {vf.vs_adaptive.age_s / 60:.0f} min ago")
    return "".join((
        _head(f"vftune: VF {vf.pci}", refresh=False),
        f'<h1>{escape(vf.pci)} <span class="muted">{escape(vf.guest or "(no guest)")} on {escape(vf.pf)}</span></h1>',
        f"<p>{escape(_vf_phase(vf))}, ITR {_itr_text(vf.itr)} &middot; objective {escape(vf.objective)} &middot; "
        f"actuator {escape(vf.actuator)} ({escape(vf.actuator_reason)})</p>",
        f'<p class="bought">Bought against its adaptive ITR: {escape(bought)}</p>', NAV,
        f'<div class="charts">{_vf_charts(vf, rows, now, span_s, bucket_s)}</div>',
        "<h2>Its decisions in the last hour (newest first)</h2>", _decisions(decisions), "</body></html>",
    ))


CSP = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'"}


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def status_page(handle: AgentHandle = Depends(agent), db: History | None = Depends(store)) -> HTMLResponse:
    # No script at all, and nothing from elsewhere: the policy says so to the browser too.
    return HTMLResponse(render(handle.view(), db, handle.wall_now()), headers=CSP)


@router.get("/vf/{pci}", response_class=HTMLResponse, include_in_schema=False)
def vf_page(pci: str = Path(pattern=PCI_ADDRESS), handle: AgentHandle = Depends(agent),
            db: History | None = Depends(store)) -> HTMLResponse:
    view = handle.view()
    vf = view.vf(pci.lower())
    if vf is None:
        raise StarletteHTTPException(404, f"no VF {pci} on this host")
    return HTMLResponse(render_vf(view, vf, db, handle.wall_now()), headers=CSP)
