"""The API in a process of its own (api/process.py), as an operator meets it: it is replaced when
it dies while the agent tunes on, it ends with the agent, and writes still reach the agent."""

from __future__ import annotations

import re
import signal
import time

import httpx
import psutil
import pytest

from conftest import RunningAgent


def api_process(agent: RunningAgent) -> psutil.Process:
    found = [c for c in psutil.Process(agent.proc.pid).children()
             if "vftune.api.process" in " ".join(c.cmdline())]
    assert len(found) == 1, found
    return found[0]


def wait_for_new_api(agent: RunningAgent, old_pid: int, timeout: float = 30.0) -> dict:
    """Poll until a new API process answers (a condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert agent.proc.poll() is None, agent.log.read_text()
        try:
            r = httpx.get(f"{agent.url}/healthz", timeout=2)
            if r.status_code == 200 and api_process(agent).pid != old_pid:
                return dict(r.json())
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no new API process answered: {agent.log.read_text()[-2000:]}")


def test_a_killed_api_process_is_replaced_and_tuning_goes_on(sim_agent: RunningAgent) -> None:
    before = sim_agent.wait_ticks(4)["ticks"]
    old = api_process(sim_agent)
    old.send_signal(signal.SIGKILL)
    old.wait(10)
    body = wait_for_new_api(sim_agent, old.pid)
    assert body["status"] == "ok" and body["ticks"] > before
    assert re.search(rf"WARNING .*API process {old.pid} exited \(signal 9\)", sim_agent.log.read_text())
    # The new process reaches the agent both ways: a guest event is recorded by the agent's
    # store and read back through the API's own connection.
    posted = httpx.post(f"{sim_agent.url}/v1/events", headers=sim_agent.auth,
                        json={"guest": "web-1", "operation": "started", "vfs": ["0000:03:10.0"]})
    assert posted.status_code == 202, posted.text
    events = httpx.get(f"{sim_agent.url}/v1/events", params={"since": 0}).json()
    assert [e["id"] for e in events] == [posted.json()["id"]]
    assert sim_agent.stop() == 0


def test_the_api_process_ends_with_the_agent(sim_agent: RunningAgent) -> None:
    sim_agent.wait_ticks(2)
    api = api_process(sim_agent)
    sim_agent.proc.kill()  # kill -9: no drain is sent; the API sees its link close
    sim_agent.proc.wait()
    api.wait(10)  # raises psutil.TimeoutExpired if it stayed, serving a dead agent's state
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{sim_agent.url}/healthz", timeout=2)


def test_metrics_keep_process_figures_for_the_agent(sim_agent: RunningAgent) -> None:
    sim_agent.wait_ticks(2)
    text = httpx.get(f"{sim_agent.url}/metrics").text

    def value(name: str) -> float:
        match = re.search(rf"^{name} (\S+)$", text, re.M)
        assert match, name
        return float(match.group(1))

    # process_* describe the agent, as before the API had a process of its own; the API
    # process has its own prefix.
    assert value("process_start_time_seconds") == pytest.approx(psutil.Process(sim_agent.proc.pid).create_time(), abs=1)
    api = api_process(sim_agent)
    assert value("vftune_api_process_start_time_seconds") == pytest.approx(api.create_time(), abs=1)


def test_a_reader_after_a_quiet_spell_gets_the_agents_latest_ticks_not_an_old_view(sim_agent: RunningAgent) -> None:
    # /healthz reads the agent's heartbeat (every 2 s) and asks for no view; a first reader after
    # a heartbeat newer than its view waits for the view after the agent's next tick.
    first = httpx.get(f"{sim_agent.url}/healthz", timeout=10).json()["ticks"]
    quiet_from = time.monotonic()
    while time.monotonic() - quiet_from < 3.0:  # the scenario: 3 s with health checks only
        health = httpx.get(f"{sim_agent.url}/healthz", timeout=10).json()
        time.sleep(0.2)
    assert health["ticks"] > first, "the heartbeat carries the ticks"
    host = httpx.get(f"{sim_agent.url}/v1/host", headers=sim_agent.auth, timeout=10)
    assert host.status_code == 200 and host.json()["ticks"] >= health["ticks"]
