"""The workload memory over the API: a real agent exports it, another imports it; token required."""

from __future__ import annotations

import time

import httpx

from conftest import start_agent


def _wait_for_classes(url: str, auth: dict[str, str], timeout: float = 90.0) -> dict:
    """Poll GET /v1/profiles until a search has converged somewhere (a condition, not a sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = httpx.get(f"{url}/v1/profiles", headers=auth).json()
        if body.get("host"):
            return body
        time.sleep(0.1)
    raise AssertionError("no workload class remembered in time")


def test_profiles_export_and_seed_another_host(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first = start_agent(tmp_path / "a", "--sim", "paper-3vm", "--speed", "50")
    second = start_agent(tmp_path / "b", "--sim", "paper-3vm", "--speed", "50", "--seed", "1")
    try:
        assert httpx.get(f"{first.url}/v1/profiles").status_code == 401
        assert httpx.get(f"{first.url}/v1/profiles", headers={"Authorization": "Bearer nope"}).status_code == 403
        record = _wait_for_classes(first.url, first.auth)
        assert record["version"] == 1 and all("/" in key for key in record["host"])
        assert httpx.put(f"{second.url}/v1/profiles", json=record).status_code == 401
        r = httpx.put(f"{second.url}/v1/profiles", json=record, headers=second.auth)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["imported"] >= len(record["host"])
        assert set(record["host"]) <= set(body["profiles"]["host"])
        bad = httpx.put(f"{second.url}/v1/profiles", json={**record, "version": 7}, headers=second.auth)
        assert bad.status_code == 422 and "version" in bad.json()["error"]
        bad = httpx.put(f"{second.url}/v1/profiles", json={"version": 1, "host": {"fast/x": {"itr": 1, "bps": 1}}},
                        headers=second.auth)
        assert bad.status_code == 422 and "workload class" in bad.json()["error"]
    finally:
        assert first.stop() == 0 and second.stop() == 0


def test_a_policy_without_memory_says_so(tmp_path):
    agent = start_agent(tmp_path, "--sim", "paper-3vm", "--speed", "50", "--policy", "fixed:20000")
    try:
        r = httpx.get(f"{agent.url}/v1/profiles", headers=agent.auth)
        assert r.status_code == 404 and "no workload memory" in r.json()["error"]
    finally:
        assert agent.stop() == 0
