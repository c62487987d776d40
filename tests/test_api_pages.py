"""The API's two hot routes in process: /v1/vfs from bytes rendered once per tick (ETag, 304), and
a VF's history pages (schema, cursor paging across the raw and 1-minute rows)."""

from __future__ import annotations

import threading
import time

import psutil
import pytest
from fastapi.testclient import TestClient

from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import pf_controller, vf_policy
from vftune.api import models
from vftune.api.app import create_app
from vftune.sim.host import SimHost
from vftune.store.db import Store
from vftune.store.pages import PagesUnavailable, PageWorkers


def _tick(agent: Agent, n: int = 1) -> None:
    for _ in range(n):
        agent.host.sleep(agent.config.interval)
        agent.tick()


@pytest.fixture
def live(tmp_path):
    host = SimHost("mixed-host", seed=3, speed=float("inf"))
    agent = Agent(host, Store(tmp_path / "h.db"), vf_policy("search"), pf_controller("hybrid"), AgentConfig())
    agent.start("test")
    _tick(agent, 4)
    with TestClient(create_app(agent, agent.store, token="t")) as client:
        yield agent, client


def test_vfs_is_the_documented_list_and_the_same_bytes_until_the_next_tick(live):
    agent, client = live
    first = client.get("/v1/vfs")
    assert first.status_code == 200 and first.headers["content-type"] == "application/json"
    listed = [models.VfOut.model_validate(vf) for vf in first.json()]
    assert [vf.pci for vf in listed] == [vf.pci for vf in agent.view().vfs]
    assert {vf.pci: vf.itr for vf in listed} == {vf.pci: vf.itr for vf in agent.view().vfs}
    again = client.get("/v1/vfs")
    assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
    # A client that has this version is told so, without the body.
    same = client.get("/v1/vfs", headers={"If-None-Match": first.headers["etag"]})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == first.headers["etag"]
    assert client.get("/v1/vfs", headers={"If-None-Match": f'"other", W/{first.headers["etag"]}'}).status_code == 304
    _tick(agent)
    newer = client.get("/v1/vfs", headers={"If-None-Match": first.headers["etag"]})
    assert newer.status_code == 200 and newer.headers["etag"] != first.headers["etag"]
    assert {vf["updated"] for vf in newer.json()} != {vf["updated"] for vf in first.json()}, "the new tick's samples"


