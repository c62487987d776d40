"""`vftune status`: the running agent's state, read from its API, at the terminal's width.

One header (backend, ticks, CPU against adaptive ITR), then per PF one line (what it runs now,
DE or NAPI, and its switches) and a table of its VFs, each with its phase in words. Every
number carries its unit. --watch redraws in place; --json prints the API's records unchanged.
"""

from __future__ import annotations

import fnmatch
import io
import json
import signal
import textwrap
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
MANY_VFS = 40  # a host with more VFs than this shows ...
SHOWN_VFS = 30  # ... this many rows of them without --all, the ones that matter first


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
    return "adaptive" if short else "following its own adaptive ITR"


def drops(vf: dict[str, Any]) -> str:
    """The guest's socket drops: the rate when known, else the word that says why not."""
    if vf.get("rx_dropped_pps") is not None:
        return rate(vf["rx_dropped_pps"], "p/s")
    return str(vf.get("rx_dropped_source") or "-")


# What each word in the drops column means, shown under a table that shows the word.
DROPS_WORDS = {
    "shared": "its guest holds other VFs too, and a guest's drops cannot be split between them",
    "pending": "read once so far; a rate needs two reads",
    "unavailable": "the guest's agent does not answer or refuses guest-file-*",
    "no-guest": "no running guest holds the VF",
    "off": "not read (--guest-rx-drops off, or this backend cannot)",
}


def bought(vf: dict[str, Any]) -> str:
    """The set rate's merit against the VF's adaptive ITR: "+12% tput" or "-8% resp"."""
    value = vf.get("vs_adaptive")
    if not value:
        return "-"
    change = float(value["merit_change"])
    if value.get("merit") == "response time":
        return f"{(1.0 / (1.0 + change) - 1.0) * 100 if change > -1 else 0.0:+.0f}% resp"
    return f"{change * 100:+.0f}% tput"


def cpu_per_gbit(vf: dict[str, Any]) -> str:
    value = vf.get("vs_adaptive")
    return "-" if not value else f"{float(value['cpu_per_gbit_change']) * 100:+.0f}%"


def wrap_phrases(phrases: list[str], width: int, sep: str = " | ", indent: str = "  ") -> list[str]:
    """Phrases joined on lines of at most `width`, broken only between phrases (a phrase longer
    than a line gets a line of its own, cut by the terminal, never split mid-phrase)."""
    lines: list[str] = []
    line = ""
    for phrase in (p for p in phrases if p):
        candidate = f"{line}{sep}{phrase}" if line else phrase
        if line and len(candidate) > width:
            lines.append(line)
            line = indent + phrase
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


def _lines(phrases: list[str], width: int, style: str = "", first_style: str = "", sep: str = " | ") -> list[Text]:
    out = []
    for i, line in enumerate(wrap_phrases(phrases, width, sep)):
        out.append(Text(line, style=first_style if i == 0 and first_style else style, no_wrap=True,
                        overflow="ellipsis"))
    return out


def _value_line(host: dict[str, Any]) -> str:
    value = host.get("vs_adaptive")
    if not value:
        return "Bought against adaptive ITR: nothing measured yet (no VF holds a set rate measured on both sides)"
    return f"Bought against adaptive ITR: {value['text']}"


def _pf_phrases(pf: dict[str, Any]) -> list[str]:
    now = (pf.get("mode_now") or pf["mode"]).upper()
    switches = pf.get("switches")
    phrases = [f"{pf['name']} {pf['pci']}", f"{pf['num_vfs']}/{pf['total_vfs']} VFs",
               f"rx {rate(pf['rx_pps'], 'p/s')}, {rate(pf['rx_bps'], 'b/s')}",
               f"now {now}" + ("" if switches is None else f", {switches} DE/NAPI switch{'es' if switches != 1 else ''}"),
               f"{pf['controller'] or pf['mode']} controller"]
    state = pf.get("controller_state") or {}
    if state.get("cliff"):
        phrases.append(f"cliff {rate(float(state['cliff']), 'p/s')} from {state.get('cliff_source') or '?'}")
    if pf.get("napi_budget"):
        phrases.append(f"NAPI budget {pf['napi_budget']} packets")
    return phrases


def _priority(vf: dict[str, Any]) -> tuple[int, float, str]:
    """The VFs that matter first: searching, then set rates (worst merit first), then the rest
    by traffic."""
    state = vf.get("state")
    value = vf.get("vs_adaptive")
    traffic = (vf.get("rx_bps") or 0.0) + (vf.get("tx_bps") or 0.0)
    if state == "searching":
        return (0, 0.0, vf["pci"])
    if value:
        return (1, float(value["merit_change"]), vf["pci"])
    if state in ("converged", "pinned"):
        return (2, -traffic, vf["pci"])
    if state == "excluded":
        return (3, 0.0, vf["pci"])
    return (4 if traffic > 0 else 5, -traffic, vf["pci"])


