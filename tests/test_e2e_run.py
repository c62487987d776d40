"""`vftune run --sim --speed 50` as a real process: API, `vftune status`, SIGTERM restores every write."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import httpx

from conftest import VFTUNE


def test_api_shows_the_host_and_its_tuned_vfs(shared_sim_agent):
    url = shared_sim_agent.url
    host = httpx.get(f"{url}/v1/host").json()
    assert host["backend"] == "sim" and host["vf_count"] >= 1
    assert {pf["name"] for pf in host["pfs"]} == {"enp3s0f0", "enp3s0f1"}
    vfs = httpx.get(f"{url}/v1/vfs").json()
    assert len(vfs) == host["vf_count"]
    assert [vf for vf in vfs if (vf["rx_bps"] or 0) > 0], "the mixed host has traffic on some VFs"
    assert [vf for vf in vfs if vf["itr"] != 0], "the search policy has set an ITR on some VF after 40 ticks"


def _busy_vf(url: str) -> str:
    return next(vf["pci"] for vf in httpx.get(f"{url}/v1/vfs").json() if (vf["rx_bps"] or 0) > 0)


def test_a_vf_has_its_policy_state_and_an_ordered_history(shared_sim_agent):
    url = shared_sim_agent.url
    one = _busy_vf(url)
    detail = httpx.get(f"{url}/v1/vfs/{one}").json()
    assert detail["pci"] == one and isinstance(detail["policy_state"], dict)
    history = httpx.get(f"{url}/v1/vfs/{one}/history").json()
    assert len(history["samples"]) >= 10
    assert all(s["rx_bps"] >= 0 for s in history["samples"])
    ts = [s["t"] for s in history["samples"]]
    assert ts == sorted(ts)


def test_api_errors_are_json_bodies_naming_the_parameter(shared_sim_agent):
    url = shared_sim_agent.url
    one = _busy_vf(url)
    missing = httpx.get(f"{url}/v1/vfs/0000:99:10.0")
    assert missing.status_code == 404 and "0000:99:10.0" in missing.json()["error"]
    bad = httpx.get(f"{url}/v1/vfs/not-a-pci")
    assert bad.status_code == 422 and "error" in bad.json()
    bad_since = httpx.get(f"{url}/v1/vfs/{one}/history", params={"since": "yesterday"})
    error = bad_since.json()["error"]
    assert bad_since.status_code == 422 and error.startswith("since") and "yesterday" not in error, "input never echoed"
    backwards = httpx.get(f"{url}/v1/vfs/{one}/history", params={"since": "200", "until": "100"})
    assert backwards.status_code == 422


def test_openapi_documents_the_history_and_metrics_show_the_itr(shared_sim_agent):
    url = shared_sim_agent.url
    assert "/v1/vfs/{vf}/history" in httpx.get(f"{url}/openapi.json").json()["paths"]
    assert "vftune_vf_itr_adaptive{" in httpx.get(f"{url}/metrics").text


def test_status_prints_every_vf_as_json_and_as_a_table(shared_sim_agent):
    url = shared_sim_agent.url
    one = _busy_vf(url)
    out = subprocess.run([*VFTUNE, "status", "--url", url, "--json"], capture_output=True, text=True,
                         check=True)
    status = json.loads(out.stdout)
    keys = {"pci", "pf", "index", "guest", "itr", "rx_pps", "rx_bps", "interrupts_per_s"}
    assert status["vfs"] and all(keys <= set(vf) for vf in status["vfs"])
    table = subprocess.run([*VFTUNE, "status", "--url", url], capture_output=True, text=True, check=True)
    # Below 110 columns the address goes without its domain 0000, as lspci shows it.
    assert one.removeprefix("0000:") in table.stdout and "enp3s0f0" in table.stdout


def test_sigterm_restores_every_vf_to_the_value_it_had_first(sim_agent):
    sim_agent.wait_ticks(40)
    assert sim_agent.stop() == 0
    con = sqlite3.connect(sim_agent.db)
    changed = dict(con.execute(
        "SELECT target, old FROM decisions WHERE setting = 'itr' AND ok = 1 AND reason != 'restore on stop'"
        " GROUP BY target HAVING MIN(id) ORDER BY id"))
    restored = dict(con.execute(
        "SELECT target, applied FROM decisions WHERE setting = 'itr' AND reason = 'restore on stop'"))
    assert changed and set(restored) == set(changed)
    assert all(restored[t] == changed[t] for t in changed), "each VF is back at the value it had first"
    assert con.execute("SELECT stopped FROM runs").fetchone()[0] is not None


def test_status_without_agent_says_where_it_looked():
    out = subprocess.run([*VFTUNE, "status", "--url", "http://127.0.0.1:9"], capture_output=True, text=True)
    assert out.returncode == 1
    assert "cannot reach the vftune agent at http://127.0.0.1:9" in out.stderr
    assert "Traceback" not in out.stderr


DOMAIN_XML = """<domain type='kvm'><name>web-1</name><uuid>8a1c52be-4f0e-4d36-9a51-7d1c0c0e0001</uuid>
<devices><interface type='hostdev' managed='yes'><source>
<address type='pci' domain='0x0000' bus='0x03' slot='0x10' function='0x0'/></source></interface>
</devices></domain>"""


def test_libvirt_hook_tells_the_running_agent(sim_agent):
    sim_agent.wait_ticks(2)
    out = subprocess.run([*VFTUNE, "hook", "web-1", "started", "begin", "-", "--url", sim_agent.url,
                          "--token-file", str(sim_agent.db.parent / "token"), "--timeout", "10"],
                         input=DOMAIN_XML, capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == ""
    events = httpx.get(f"{sim_agent.url}/v1/events").json()
    assert [(e["guest"], e["operation"], e["vfs"]) for e in events] == [("web-1", "started", ["0000:03:10.0"])]
    assert events[0]["uuid"] == "8a1c52be-4f0e-4d36-9a51-7d1c0c0e0001"
    bad = httpx.post(f"{sim_agent.url}/v1/events", json={"guest": "x", "operation": "exploded"},
                     headers=sim_agent.auth)
    assert bad.status_code == 422 and "operation" in bad.json()["error"] and "exploded" not in bad.json()["error"]


def test_libvirt_hook_never_fails_a_guest_start_when_the_agent_is_down():
    out = subprocess.run([*VFTUNE, "hook", "web-1", "started", "begin", "-", "--url", "http://127.0.0.1:9",
                          "--timeout", "10"], input="<not-xml", capture_output=True, text=True)
    assert out.returncode == 0
    assert "malformed domain XML" in out.stderr and "not reached" in out.stderr
