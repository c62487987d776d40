"""The status page at `/`: one server-rendered HTML page with inline SVG charts.

Per PF its receive rate over the last hour with its NAPI periods shaded and the mode it runs
now; per VF its ITR, throughput and interrupts over the hour; the latest decisions. No
JavaScript, nothing fetched from elsewhere (an air-gapped host shows it whole); the page
reloads itself every 30 s with a meta refresh.
"""

from __future__ import annotations

import time
from html import escape
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import HTMLResponse

from vftune.api.deps import AgentHandle, agent, store
from vftune.model import AgentView, PfView, VfView
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


def _cpu_text(view: AgentView) -> str:
    saved = view.cost_model.get("saved_cpu_s_per_s")
    if not isinstance(saved, float | int):
        return "CPU against adaptive ITR: not known yet"
    return (f"CPU against adaptive ITR: {abs(saved) * 100:.1f}% of one CPU "
            f"{'saved' if saved >= 0 else 'spent'} (cost model fit)")


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
    points = [(_x(r["t"], now), r["rx_pps"]) for r in rows]
    bands = [Band(_x(r["t"] - bucket_s, now), _x(r["t"], now), "NAPI") for r in rows if r["napi_share"] >= 0.5]
    return chart([Series("rx packets/s", points)], _minutes(span_s), Axis("packets/s", fmt=lambda v: si(v)),
                 f"{pf.name}: received packets/s (shaded: NAPI, else DE)", width=720, height=190, bands=bands,
                 css_class="chart pf-chart")


def _vf_charts(vf: VfView, rows: list[dict[str, Any]], now: float, span_s: float) -> str:
    x = _minutes(span_s)
    itr = [(_x(r["t"], now), float(r["itr"]) if r["itr"] else float("nan")) for r in rows]
    bps = [(_x(r["t"], now), r["throughput_bps"]) for r in rows]
    ints = [(_x(r["t"], now), r["interrupts_per_s"] if r["interrupts_per_s"] is not None else float("nan"))
            for r in rows]
    return "".join((
        chart([Series("ITR", itr, step=True)], x, Axis("interrupts/s", log=True),
              "ITR set (gaps: its own adaptive ITR)", width=330, height=170, css_class="chart vf-chart"),
        chart([Series("rx + tx", bps, color="#009E73")], x, Axis("bit/s"), "throughput, bit/s",
              width=330, height=170, css_class="chart vf-chart"),
        chart([Series("interrupts", ints, color="#D55E00")], x, Axis("interrupts/s"), "interrupts/s (host view)",
              width=330, height=170, css_class="chart vf-chart"),
    ))


def _vf_table(vfs: list[VfView]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("VF", "guest", "phase", "objective", "ITR", "rx", "tx", "interrupts",
                                             "guest CPU", "socket drops", "last decision"))
    rows = []
    for vf in vfs:
        cpu = "-" if vf.guest_cpu is None else f"{vf.guest_cpu * 100:.0f}%"
        # The rate when known, else the word saying why not; the reason shows on hover.
        dropped = si(vf.rx_dropped_pps, "p/s") if vf.rx_dropped_pps is not None else vf.rx_dropped_source
        rows.append(
            f'<tr><td><a href="#vf-{escape(vf.pci)}">{escape(vf.pci)}</a></td><td>{escape(vf.guest or "-")}</td>'
            f"<td>{escape(_vf_phase(vf))}</td><td>{escape(vf.objective)}</td>"
            f'<td class="n">{_itr_text(vf.itr)}</td>'
            f'<td class="n">{si(vf.rx_bps, "b/s") if vf.rx_bps is not None else "-"}</td>'
            f'<td class="n">{si(vf.tx_bps, "b/s") if vf.tx_bps is not None else "-"}</td>'
            f'<td class="n">{si(vf.interrupts_per_s, "/s") if vf.interrupts_per_s is not None else "-"}</td>'
            f'<td class="n">{cpu}</td><td class="n" title="{escape(vf.rx_dropped_reason)}">{escape(dropped)}</td>'
            f'<td class="muted">{escape(vf.last_decision or "")}</td></tr>'
        )
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _decisions(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="muted">No decisions in the last hour.</p>'
    body = "".join(
        f"<tr><td>{time.strftime('%H:%M:%S', time.localtime(r['t']))}</td><td>{escape(r['target'])}</td>"
        f"<td>{escape(r['setting'])}</td><td>{escape(str(r['old']))} &rarr; {escape(str(r['applied']))}</td>"
        f"<td>{'ok' if r['ok'] else 'FAILED: ' + escape(r['error'] or '')}</td><td>{escape(r['reason'])}</td></tr>"
        for r in reversed(rows)
    )
    return ("<table><tr><th>time</th><th>target</th><th>setting</th><th>old &rarr; now</th><th>result</th>"
            f"<th>reason</th></tr>{body}</table>")


def render(view: AgentView, db: History | None, now: float) -> str:
    # The host's clock and the wall agree at start (Agent.wall), so this is the agent's age in host time.
    span_s = min(WINDOW_S, max(MIN_WINDOW_S, now - view.started))
    since = now - span_s
    bucket_s = max(view.interval_s, span_s / POINTS)
    vf_rows = vf_series(db, since, now, bucket_s) if db else {}
    pf_rows = pf_series(db, since, now, bucket_s) if db else {}
    decisions = db.decisions(None, now - WINDOW_S, now, 40) if db else []
    parts = [
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        '<meta http-equiv="refresh" content="30"><meta name="viewport" content="width=device-width">',
        f"<title>vftune: {view.vf_count} VFs on {escape(view.backend)}</title><style>{STYLE}</style></head><body>",
        f"<h1>vftune</h1><p>{escape(view.backend)} ({escape(view.detail)}) &middot; {view.vf_count} VFs &middot; "
        f"tick {view.interval_s:g} s &times; {view.ticks} &middot; {escape(_cpu_text(view))}</p>",
        '<nav><a href="/docs">API docs</a><a href="/redoc">ReDoc</a><a href="/metrics">metrics</a>'
        '<a href="/v1/host">/v1/host</a><a href="/v1/vfs">/v1/vfs</a><a href="#decisions">decisions</a></nav>',
    ]
    for line in view.capabilities.missing:
        parts.append(f'<p class="muted">missing: {escape(line)}</p>')
    for pf in view.pfs:
        vfs = [vf for vf in view.vfs if vf.pf == pf.name]
        parts += [_pf_header(pf), _pf_chart(pf, pf_rows.get(pf.name, []), now, span_s, bucket_s), _vf_table(vfs)]
        for vf in vfs:
            parts.append(f'<h3 id="vf-{escape(vf.pci)}">{escape(vf.pci)} {escape(vf.guest or "(no guest)")} '
                         f'<span class="muted">&mdash; {escape(_vf_phase(vf))}, ITR {_itr_text(vf.itr)}</span></h3>')
            parts.append(f'<div class="charts">{_vf_charts(vf, vf_rows.get(vf.pci, []), now, span_s)}</div>')
    parts += ['<h2 id="decisions">Decisions in the last hour (newest first)</h2>', _decisions(decisions),
              "</body></html>"]
    return "".join(parts)


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def status_page(handle: AgentHandle = Depends(agent), db: History | None = Depends(store)) -> HTMLResponse:
    # No script at all, and nothing from elsewhere: the policy says so to the browser too.
    return HTMLResponse(render(handle.view(), db, handle.wall_now()),
                        headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'"})
