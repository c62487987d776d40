"""The API as an attacker and a careless client meet it: writes need the token, bodies are capped,
bad input is a 4xx naming the parameter without echoing it, and the files are the owner's only."""

from __future__ import annotations

import json
import stat

import httpx

from conftest import start_agent

EVENT = {"guest": "vm1", "operation": "started"}


def test_token_file_and_history_files_are_private(shared_sim_agent):
    for name in ("token", "vftune.db", "vftune.db-wal", "vftune.db-shm"):
        path = shared_sim_agent.db.parent / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name


def test_writes_need_the_bearer_token(shared_sim_agent):
    url = f"{shared_sim_agent.url}/v1/events"
    assert httpx.post(url, json=EVENT).status_code == 401
    assert httpx.post(url, json=EVENT, headers={"Authorization": "Bearer nope"}).status_code == 403
    assert httpx.post(url, json=EVENT, headers=shared_sim_agent.auth).status_code == 202
    assert httpx.get(f"{shared_sim_agent.url}/v1/vfs").status_code == 200, "reads stay open on loopback"


def test_bad_bodies_are_4xx_and_never_echo_raw_input(shared_sim_agent):
    url, auth = f"{shared_sim_agent.url}/v1/events", shared_sim_agent.auth
    too_big = json.dumps({**EVENT, "vfs": ["0000:03:10.0"] * 10000})
    assert httpx.post(url, content=too_big, headers={**auth, "Content-Type": "application/json"}).status_code == 413
    plain = httpx.post(url, content=json.dumps(EVENT), headers={**auth, "Content-Type": "text/plain"})
    assert plain.status_code == 422 and "error" in plain.json()
    surrogate = httpx.post(url, content=b'{"guest": "\\ud800", "operation": "started"}',
                           headers={**auth, "Content-Type": "application/json"})
    assert surrogate.status_code == 422
    forged = httpx.post(url, json={"guest": "vm1\nERROR vftune: forged", "operation": "started"}, headers=auth)
    assert forged.status_code == 422 and "\n" not in forged.json()["error"]
    huge = httpx.post(url, json={"guest": "x" * 5000, "operation": "started"}, headers=auth)
    assert huge.status_code == 422 and "x" * 100 not in huge.text


def test_times_must_be_finite_and_405_says_what_is_allowed(shared_sim_agent):
    url = shared_sim_agent.url
    for bad in ("nan", "inf", "-inf", "1e400"):
        r = httpx.get(f"{url}/v1/decisions", params={"since": bad})
        assert r.status_code == 422 and "since" in r.json()["error"], bad
    r = httpx.delete(f"{url}/v1/events")
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST"
    assert httpx.get(f"{url}/v1/decisions", params={"limit": 100_000}).status_code == 422, "pages are capped"
    spec = httpx.get(f"{url}/openapi.json").json()
    assert "enum" in spec["components"]["schemas"]["GuestEventIn"]["properties"]["operation"]
    since = spec["paths"]["/v1/decisions"]["get"]["parameters"][0]
    assert since["schema"]["format"] == "unix-seconds-or-iso8601"


def test_a_listener_beyond_loopback_needs_the_token_everywhere(tmp_path):
    agent = start_agent(tmp_path, "--sim", "--speed", "50", "--listen", "0.0.0.0:0")
    try:
        log = agent.log.read_text()
        assert "is not loopback: every endpoint" in log
        assert httpx.get(f"{agent.url}/v1/vfs").status_code == 401
        assert httpx.get(f"{agent.url}/openapi.json").status_code == 401
        assert httpx.get(f"{agent.url}/v1/vfs", headers=agent.auth).status_code == 200
    finally:
        agent.stop()