def _short_pci(pci: str, narrow: bool) -> str:
    """At narrow widths the PCI domain 0000 is left out (03:10.0), as lspci does."""
    return pci[5:] if narrow and pci.startswith("0000:") else pci


def _state_counts(vfs: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for vf in vfs:
        counts[str(vf.get("state") or "adaptive")] = counts.get(str(vf.get("state") or "adaptive"), 0) + 1
    order = ("searching", "converged", "pinned", "adaptive", "excluded")
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k))


def _vf_table(vfs: list[dict[str, Any]], width: int) -> Table:
    wide, narrow = width >= 150, width < 110
    # Narrow terminals get one space between columns and lose the packet rate and transmit; the
    # drops, actuator, objective and last decision need 150 columns.
    table = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0) if narrow else (0, 1), header_style="bold",
                  expand=wide)
    columns = ["VF", "guest", "ITR", "rx", "rx pkts", "tx", "interrupts", "bought", "CPU/Gb", "phase"]
    if narrow:
        columns = [c for c in columns if c not in ("rx pkts", "tx")]
    if wide:
        columns.insert(columns.index("CPU/Gb") + 1, "drops")
        columns += ["actuator", "objective", "last decision"]
    for col in columns:
        table.add_column(col, justify="left" if col in ("VF", "guest", "phase", "actuator", "objective", "last decision")
                         else "right", no_wrap=True, overflow="ellipsis",
                         max_width=(9 if narrow else None if wide else 12) if col == "guest" else None,
                         ratio=1 if col == "last decision" else None)
    for vf in vfs:
        cells = {
            "VF": _short_pci(vf["pci"], narrow), "guest": vf["guest"] or "-", "ITR": itr_cell(vf, narrow),
            "rx": rate(vf["rx_bps"], "b/s"), "rx pkts": rate(vf["rx_pps"], "p/s"), "tx": rate(vf["tx_bps"], "b/s"),
            "interrupts": rate(vf["interrupts_per_s"], "/s"), "bought": bought(vf), "CPU/Gb": cpu_per_gbit(vf),
            "phase": phase(vf, not wide), "actuator": vf.get("actuator") or "-", "drops": drops(vf),
            "objective": vf.get("objective") or "", "last decision": vf["last_decision"] or "",
        }
        table.add_row(*(host_text(cells[c]) for c in columns))
    return table


