"""The API against hostile clients on a real `vftune run`: sockets that never finish a header,
a chunked body over the cap, a write without the token whose body is garbage, a DNS-rebinding
page (a foreign Host on the loopback listener), and uvicorn's own log lines under json."""

from __future__ import annotations

import contextlib
import json
import socket
import time

import httpx
import pytest

from conftest import start_agent
from vftune.api.serving import HEADER_TIMEOUT_S, MAX_CONNECTIONS

EVENT = {"guest": "vm1", "operation": "started"}


@pytest.fixture(scope="module")
def json_agent(tmp_path_factory):
    agent = start_agent(tmp_path_factory.mktemp("agent"), "--sim", "paper-1vm", "--speed", "20",
                        "--log-format", "json")
    try:
        agent.wait_ticks(3)
        yield agent
    finally:
        if agent.proc.poll() is None:
            agent.stop()


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def test_a_write_without_the_token_is_401_before_its_body_is_parsed(json_agent):
    url = f"{json_agent.url}/v1/events"
    garbage = httpx.post(url, content=b"{not json", headers={"Content-Type": "application/json"})
    assert garbage.status_code == 401, garbage.text
    wrong = httpx.post(url, content=b"[1,2", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 403
    assert httpx.delete(f"{json_agent.url}/v1/vfs").status_code == 405, "no route: 405 as before, token or not"


def test_a_chunked_body_over_the_cap_is_413(json_agent):
    big = json.dumps({**EVENT, "vfs": ["0000:03:10.0"] * 10000}).encode()

    def chunks():  # no Content-Length: httpx sends Transfer-Encoding: chunked
        for i in range(0, len(big), 4096):
            yield big[i:i + 4096]

    r = httpx.post(f"{json_agent.url}/v1/events", content=chunks(),
                   headers={**json_agent.auth, "Content-Type": "application/json"})
    assert r.status_code == 413 and "error" in r.json()
    small = json.dumps(EVENT).encode()
    ok = httpx.post(f"{json_agent.url}/v1/events", content=iter([small[:10], small[10:]]),
                    headers={**json_agent.auth, "Content-Type": "application/json"})
    assert ok.status_code == 202, ok.text


def test_a_foreign_host_header_reads_nothing_from_a_loopback_listener(json_agent):
    rebinding = httpx.get(f"{json_agent.url}/v1/vfs", headers={"Host": "attacker.example:8740"})
    assert rebinding.status_code == 421 and "vfs" not in rebinding.text
    for host in ("127.0.0.1", "localhost:8740", "[::1]:8740", "127.0.0.1:1"):
        assert httpx.get(f"{json_agent.url}/healthz", headers={"Host": host}).status_code == 200, host


def test_sockets_holding_half_a_header_never_take_the_api_down(json_agent):
    host, port = _address(json_agent.url)
    slow = []
    try:
        for _ in range(MAX_CONNECTIONS + 600):  # over the cap, as the 1,100
            s = socket.create_connection((host, port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            slow.append(s)
        ok = 0
        for _ in range(20):
            with contextlib.suppress(httpx.TransportError):
                ok += httpx.get(f"{json_agent.url}/healthz", timeout=HEADER_TIMEOUT_S * 3).status_code == 200
        assert ok == 20, f"{ok}/20 /healthz probes answered beside {len(slow)} slow sockets"
        # The header deadline closes what is left of them.
        deadline = time.monotonic() + HEADER_TIMEOUT_S * 3
        first = slow[-1]
        first.settimeout(max(0.1, deadline - time.monotonic()))
        assert first.recv(1) == b"", "a socket still sending its header is closed by the deadline"
    finally:
        for s in slow:
            s.close()
    assert json_agent.proc.poll() is None


def test_uvicorns_own_lines_are_json_under_log_format_json(json_agent):
    host, port = _address(json_agent.url)
    with socket.create_connection((host, port)) as s:
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        s.settimeout(HEADER_TIMEOUT_S)
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    deadline = time.monotonic() + HEADER_TIMEOUT_S
    while "Invalid HTTP request" not in json_agent.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = [line for line in json_agent.log.read_text().splitlines() if line.strip()]
    assert any("Invalid HTTP request" in line for line in lines)
    for line in lines:
        record = json.loads(line)  # raises on any plain line
        assert {"ts", "level", "logger", "msg"} <= record.keys()
