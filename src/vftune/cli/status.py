"""`vftune status`: the running agent's state, read from its API, at the terminal's width.

One header (backend, ticks, CPU against adaptive ITR), then per PF one line (what it runs now,
DE or NAPI, and its switches) and a table of its VFs, each with its phase in words. Every
number carries its unit. --watch redraws in place; --json prints the API's records unchanged.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import click
import httpx
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from vftune import paths
from vftune.cli.common import Number, fail
from vftune.logsafe import escape

DEFAULT_URL = "http://127.0.0.1:8740"


class Unreachable(Exception):
    pass


def host_text(value: object, style: str = "") -> Text:
    """A host-provided string (guest name, decision, reason) as a cell: never rich markup, and
    control characters (ESC, OSC, newlines) shown escaped instead of reaching the terminal."""
    return Text(escape(str(value)), style=style)


def escaped(data: Any) -> Any:
    """Every string in an API record with its control characters escaped (logsafe.escape)."""
    if isinstance(data, str):
        return escape(data)
    if isinstance(data, dict):
        return {k: escaped(v) for k, v in data.items()}
    if isinstance(data, list):
        return [escaped(v) for v in data]
    return data


def _headers(token_file: str | None) -> dict[str, str]:
    # The token is needed when the agent listens beyond loopback; sent whenever it is readable.
    token = paths.read_token(paths.token_path(None, token_file))
    return {"Authorization": f"Bearer {token}"} if token else {}


def fetch(url: str, token_file: str | None = None) -> dict[str, Any]:
    base = url.rstrip("/")
    try:
        with httpx.Client(timeout=5.0, headers=_headers(token_file)) as client:
            host = client.get(f"{base}/v1/host")
            vfs = client.get(f"{base}/v1/vfs")
    except httpx.HTTPError as exc:
        raise Unreachable(f"cannot reach the vftune agent at {url}: {exc} (is `vftune run` up?)") from None
    for resp in (host, vfs):
        if resp.status_code != 200:
            raise Unreachable(f"{resp.request.url}: HTTP {resp.status_code}: {resp.text.strip()[:200]}")
    return {"host": host.json(), "vfs": vfs.json()}


def rate(value: float | None, unit: str) -> str:
    """1234567 b/s -> "1.23 Mb/s" (three significant digits); None -> "-"."""
    if value is None:
        return "-"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def itr(value: int) -> str:
    return "adaptive" if value == 0 else rate(value, "/s")


def itr_cell(vf: dict[str, Any], narrow: bool) -> str:
    """The rate in force, and one written that the VF has not taken yet (it fetches within 2 s)."""
    pending = vf.get("itr_pending")
    if pending is None:
        return itr(vf["itr"])
    return f"→{itr(pending)}" if narrow else f"{itr(vf['itr'])}→{itr(pending)}"


def cpu(value: float | None) -> str:
    """CPU seconds per second as top shows it: 1.73 -> "173 %" (of one CPU)."""
    return "-" if value is None else f"{value * 100:.0f}%"


def phase(vf: dict[str, Any], short: bool = False) -> str:
    """The VF's phase in words (the ITR column beside it gives the rate)."""
    state = vf.get("state")
    if state == "searching":
        probes, expected = vf.get("probes"), vf.get("expected_probes")
        if probes is not None and expected:
            step = min(probes + 1, expected)
            return f"searching {step}/{expected}" if short else f"searching, step {step} of {expected}"
        return "searching"
    if state in ("converged", "pinned"):
        return str(state)
    if state == "excluded":
        return "excluded by config"
    return "own adaptive ITR" if short else "following its own adaptive ITR"


def drops(vf: dict[str, Any]) -> str:
    """The guest's socket drops: the rate when known, else the word that says why not."""
    if vf.get("rx_dropped_pps") is not None:
        return rate(vf["rx_dropped_pps"], "p/s")
    return str(vf.get("rx_dropped_source") or "-")


def _cpu_line(host: dict[str, Any]) -> str:
    model = host.get("cost_model") or {}
    saved = model.get("saved_cpu_s_per_s")
    if saved is None:
        return "CPU vs adaptive ITR: not known yet" + (f" ({model['note']})" if model.get("note") else "")
    word = "saved" if saved >= 0 else "spent"
    return f"CPU against adaptive ITR: {abs(saved) * 100:.1f}% of one CPU {word} (cost model fit)"


def _pf_line(pf: dict[str, Any]) -> Text:
    now = pf.get("mode_now")
    mode = pf["mode"]
    text = Text()
    text.append(f"{pf['name']}", style="bold")
    text.append(f" {pf['pci']} | {pf['num_vfs']}/{pf['total_vfs']} VFs | rx {rate(pf['rx_pps'], 'p/s')}, "
                f"{rate(pf['rx_bps'], 'b/s')} | ")
    text.append(f"now {(now or mode).upper()}", style="bold cyan")
    switches = pf.get("switches")
    if switches is not None:
        text.append(f", {switches} DE/NAPI switch{'es' if switches != 1 else ''}")
    details = [f"{pf['controller'] or mode} controller"]
    state = pf.get("controller_state") or {}
    if state.get("cliff"):
        details.append(f"cliff {rate(float(state['cliff']), 'p/s')} from {state.get('cliff_source') or '?'}")
    if pf.get("napi_budget"):
        details.append(f"NAPI budget {pf['napi_budget']} packets")
    text.append(f" ({', '.join(details)})")
    return text