def test_openapi_still_documents_the_vfs_body_and_the_304(live):
    _, client = live
    get = client.get("/openapi.json").json()["paths"]["/v1/vfs"]["get"]
    schema = get["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["type"] == "array" and schema["items"]["$ref"].endswith("/VfOut")
    assert "304" in get["responses"]


def test_history_pages_follow_the_cursor_through_raw_and_minute_rows_without_gaps(live):
    agent, client = live
    _tick(agent, 600)  # 150 simulated s at 0.25-s ticks
    pci = next(vf.pci for vf in agent.view().vfs if vf.rx_bps)
    now = agent.wall_now()
    agent.store.prune(now - 60)  # older than a minute: rolled up to 1-minute rows
    everything = agent.store.samples(pci, 0, now, 1000)
    # raw rows span a second (four ticks), 1-minute rows up to a minute
    assert any(r["dt"] > 1.5 for r in everything) and any(r["dt"] < 1.5 for r in everything)
    seen: list[float] = []
    seen_decisions: list[int] = []
    cursor = None
    for _ in range(50):
        params = {"since": "0", "until": repr(now), "limit": "25", **({"cursor": cursor} if cursor else {})}
        page = client.get(f"/v1/vfs/{pci}/history", params=params)
        assert page.status_code == 200
        body = models.History.model_validate(page.json())
        assert [s.t for s in body.samples] == sorted(s.t for s in body.samples)
        assert all(isinstance(s.fresh, bool) for s in body.samples) and all(isinstance(d.ok, bool) for d in body.decisions)
        seen = [s.t for s in body.samples] + seen
        seen_decisions = [d.id for d in body.decisions] + seen_decisions
        if body.next_cursor is not None:  # a page's decisions are those of the time its samples span
            assert all(float(body.next_cursor) <= r.t for r in [*body.samples, *body.decisions])
        cursor = body.next_cursor
        if cursor is None:
            break
    assert seen == [r["t"] for r in everything], "every row once, in order, as the store holds them"
    every_decision = [d["id"] for d in agent.store.decisions(pci, 0, now, 10_000)]
    assert len(every_decision) >= 3 and seen_decisions == every_decision, "every decision once, in order"


def test_history_pages_come_from_worker_processes_and_survive_their_death(live):
    agent, client = live
    _tick(agent, 40)
    pci = next(vf.pci for vf in agent.view().vfs if vf.rx_bps)
    now = agent.wall_now()
    params = {"since": "0", "until": repr(now), "limit": "10"}
    first = client.get(f"/v1/vfs/{pci}/history", params=params)
    samples, decisions, older = agent.store.history_page(pci, 0, now, 10)
    assert first.status_code == 200
    assert first.json() == {"pci": pci, "since": 0.0, "until": now, "samples": samples, "decisions": decisions,
                            "next_cursor": repr(older) if older is not None else None}
    workers = [p for p in psutil.Process().children() if "from vftune.store.pages import serve" in " ".join(p.cmdline())]
    assert workers, "read by a worker process, not the agent's"
    for p in workers:
        p.kill()
    psutil.wait_procs(workers, timeout=10)
    again = client.get(f"/v1/vfs/{pci}/history", params=params)
    assert again.status_code == 200 and again.json() == first.json(), "a new worker serves the next page"
    feed = client.get("/v1/decisions", params={"since": "0", "until": repr(now), "limit": "3"})
    assert len(feed.json()) == 3 and feed.json() == agent.store.decisions(None, 0, now, 3)
    assert feed.headers["x-next-cursor"] == str(feed.json()[0]["id"])


def test_a_worker_that_stops_answering_is_ended_and_the_next_page_gets_a_new_one(live):
    agent, _ = live
    pci = next(vf.pci for vf in agent.view().vfs if vf.rx_bps)
    now = agent.wall_now()
    workers = PageWorkers(agent.store.path, workers=1, answer_s=1.0)
    try:
        first = workers.vf_page({}, pci, 0, now, 5, False)
        (stuck,) = [p for p in psutil.Process().children()
                    if str(agent.store.path) in p.cmdline() and "from vftune.store.pages import serve" in " ".join(p.cmdline())]
        stuck.suspend()  # alive, holding its socket, never answering
        with pytest.raises(PagesUnavailable, match="no history worker answered within 1 s"):
            workers.vf_page({}, pci, 0, now, 5, False)
        assert not stuck.is_running() or stuck.status() == psutil.STATUS_ZOMBIE, "the stuck worker was ended"
        assert workers.vf_page({}, pci, 0, now, 5, False) == first, "a new worker answers"
    finally:
        workers.close()


def test_requests_waiting_for_a_worker_get_one_in_order_of_arrival(tmp_path):
    """A page asked first is read first: one asked just as a worker comes free does not jump the
    queue (that made the unlucky requests of 20 clients wait several pages' time)."""
    Store(tmp_path / "h.db").close()
    workers = PageWorkers(tmp_path / "h.db", workers=1)
    served: list[int] = []
    held = workers._take()  # the only worker, busy
    try:
        threads = []
        for n in range(5):
            def wait_turn(n: int = n) -> None:
                worker = workers._take()
                served.append(n)
                workers._give_back(worker)

            threads.append(threading.Thread(target=wait_turn))
            threads[-1].start()
            _until(lambda n=n: len(workers._waiting) == n + 1)  # each is queued before the next arrives
        workers._give_back(held)
        late = workers._take()  # arrives after all five: served after them
        served.append(5)
        workers._give_back(late)
        for t in threads:
            t.join(10)
        assert served == [0, 1, 2, 3, 4, 5]
    finally:
        workers.close()


def _until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_a_worker_no_page_needed_for_a_while_exits_and_the_next_page_starts_one(tmp_path):
    """Idle workers cost memory (about 17 MB each) for nothing: they exit, and a page later is
    read all the same by a new one."""
    Store(tmp_path / "h.db").close()
    workers = PageWorkers(tmp_path / "h.db", workers=1, idle_exit_s=0.2)

    def page_workers() -> list[psutil.Process]:
        found = []
        for child in psutil.Process().children():
            try:
                if "vftune.store.pages" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.ZombieProcess:
                found.append(child)  # exited but not waited for yet: still ours to reap
            except psutil.NoSuchProcess:
                pass
        return found

    try:
        body, count, _ = workers.decisions(0.0, 1e12, 10, None)
        assert (body, count) == (b"[]", 0)
        _until(lambda: workers.running == 0 and page_workers() == [])  # exited, and waited for
        assert workers.decisions(0.0, 1e12, 10, None)[1] == 0
    finally:
        workers.close()
