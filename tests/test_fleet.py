"""What a fleet does with vftune: scrape /metrics from another host without the token (a
network namespace joined by a veth pair stands for the scraper's host), set rules over the
API with and without the token, keep them across a restart, match guests by UUID, and read a
dashboard that keeps hosts apart."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from conftest import VFTUNE, start_agent

ROOT = Path(__file__).resolve().parents[1]
PIN = {"rules": [{"match": {"guest": "*"}, "pin_itr": 20000}]}


def _guest_states(agent, token: str | None = None) -> list[dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return [vf for vf in httpx.get(f"{agent.url}/v1/vfs", headers=headers).json() if vf["guest"]]


def _wait_for(condition, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} did not hold within {timeout:g} s")


@pytest.fixture
def scraper_namespace():
    """A namespace `vftscrape-<pid>` whose veth end 10.231.77.2 reaches the host's 10.231.77.1."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    from pyroute2 import IPRoute, netns

    name, host_if, ns_if = f"vftscrape-{os.getpid()}", f"vfs{os.getpid() % 10000}h", f"vfs{os.getpid() % 10000}n"
    try:
        netns.create(name)
    except OSError as exc:
        pytest.skip(f"cannot create a network namespace here: {exc}")
    ipr = IPRoute()
    try:
        ipr.link("add", ifname=host_if, kind="veth", peer=ns_if)
        ipr.link("set", index=ipr.link_lookup(ifname=ns_if)[0], net_ns_fd=name)
        host = ipr.link_lookup(ifname=host_if)[0]
        ipr.addr("add", index=host, address="10.231.77.1", prefixlen=30)
        ipr.link("set", index=host, state="up")
        inside = IPRoute(netns=name)
        try:
            peer = inside.link_lookup(ifname=ns_if)[0]
            inside.addr("add", index=peer, address="10.231.77.2", prefixlen=30)
            inside.link("set", index=peer, state="up")
            inside.link("set", index=inside.link_lookup(ifname="lo")[0], state="up")
        finally:
            inside.close()
        yield name
    finally:
        links = ipr.link_lookup(ifname=host_if)
        if links:
            ipr.link("del", index=links[0])
        ipr.close()
        netns.remove(name)