def render(state: dict[str, Any], width: int) -> RenderableType:
    state = escaped(state)  # host strings reach the terminal as text, never as its controls
    host = state["host"]
    caps = host["capabilities"]
    parts: list[RenderableType] = []
    head = Text()
    head.append("vftune", style="bold")
    head.append(f" {host['backend']} ({host['detail']}) | {host['vf_count']} VFs | "
                f"tick {host['interval_s']:g} s x {host['ticks']} | ITR {caps['itr_min']}..{caps['itr_max']}/s")
    if not caps["vf_itr"]:
        head.append(" | observe only: VF ITR cannot be set", style="yellow")
    parts.append(head)
    parts.append(Text(_cpu_line(host)))
    for line in caps["missing"]:
        parts.append(Text(f"  missing: {line}", style="yellow"))
    wide, narrow = width >= 150, width < 110
    by_pf: dict[str, list[dict[str, Any]]] = {}
    for vf in state["vfs"]:
        by_pf.setdefault(vf["pf"], []).append(vf)
    for pf in host["pfs"]:
        parts.append(Text(""))
        parts.append(_pf_line(pf))
        if wide and pf.get("last_decision"):
            parts.append(Text(f"  last: {pf['last_decision']}", style="dim"))
        # Wide: the last decision (free text, often long) takes what the other columns leave and is
        # cut there; without a ratio rich shrinks every column alike and the addresses go first.
        table = Table(box=None, pad_edge=False, header_style="bold", expand=wide)
        # Narrow terminals lose the packet rate and transmit columns, not the phase.
        columns = ["VF", "guest", "ITR", "rx", "rx pkts", "tx", "interrupts", "CPU", "phase"]
        if narrow:
            columns = [c for c in columns if c not in ("rx pkts", "tx")]
        if wide:
            columns.insert(columns.index("CPU") + 1, "drops")
            columns += ["actuator", "objective", "last decision"]
        for col in columns:
            table.add_column(col, justify="left" if col in ("VF", "guest", "phase", "actuator", "objective", "last decision")
                             else "right", no_wrap=True, overflow="ellipsis",
                             max_width=10 if narrow and col == "guest" else None,
                             ratio=1 if col == "last decision" else None)
        for vf in by_pf.get(pf["name"], []):
            cells = {
                "VF": vf["pci"], "guest": vf["guest"] or "-", "ITR": itr_cell(vf, narrow),
                "rx": rate(vf["rx_bps"], "b/s"), "rx pkts": rate(vf["rx_pps"], "p/s"), "tx": rate(vf["tx_bps"], "b/s"),
                "interrupts": rate(vf["interrupts_per_s"], "/s"), "CPU": cpu(vf["guest_cpu"]), "phase": phase(vf, narrow),
                "actuator": vf.get("actuator") or "-", "drops": drops(vf),
                "objective": vf.get("objective") or "", "last decision": vf["last_decision"] or "",
            }
            table.add_row(*(host_text(cells[c]) for c in columns))
        parts.append(table)
        if wide:  # what an operator can fix: the guest agents that do not answer, one line each
            reasons = dict.fromkeys(vf.get("rx_dropped_reason") for vf in by_pf.get(pf["name"], [])
                                    if vf.get("rx_dropped_source") == "unavailable")
            parts.extend(Text(f"  drops unknown: {r}", style="yellow") for r in reasons if r)
    return Group(*parts)


def _with_search_progress(url: str, state: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """Searching VFs: the step and the expected number of steps, from the VF detail."""
    searching = [vf for vf in state["vfs"] if vf.get("state") == "searching"]
    if not searching:
        return state
    try:
        with httpx.Client(timeout=5.0, headers=headers) as client:
            for vf in searching:
                resp = client.get(f"{url.rstrip('/')}/v1/vfs/{vf['pci']}")
                if resp.status_code == 200:
                    ps = resp.json().get("policy_state") or {}
                    vf["probes"], vf["expected_probes"] = ps.get("probes"), ps.get("expected_probes")
    except httpx.HTTPError:
        pass  # the words stay "searching"
    return state


@click.command("status")
@click.option("--url", default=DEFAULT_URL, show_default=True, help="The agent's API.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"host\": ..., \"vfs\": [...]} as JSON.")
@click.option("--watch", is_flag=True, help="Redraw in place every --every seconds until Ctrl-C.")
@click.option("--every", type=Number(0.2, 86400), default=2.0, show_default=True, metavar="SECONDS",
              help="Refresh period of --watch.")
@click.option("--token-file", default=None, metavar="PATH",
              help="The agent's API token [default: `token` in the state directory].")
def command(url: str, as_json: bool, watch: bool, every: float, token_file: str | None) -> None:
    """Show what the running agent sees and has set, per PF and VF."""
    try:
        parsed = httpx.URL(url)
        usable = parsed.scheme in ("http", "https") and bool(parsed.host)
    except (httpx.InvalidURL, TypeError, ValueError):
        usable = False
    if not usable:
        fail(f"--url {url[:80]!r}: expected http://HOST:PORT", 2)
    if as_json and watch:
        fail("--json and --watch: choose one", 2)
    headers = _headers(token_file)
    console = Console()
    if not watch:
        try:
            state = fetch(url, token_file)
        except Unreachable as exc:
            fail(str(exc), 1)
        if as_json:
            click.echo(json.dumps(state, indent=2))
        else:
            console.print(render(_with_search_progress(url, state, headers), console.width))
        return
    # Ctrl-C ends --watch even when the shell that started us ignored SIGINT (a background job):
    # an ignored signal stays ignored across exec, and Python then raises no KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with Live(console=console, auto_refresh=False, screen=False, transient=False) as live:
        try:
            while True:
                try:
                    view: RenderableType = render(_with_search_progress(url, fetch(url, token_file), headers),
                                                  console.width)
                except Unreachable as exc:
                    view = Text(f"vftune: {exc} (retrying every {every:g} s)", style="red")
                live.update(view, refresh=True)
                time.sleep(every)
        except KeyboardInterrupt:
            pass
