"""A real Prometheus server scrapes the running agent's /metrics (Debian's binary, localhost only)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

PROMETHEUS = Path(__file__).resolve().parent.parent / ".cache/prometheus/usr/bin/prometheus"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not PROMETHEUS.exists(), reason="scripts/setup --test fetches Debian's prometheus binary")
def test_prometheus_scrapes_every_vf(sim_agent, tmp_path):
    sim_agent.wait_ticks(5)
    target = urlparse(sim_agent.url).netloc
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs: [{{job_name: vftune, static_configs: [{{targets: ['{target}']}}]}}]\n"
    )
    port = _free_port()
    prom = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"),
    )
    try:
        api = f"http://127.0.0.1:{port}/api/v1/query"
        deadline = time.monotonic() + 60
        series: list = []
        while time.monotonic() < deadline and not series:
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                resp = httpx.get(api, params={"query": "vftune_vf_itr_adaptive"})
                # 503 "Service Unavailable" until Prometheus has opened its storage.
                if resp.status_code == 200:
                    series = resp.json()["data"]["result"]
            except httpx.HTTPError:
                pass  # not listening yet
            if not series:
                time.sleep(0.2)
        vfs = httpx.get(f"{sim_agent.url}/v1/vfs").json()
        assert {s["metric"]["pci"] for s in series} == {vf["pci"] for vf in vfs}
        assert all(s["metric"]["job"] == "vftune" and s["metric"]["pf"] for s in series)
        up = httpx.get(api, params={"query": 'up{job="vftune"}'}).json()["data"]["result"]
        assert up and up[0]["value"][1] == "1"
    finally:
        prom.terminate()
        prom.wait(timeout=30)