def _from_namespace(name: str, url: str) -> tuple[int, str, str]:
    """GET url from inside the namespace: status, body, and the source address the agent saw."""
    code = ("import httpx, sys; r = httpx.get(sys.argv[1], timeout=10); "
            "print(r.status_code); print(r.text)")
    out = subprocess.run(["ip", "netns", "exec", name, str(ROOT / ".venv/bin/python"), "-c", code, url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    status, _, body = out.stdout.partition("\n")
    return int(status), body, out.stderr


def test_a_scraper_on_another_address_reads_metrics_without_the_token_and_nothing_else(tmp_path, scraper_namespace):
    agent = start_agent(tmp_path, "--sim", "mixed-host", "--speed", "20", "--metrics-listen", "10.231.77.1:0")
    try:
        port = int(_wait_for(lambda: re.search(r"metrics \(no token\) on http://10\.231\.77\.1:(\d+)/metrics",
                                               agent.log.read_text()), what="the metrics listener's log line").group(1))
        agent.wait_ticks(8)
        base = f"http://10.231.77.1:{port}"
        status, body, _ = _from_namespace(scraper_namespace, f"{base}/metrics")
        assert status == 200
        assert re.search(r'^vftune_vf_receive_bytes_total\{guest="web-1",pci="0000:03:10.0"', body, re.M)
        assert _from_namespace(scraper_namespace, f"{base}/healthz")[0] == 200
        for path in ("/v1/vfs", "/v1/host", "/v1/rules", "/", "/docs", "/openapi.json"):
            assert _from_namespace(scraper_namespace, f"{base}{path}")[0] == 404, path
        # The API itself stays on loopback, out of the scraper's reach, and keeps its token rules.
        assert httpx.put(f"{agent.url}/v1/rules", json=PIN).status_code == 401
    finally:
        agent.stop()


def test_rules_over_the_api_need_the_token_pin_at_the_next_tick_and_survive_a_restart(tmp_path):
    agent = start_agent(tmp_path, "--sim", "mixed-host", "--speed", "20")
    try:
        agent.wait_ticks(4)
        assert httpx.put(f"{agent.url}/v1/rules", json=PIN).status_code == 401
        assert httpx.get(f"{agent.url}/v1/rules").status_code == 401
        wrong = httpx.put(f"{agent.url}/v1/rules", json=PIN, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 403
        assert not any(vf["state"] == "pinned" for vf in _guest_states(agent))
        put = httpx.put(f"{agent.url}/v1/rules", json=PIN, headers=agent.auth)
        assert put.status_code == 200, put.text
        assert put.json()["rules"][0] | {"source": "api"} == put.json()["rules"][0]
        # 20000/s as the 82599 can deliver it (2.048-us steps): within a step of it.
        _wait_for(lambda: all(vf["state"] == "pinned" and abs(vf["itr"] - 20000) < 1000 for vf in _guest_states(agent)),
                  what="every guest VF pinned near 20000/s")
        assert {vf["rule"] for vf in _guest_states(agent)} == {"api rule 1 (guest=*)"}
        listed = httpx.get(f"{agent.url}/v1/rules", headers=agent.auth).json()["rules"]
        assert listed == [{"match": {"guest": "*"}, "objective": None, "max_interval_us": None,
                           "margin": None, "pin_itr": 20000, "exclude": None, "source": "api", "index": 1}]
    finally:
        assert agent.stop() == 0
    # A second run on the same state directory starts with the API's rules.
    again = start_agent(tmp_path, "--sim", "mixed-host", "--speed", "20")
    try:
        again.wait_ticks(2)
        assert all(vf["state"] == "pinned" for vf in _guest_states(again))
        cleared = httpx.put(f"{again.url}/v1/rules", json={"rules": []}, headers=again.auth)
        assert cleared.status_code == 200 and cleared.json() == {"rules": []}
        _wait_for(lambda: not any(vf["state"] == "pinned" for vf in _guest_states(again)), what="pins lifted")
    finally:
        again.stop()


def test_a_bad_rules_body_names_every_problem_and_changes_nothing(tmp_path):
    agent = start_agent(tmp_path, "--sim", "mixed-host", "--speed", "20")
    try:
        agent.wait_ticks(2)
        bad = {"rules": [{"match": {"guest": "*", "colour": "red"}, "pin_itr": True},
                         {"match": {"uuid": "x"}, "objective": "fastest", "exclude": "yes"}]}
        resp = httpx.put(f"{agent.url}/v1/rules", json=bad, headers=agent.auth)
        assert resp.status_code == 422
        problems = resp.json()["problems"]
        assert len(problems) == 4
        assert "rules[0].match.colour = \"red\"" in problems[0]
        assert any("rules[0].pin_itr = true" in p for p in problems)  # TOML's spelling, not Python's True
        assert any("rules[1].objective = \"fastest\"" in p for p in problems)
        for body in ({"rule": []}, [], {"rules": "all"}):
            answer = httpx.put(f"{agent.url}/v1/rules", json=body, headers=agent.auth)
            assert answer.status_code == 422 and "error" in answer.json(), body
        assert httpx.get(f"{agent.url}/v1/rules", headers=agent.auth).json() == {"rules": []}
    finally:
        agent.stop()


def test_a_rule_matches_a_guest_by_its_domain_uuid(tmp_path):
    agent = start_agent(tmp_path, "--sim", "mixed-host", "--speed", "20")
    try:
        agent.wait_ticks(2)
        vfs = _guest_states(agent)
        target = next(vf for vf in vfs if vf["guest"] == "web-1")
        assert target["guest_uuid"]
        body = {"rules": [{"match": {"uuid": target["guest_uuid"].upper()}, "pin_itr": 30000}]}
        assert httpx.put(f"{agent.url}/v1/rules", json=body, headers=agent.auth).status_code == 200
        _wait_for(lambda: all((vf["state"] == "pinned") == (vf["guest"] == "web-1") for vf in _guest_states(agent)),
                  what="web-1's VFs pinned, no other")
    finally:
        agent.stop()


def test_drop_ins_follow_the_file_and_config_check_lists_every_problem(tmp_path):
    main = tmp_path / "vftune.toml"
    main.write_text('[run]\ninterval = 0.5\n[[rule]]\nmatch = { guest = "web-*" }\npin_itr = 10000\n')
    (tmp_path / "vftune.d").mkdir()
    (tmp_path / "vftune.d" / "20-batch.toml").write_text('[[rule]]\nmatch = { guest = "batch-*" }\nexclude = true\n')
    (tmp_path / "vftune.d" / "10-run.toml").write_text("[run]\ninterval = 1.0\n")
    from vftune import rules

    config = rules.load(str(main))
    assert config.run == {"interval": 1.0}
    assert [r.label for r in config.rules] == ["rule 1 (guest=web-*)",
                                               f"{tmp_path}/vftune.d/20-batch.toml rule 1 (guest=batch-*)"]
    ok = subprocess.run([*VFTUNE, "config", "check", str(main)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    (tmp_path / "vftune.d" / "30-bad.toml").write_text(
        '[run]\ninterval = "fast"\nlisten = "nowhere"\nlog-level = "loud"\nguest-agent = true\n'
        '[[rule]]\nmatch = { guest = "x" }\nexclude = "yes"\n')
    out = subprocess.run([*VFTUNE, "config", "check", str(main)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    for expected in ('run.interval = "fast"', 'run.listen = "nowhere"', 'run.log-level = "loud"',
                     "run.guest-agent = true", 'rule[1].exclude = "yes"'):
        assert any(expected in line for line in lines), (expected, lines)
    assert all(line.startswith(f"vftune: {tmp_path}/vftune.d/30-bad.toml: ") for line in lines)


def test_the_dashboard_keeps_hosts_apart():
    board = json.loads((ROOT / "contrib/grafana-vftune.json").read_text())
    names = {v["name"] for v in board["templating"]["list"]}
    assert {"job", "instance"} <= names
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 16
    for expr in exprs:
        assert 'job=~"$job"' in expr and 'instance=~"$instance"' in expr, expr
        for by in re.findall(r"by \(([^)]*)\)", expr):
            assert "instance" in by, expr


def test_the_unit_takes_its_scrapers_from_etc_default(tmp_path):
    defaults = tmp_path / "vftune"
    defaults.write_text('VFTUNE_ARGS="--metrics-listen 0.0.0.0:9740"\n'
                        'VFTUNE_SCRAPERS="10.0.0.5 192.168.40.0/24 fd00::/8 $(reboot)"\n')
    out_dir = tmp_path / "generated"
    run = subprocess.run([str(ROOT / "systemd/vftune-scrapers-generator"), str(out_dir), "", ""],
                         env={**os.environ, "VFTUNE_DEFAULTS": str(defaults)}, capture_output=True, text=True,
                         timeout=30)
    assert run.returncode == 0, run.stderr
    assert "ignoring '$(reboot)'" in run.stderr
    drop_in = (out_dir / "vftune.service.d/scrapers.conf").read_text()
    assert "\n[Service]\nIPAddressAllow=10.0.0.5 192.168.40.0/24 fd00::/8\n" in drop_in
    # Nothing listed: no drop-in, the unit's loopback-only rule stands.
    defaults.write_text('VFTUNE_ARGS=""\nVFTUNE_SCRAPERS=""\n')
    empty = tmp_path / "none"
    subprocess.run([str(ROOT / "systemd/vftune-scrapers-generator"), str(empty)],
                   env={**os.environ, "VFTUNE_DEFAULTS": str(defaults)}, check=True, timeout=30)
    assert not (empty / "vftune.service.d").exists()
    unit = (ROOT / "systemd/vftune.service").read_text()
    assert "IPAddressAllow=localhost" in unit and "IPAddressDeny=any" in unit