def render(state: dict[str, Any], width: int, rows: int | None = None, pf_name: str | None = None,
           guest: str | None = None) -> RenderableType:
    """The report at `width` columns. rows: VF rows to show in all (None: every VF), shared out
    among the ports shown, the VFs that matter first; pf_name, guest (a glob): only those."""
    state = escaped(state)  # host strings reach the terminal as text, never as its controls
    host = state["host"]
    caps = host["capabilities"]
    parts: list[RenderableType] = []
    head = [f"vftune {host['backend']} ({host['detail']})", f"{host['vf_count']} VFs: {_state_counts(state['vfs'])}",
            f"tick {host['interval_s']:g} s x {host['ticks']}", f"ITR {caps['itr_min']}..{caps['itr_max']}/s"]
    parts += _lines(head, width, first_style="bold")
    if not caps["vf_itr"]:
        parts += _lines(["observe only: VF ITR cannot be set here"], width, style="yellow")
    parts += _lines(_value_line(host).split(", "), width, sep=", ")
    for line in caps["missing"]:
        parts += _lines([f"missing: {line}"], width, style="yellow")
    pfs = [pf for pf in host["pfs"] if pf_name is None or pf["name"] == pf_name or pf["pci"] == pf_name]
    by_pf: dict[str, list[dict[str, Any]]] = {}
    for vf in state["vfs"]:
        if guest is not None and not fnmatch.fnmatchcase(vf.get("guest") or "", guest):
            continue
        by_pf.setdefault(vf["pf"], []).append(vf)
    budget = None if rows is None else max(3, rows // max(1, len(pfs)))
    shown_any_value = False
    words: set[str] = set()
    for pf in pfs:
        vfs = sorted(by_pf.get(pf["name"], []), key=_priority)
        parts.append(Text(""))
        parts += _lines(_pf_phrases(pf), width, first_style="bold")
        if width >= 150 and pf.get("last_decision"):
            parts += _lines([f"  last: {pf['last_decision']}"], width, style="dim")
        shown = vfs if budget is None or len(vfs) <= budget else vfs[:budget - 1]
        if shown:
            parts.append(_vf_table(shown, width))
        if len(shown) < len(vfs):
            rest = vfs[len(shown):]
            parts += _lines([f"  ... {len(rest)} more VFs ({_state_counts(rest)})",
                             f"--pf {pf['name']} or --guest GLOB to see them"], width, style="dim")
        shown_any_value = shown_any_value or any(vf.get("vs_adaptive") for vf in shown)
        if width >= 150:  # the drops column's words, explained under the table
            words |= {str(vf.get("rx_dropped_source")) for vf in shown if vf.get("rx_dropped_pps") is None}
        if width >= 150:  # what an operator can fix: the guest agents that do not answer, one line each
            reasons = dict.fromkeys(vf.get("rx_dropped_reason") for vf in sorted(shown, key=lambda v: v["pci"])
                                    if vf.get("rx_dropped_source") == "unavailable")
            parts.extend(Text(f"  drops unknown: {r}", style="yellow", no_wrap=True, overflow="ellipsis")
                         for r in reasons if r)
    if pf_name is not None and not pfs:
        parts += _lines([f"no port {pf_name} on this host"], width, style="yellow")
    legend = []
    if shown_any_value:
        legend += ["bought: the set rate's throughput (tput) or response time (resp) against the VF's own adaptive ITR",
                   "CPU/Gb: its CPU per Gb against the same (- is cheaper)"]
    legend += [f"drops {w}: {DROPS_WORDS[w]}" for w in sorted(words) if w in DROPS_WORDS]
    if legend:
        parts.append(Text(""))
        for item in legend:  # prose: wrapped between words
            parts += [Text(line, style="dim", no_wrap=True) for line in textwrap.wrap(item, width, subsequent_indent="  ")]
    return Group(*parts)


def _height(view: RenderableType, width: int) -> int:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(view)
    return out.getvalue().count("\n")


def fitted(state: dict[str, Any], width: int, height: int, pf_name: str | None = None,
           guest: str | None = None) -> RenderableType:
    """The report with as many VF rows as fit `height` lines (--watch: every port on the screen)."""
    rows = max(3 * len(state["host"]["pfs"]), height)
    while True:
        view = render(state, width, rows, pf_name, guest)
        if rows <= 3 * len(state["host"]["pfs"]) or _height(view, width) <= height - 1:
            return view
        rows -= len(state["host"]["pfs"])


def _filtered(state: dict[str, Any], pf_name: str | None, guest: str | None) -> dict[str, Any]:
    """--json with --pf or --guest: the API's records, only those VFs."""
    vfs = [vf for vf in state["vfs"]
           if (pf_name is None or vf["pf"] == pf_name or any(pf["pci"] == pf_name and pf["name"] == vf["pf"]
                                                             for pf in state["host"]["pfs"]))
           and (guest is None or fnmatch.fnmatchcase(vf.get("guest") or "", guest))]
    return {"host": state["host"], "vfs": vfs}


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
@click.option("--pf", "pf_name", default=None, metavar="NAME",
              help="Only this port (its interface name or PCI address).")
@click.option("--guest", default=None, metavar="GLOB", help="Only the VFs of guests whose name matches GLOB.")
@click.option("--all", "show_all", is_flag=True,
              help=f"Every VF; without it a host of more than {MANY_VFS} VFs shows the {SHOWN_VFS} that matter "
              "most (searching, then set rates by worst merit, then by traffic), and --watch what fits the terminal.")
def command(url: str, as_json: bool, watch: bool, every: float, token_file: str | None, pf_name: str | None,
            guest: str | None, show_all: bool) -> None:
    """Show what the running agent sees and has set, per PF and VF, and what the set rates bought
    against the VFs' own adaptive ITRs."""
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
            click.echo(json.dumps(_filtered(state, pf_name, guest), indent=2))
        else:
            rows = None if show_all or len(state["vfs"]) <= MANY_VFS else SHOWN_VFS
            console.print(render(_with_search_progress(url, state, headers), console.width, rows, pf_name, guest))
        return
    # Ctrl-C ends --watch even when the shell that started us ignored SIGINT (a background job):
    # an ignored signal stays ignored across exec, and Python then raises no KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with Live(console=console, auto_refresh=False, screen=False, transient=False) as live:
        try:
            while True:
                try:
                    state = _with_search_progress(url, fetch(url, token_file), headers)
                    view: RenderableType = (render(state, console.width, None, pf_name, guest) if show_all else
                                            fitted(state, console.width, console.height, pf_name, guest))
                except Unreachable as exc:
                    view = Text(f"vftune: {exc} (retrying every {every:g} s)", style="red")
                live.update(view, refresh=True)
                time.sleep(every)
        except KeyboardInterrupt:
            pass
