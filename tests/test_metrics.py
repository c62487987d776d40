"""/metrics as Prometheus' own tools read it: promtool's lint on a live scrape, counters in base
units, the ITR with adaptive apart, and a Grafana dashboard that queries only what is exported."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PROMTOOL = ROOT / ".cache/prometheus/usr/bin/promtool"
DASHBOARD = ROOT / "contrib/grafana-vftune.json"


@pytest.fixture(scope="module")
def scrape(shared_sim_agent) -> str:
    shared_sim_agent.wait_ticks(65)  # past the first cost-model fit (every 60 ticks)
    return httpx.get(f"{shared_sim_agent.url}/metrics").text


def _series(text: str) -> dict[str, list[str]]:
    """Metric name -> its sample lines."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            out.setdefault(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0), []).append(line)
    return out


@pytest.mark.skipif(not PROMTOOL.exists(), reason="scripts/setup --test fetches Debian's promtool")
def test_promtool_finds_nothing_to_lint_in_a_live_scrape(scrape):
    out = subprocess.run([str(PROMTOOL), "check", "metrics"], input=scrape, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "" and out.stderr.strip() == "", out.stdout + out.stderr


def test_counters_in_base_units_and_the_itr_with_adaptive_apart(scrape, shared_sim_agent):
    before = httpx.get(f"{shared_sim_agent.url}/v1/vfs").json()
    series = _series(httpx.get(f"{shared_sim_agent.url}/metrics").text)
    vfs = httpx.get(f"{shared_sim_agent.url}/v1/vfs").json()
    # A VF whose search moved it between adaptive and a set ITR during the scrape is left out.
    steady = {a["pci"] for a, b in zip(before, vfs) if bool(a["itr"]) == bool(b["itr"])}
    for name in ("vftune_vf_receive_bytes_total", "vftune_vf_transmit_bytes_total", "vftune_vf_receive_packets_total",
                 "vftune_vf_transmit_packets_total", "vftune_vf_interrupts_total"):
        assert len(series[name]) == len(vfs), name
    busy = [line for line in series["vftune_vf_receive_bytes_total"] if float(line.split()[-1]) > 1e6]
    assert busy, "bytes, not a rate: a busy VF has counted megabytes after 40 ticks"
    set_itr = {vf["pci"] for vf in vfs if vf["itr"]} & steady
    adaptive = {vf["pci"] for vf in vfs if not vf["itr"]} & steady
    itr_lines = series.get("vftune_vf_itr_interrupts_per_second", [])
    assert {re.search(r'pci="([^"]+)"', line).group(1) for line in itr_lines} & steady == set_itr
    assert all(float(line.split()[-1]) >= 956 for line in itr_lines), "no 0 standing for adaptive"
    flagged = {re.search(r'pci="([^"]+)"', line).group(1) for line in series["vftune_vf_itr_adaptive"]
               if line.endswith(" 1.0")}
    assert flagged & steady == adaptive and len(steady) >= len(vfs) - 2
    assert any('cause="probe",setting="itr"' in line for line in series["vftune_decisions_total"])
    assert len(series["vftune_pf_rx_mode"]) >= 4
    on = [line for line in series["vftune_pf_rx_mode"] if line.endswith(" 1.0")]
    assert len(on) == 2 and all(re.search(r'mode="(de|napi)"', line) for line in on)
    assert series["vftune_tick_duration_seconds_count"] and series["vftune_build_info"]
    assert series["process_resident_memory_bytes"] and series["process_cpu_seconds_total"]


COLLECTOR_SOURCE = (Path(__file__).resolve().parents[1] / "src/vftune/api/metrics.py").read_text()


def test_every_grafana_query_names_an_exported_metric(scrape):
    exported = set(_series(scrape))
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    assert len(exprs) >= 10
    for expr in exprs:
        names = set(re.findall(r"\b((?:vftune|process|python)_[a-z0-9_]+)", expr))
        assert names, f"query names no metric: {expr}"
        # A series that appears only once the cost model has a fit must at least be one the collector makes.
        conditional = {n for n in names - exported if n in COLLECTOR_SOURCE}
        assert names - conditional <= exported, f"{expr}: not exported: {names - exported}"


def test_a_guests_socket_drops_are_a_gauge_of_its_vf_when_known():
    """A VF whose guest agent reports socket drops has them as a gauge (what the tuner subtracts
    from what the VF received); a VF whose drops are unknown has none, not a zero."""
    from prometheus_client import generate_latest

    from vftune.api.metrics import build_registry
    from vftune.model import AgentView, Capabilities, VfView

    def vf(pci: str, drops: float | None) -> VfView:
        return VfView(pci=pci, pf="enp3s0f0", index=0, driver="vfio-pci", guest="udp-1", guest_uuid=None, itr=0,
                      policy="vftune", phase="holding", rx_pps=5e5, rx_bps=3e8, tx_pps=0.0, tx_bps=0.0,
                      interrupts_per_s=1e3, guest_cpu=1.0, fresh=True, updated=None, last_decision=None,
                      policy_state={}, rx_dropped_pps=drops)

    view = AgentView(backend="sim", detail="", started=0.0, interval_s=0.5, ticks=3, last_tick_wall=None,
                     capabilities=Capabilities(backend="sim"), pfs=(), ignored=(), cost_model={},
                     vfs=(vf("0000:03:10.0", 4e5), vf("0000:03:10.2", None)))
    series = _series(generate_latest(build_registry(lambda: view)).decode())
    (line,) = series["vftune_vf_socket_drops_per_second"]
    assert 'pci="0000:03:10.0"' in line and float(line.split()[-1]) == 4e5
