"""`vftune status`: the running agent's state, read from its API."""

from __future__ import annotations

import json
from typing import Any

import click
import httpx
from rich.console import Console
from rich.table import Table

from vftune import paths
from vftune.cli.common import fail
from vftune.itr import itr_label

DEFAULT_URL = "http://127.0.0.1:8740"


def fetch(url: str, token_file: str | None = None) -> dict[str, Any]:
    base = url.rstrip("/")
    # The token is needed when the agent listens beyond loopback; sent whenever it is readable.
    token = paths.read_token(paths.token_path(None, token_file))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(timeout=5.0, headers=headers) as client:
            host = client.get(f"{base}/v1/host")
            vfs = client.get(f"{base}/v1/vfs")
    except httpx.HTTPError as exc:
        fail(f"cannot reach the vftune agent at {url}: {exc} (is `vftune run` up?)", 1)
    for resp in (host, vfs):
        if resp.status_code != 200:
            fail(f"{resp.request.url}: HTTP {resp.status_code}: {resp.text.strip()[:200]}", 1)
    return {"host": host.json(), "vfs": vfs.json()}


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def render(state: dict[str, Any], console: Console) -> None:
    host = state["host"]
    caps = host["capabilities"]
    console.print(
        f"[bold]vftune[/] backend {host['backend']} ({host['detail']}) | {host['vf_count']} VFs | "
        f"tick {host['interval_s']:g}s x {host['ticks']} | ITR {caps['itr_min']}..{caps['itr_max']}/s"
        + ("" if caps["vf_itr"] else " | [yellow]observe only: VF ITR cannot be set[/]")
    )
    for line in caps["missing"]:
        console.print(f"  [yellow]missing:[/] {line}")
    pfs = Table(title="PFs", title_justify="left")
    for col in ("PF", "PCI", "VFs", "mode", "budget", "rx pps", "last decision"):
        pfs.add_column(col)
    for pf in host["pfs"]:
        pfs.add_row(pf["name"], pf["pci"], f"{pf['num_vfs']}/{pf['total_vfs']}", pf["mode"],
                    str(pf["napi_budget"] or "-"), _rate(pf["rx_pps"], "p/s"), pf["last_decision"] or "")
    console.print(pfs)
    vfs = Table(title="VFs", title_justify="left")
    for col in ("VF", "PF", "#", "guest", "ITR/s", "rx", "rx pps", "tx", "irq/s", "cpu", "phase", "last decision"):
        vfs.add_column(col, justify="right" if col in {"#", "ITR/s", "rx", "rx pps", "tx", "irq/s", "cpu"} else "left")
    for vf in state["vfs"]:
        itr = itr_label(vf["itr"], unit="")  # the column says per second
        cpu = "-" if vf["guest_cpu"] is None else f"{vf['guest_cpu']:.2f}"
        vfs.add_row(
            vf["pci"], vf["pf"], str(vf["index"]), vf["guest"] or "-", itr,
            _rate(vf["rx_bps"], "b/s"), _rate(vf["rx_pps"], "p/s"), _rate(vf["tx_bps"], "b/s"),
            _rate(vf["interrupts_per_s"], "/s"), cpu, vf["phase"] or vf["policy"], vf["last_decision"] or "",
        )
    console.print(vfs)


@click.command("status")
@click.option("--url", default=DEFAULT_URL, show_default=True, help="The agent's API.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"host\": ..., \"vfs\": [...]} as JSON.")
@click.option("--token-file", default=None, metavar="PATH",
              help="The agent's API token [default: `token` in the state directory].")
def command(url: str, as_json: bool, token_file: str | None) -> None:
    """Show what the running agent sees and has set, per PF and VF."""
    try:
        parsed = httpx.URL(url)
        usable = parsed.scheme in ("http", "https") and bool(parsed.host)
    except (httpx.InvalidURL, TypeError, ValueError):
        usable = False
    if not usable:
        fail(f"--url {url[:80]!r}: expected http://HOST:PORT", 2)
    state = fetch(url, token_file)
    if as_json:
        click.echo(json.dumps(state, indent=2))
    else:
        render(state, Console(width=160))
