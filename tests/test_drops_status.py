"""Whether each VF's guest socket drops are known, and why not, as an operator sees it: in
/v1/vfs, /metrics and the wide `vftune status`, on the simulated host and on the Linux backend
with a fake qemu-ga (one that serves /proc/net/snmp, one that blocks guest-file-*)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from fake_qga import FakeQga
from waiting import wait_for

from conftest import VFTUNE, RunningAgent, start_agent
from test_guest_drops import guest_texts
from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import pf_controller, vf_policy
from vftune.model import DROPS_SOURCES, VfView
from vftune.sim.host import SimHost

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "src/vftune/sim/builtin"
WIDE = 170


def _status(url: str, columns: int) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb"}
    out = subprocess.run([*VFTUNE, "status", "--url", url], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _drops_cells(text: str) -> dict[str, str]:
    """VF address -> its drops cell in the wide table (the column after CPU)."""
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("VF ") and " drops " in line)
    cols = re.split(r"\s{2,}", header.strip())
    at = cols.index("drops")
    rows = (re.split(r"\s{2,}", line.strip()) for line in lines if re.match(r"^0000:\S+ ", line))
    return {cells[0]: cells[at] for cells in rows if len(cells) == len(cols)}


# -- the simulated host, through a real `vftune run` ---------------------------------------------


@pytest.fixture(scope="module")
def no_agent_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    """udp-small (one VF per guest) with `[host] guest_agent = false`: no guest's drops are known."""
    tmp = tmp_path_factory.mktemp("no-agent")
    text = (BUILTIN / "udp-small.toml").read_text().replace('name = "udp-small"', 'name = "udp-small-no-agent"')
    scenario = tmp / "udp-small-no-agent.toml"
    scenario.write_text(text.replace("[host]\n", "[host]\nguest_agent = false\n", 1))
    agent = start_agent(tmp, "--scenario-file", str(scenario), "--seed", "4", "--speed", "50")
    agent.wait_ticks(6)
    yield agent
    agent.stop()


@pytest.fixture(scope="module")
def agent_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    agent = start_agent(tmp_path_factory.mktemp("agent"), "--sim", "udp-small", "--seed", "4", "--speed", "50")
    agent.wait_ticks(6)
    yield agent
    agent.stop()


def test_without_guest_agents_every_vf_says_unavailable_and_why(no_agent_sim: RunningAgent) -> None:
    vfs = httpx.get(f"{no_agent_sim.url}/v1/vfs").json()
    assert len(vfs) == 5
    for vf in vfs:
        assert vf["rx_dropped_pps"] is None
        assert vf["rx_dropped_source"] == "unavailable"
        assert vf["rx_dropped_reason"] == (f"guest {vf['guest']}: no guest agent answers "
                                           "(the scenario's [host] guest_agent = false)")
    one = httpx.get(f"{no_agent_sim.url}/v1/vfs/{vfs[0]['pci']}").json()
    assert one["rx_dropped_source"] == "unavailable" and one["rx_dropped_reason"] == vfs[0]["rx_dropped_reason"]


def test_wide_status_shows_the_word_and_the_reason_an_operator_can_act_on(no_agent_sim: RunningAgent) -> None:
    out = _status(no_agent_sim.url, WIDE)
    assert max(len(line) for line in out.splitlines()) <= WIDE
    cells = _drops_cells(out)
    assert len(cells) == 5 and set(cells.values()) == {"unavailable"}, out
    reasons = [line.strip() for line in out.splitlines() if line.strip().startswith("drops unknown:")]
    assert reasons == [f"drops unknown: guest udp-{n}: no guest agent answers (the scenario's [host] "
                       "guest_agent = false)" for n in (1, 2, 3, 4)] + [
        "drops unknown: guest rpc-1: no guest agent answers (the scenario's [host] guest_agent = false)"], out


def test_the_status_page_shows_the_word_with_the_reason_on_hover(no_agent_sim: RunningAgent) -> None:
    page = httpx.get(f"{no_agent_sim.url}/").text
    cells = re.findall(r'<td class="n" title="([^"]*)">unavailable</td>', page)
    assert len(cells) == 5 and cells[0] == ("guest udp-1: no guest agent answers (the scenario&#x27;s [host] "
                                            "guest_agent = false)"), cells


def test_narrow_status_has_no_drops_column(no_agent_sim: RunningAgent) -> None:
    out = _status(no_agent_sim.url, 120)
    assert " drops " not in out and "drops unknown" not in out and max(len(line) for line in out.splitlines()) <= 120


def test_with_guest_agents_the_rate_is_shown_and_the_source_named(agent_sim: RunningAgent) -> None:
    vfs = httpx.get(f"{agent_sim.url}/v1/vfs").json()
    assert {vf["rx_dropped_source"] for vf in vfs} == {"guest-agent"}
    assert all(vf["rx_dropped_pps"] is not None for vf in vfs)
    # udp-1 is offered 0.3 Gb/s of 64-byte datagrams: its receiver drops some at its socket.
    udp1 = next(vf for vf in vfs if vf["guest"] == "udp-1")
    assert udp1["rx_dropped_pps"] > 0
    cells = _drops_cells(_status(agent_sim.url, WIDE))
    assert len(cells) == 5 and all(re.fullmatch(r"[\d.]+ [kMG]?p/s", c) for c in cells.values()), cells
    assert cells[udp1["pci"]] != "0 p/s"


def test_metrics_carry_one_source_series_per_vf_and_source(agent_sim: RunningAgent) -> None:
    text = httpx.get(f"{agent_sim.url}/metrics").text
    lines = [line for line in text.splitlines() if line.startswith("vftune_vf_socket_drops_source{")]
    vfs = httpx.get(f"{agent_sim.url}/v1/vfs").json()
    assert len(lines) == len(vfs) * len(DROPS_SOURCES)  # a fixed label set: no churn as states change
    on = sorted(re.search(r'pci="([^"]+)"', line).group(1) for line in lines  # type: ignore[union-attr]
                if 'source="guest-agent"' in line and line.endswith(" 1.0"))
    assert on == sorted(vf["pci"] for vf in vfs)
    assert "# TYPE vftune_vf_socket_drops_source gauge" in text


def test_metrics_pass_promtool(agent_sim: RunningAgent) -> None:
    promtool = ROOT / ".cache/prometheus/usr/bin/promtool"
    if not promtool.exists():
        pytest.skip("scripts/setup --test fetches Debian's promtool")
    text = httpx.get(f"{agent_sim.url}/metrics").text
    out = subprocess.run([str(promtool), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr


def test_openapi_names_the_sources() -> None:
    from vftune.api.models import VfOut

    schema = VfOut.model_json_schema()
    assert schema["properties"]["rx_dropped_source"]["enum"] == list(DROPS_SOURCES)
    assert {"rx_dropped_source", "rx_dropped_reason"} <= set(schema["required"])


def _sim_views(scenario: str, ticks: int) -> tuple[tuple[VfView, ...], tuple[VfView, ...]]:
    """The VFs after the first tick, and after `ticks` more."""
    host = SimHost(scenario, seed=3, speed=float("inf"))
    agent = Agent(host, None, vf_policy("observe"), pf_controller("stock"), AgentConfig())
    agent.start("test")
    first = agent.view().vfs
    for _ in range(ticks):
        host.sleep(agent.config.interval)
        agent.tick()
    return first, agent.view().vfs


def test_a_guest_with_two_vfs_is_shared_and_an_unheld_vf_has_no_guest() -> None:
    """mixed-host: every guest holds two VFs; one VF is held by none."""
    _, vfs = _sim_views("mixed-host", 3)
    assert {vf.rx_dropped_source for vf in vfs if vf.guest} == {"shared"}
    assert all(vf.rx_dropped_pps is None for vf in vfs)
    web1 = next(vf for vf in vfs if vf.guest == "web-1")
    assert web1.rx_dropped_reason == ("guest web-1 holds 2 VFs: its socket drops are counted per guest and "
                                      "cannot be split between them")
    unheld = [vf for vf in vfs if vf.guest is None]
    assert [vf.rx_dropped_source for vf in unheld] == ["no-guest"]


def test_a_rate_needs_two_reads_so_the_first_tick_is_pending() -> None:
    first, last = _sim_views("udp-small", 2)
    assert {vf.rx_dropped_source for vf in first} == {"pending"}
    assert all(vf.rx_dropped_reason.endswith("; a rate needs two reads") for vf in first)
    assert {vf.rx_dropped_source for vf in last} == {"guest-agent"} and all(vf.rx_dropped_pps is not None for vf in last)


# -- the Linux backend on the fixture tree, with fake guest agents -----------------------------------

FILE_COMMANDS = ("guest-file-open", "guest-file-read", "guest-file-close")
PF0 = hosttree.PF0[0]


@pytest.fixture
def one_vf_web1(monkeypatch: pytest.MonkeyPatch) -> str:
    """vm-web1 holds one VF (PF0's VF 2), so its drops are that VF's; vm-web0 still holds three."""
    monkeypatch.delitem(hosttree.VF_OWNERS, (PF0, 3))
    monkeypatch.delitem(hosttree.VF_OWNERS, (hosttree.PF1[0], 1))
    return hosttree.vf_bdf(PF0, 2)


def _files() -> dict[str, bytes]:
    v4, v6 = guest_texts()
    return {"/proc/net/snmp": v4.encode(), "/proc/net/snmp6": v6.encode()}


def _linux_agent(tmp_path: Path, **kwargs: object) -> tuple[Agent, object]:
    pytest.importorskip("libvirt")
    from linux_host import ManualClock, make_host

    clock = ManualClock()
    host, _ = make_host(tmp_path / "host", clock=clock, sleeper=clock.sleep, **kwargs)
    agent = Agent(host, None, vf_policy("observe"), pf_controller("stock"), AgentConfig(interval=1.0))
    agent.start("test")
    return agent, host


def test_linux_a_guest_agent_that_blocks_file_commands_is_named_with_the_retry(
        tmp_path: Path, one_vf_web1: str) -> None:
    sockets = tmp_path / "agents"
    sockets.mkdir()
    rhel = FakeQga(sockets / "vm-web1.sock", _files(), blocked=FILE_COMMANDS, name="vm-web1")
    agent, host = _linux_agent(tmp_path, guest_agent_sockets=sockets, guest_rx_drops="auto")
    try:
        vf = wait_for(lambda: (v := agent.view().vf(one_vf_web1)) and v.rx_dropped_source == "unavailable" and v,
                      "vm-web1's blocked agent to be seen")
        assert vf.rx_dropped_pps is None
        # The host's clock stands still in this test: the backoff's first 5 s are all still to come.
        assert vf.rx_dropped_reason == ("guest vm-web1: its guest agent (qemu-ga 7.2.22) does not allow "
                                        "guest-file-open, guest-file-read, guest-file-close; next try in 5 s")
        others = {v.pci: v for v in agent.view().vfs}
        assert others[hosttree.vf_bdf(PF0, 0)].rx_dropped_source == "shared"  # vm-web0 holds three VFs
        assert others[hosttree.vf_bdf(PF0, 8)].rx_dropped_source == "no-guest"
    finally:
        host.close()  # type: ignore[attr-defined]
        rhel.close()


def test_linux_a_guest_agent_that_serves_its_files_gives_a_rate(tmp_path: Path, one_vf_web1: str) -> None:
    sockets = tmp_path / "agents"
    sockets.mkdir()
    fake = FakeQga(sockets / "vm-web1.sock", _files(), name="vm-web1")
    agent, host = _linux_agent(tmp_path, guest_agent_sockets=sockets, guest_rx_drops="auto")
    try:
        advanced = [0]  # reads the host's clock has been moved on for

        def known() -> VfView | None:
            # The reader reads once per interval on the host's clock, and a count older than 2 s of it
            # is left out: move the clock 1 s on after each read (both files closed), then tick.
            reads = fake.events.count("vm-web1: guest-file-close") // 2
            if reads > advanced[0]:
                advanced[0] = reads
                host.sleep(1.0)  # type: ignore[attr-defined]
            agent.tick()
            vf = agent.view().vf(one_vf_web1)
            return vf if vf is not None and vf.rx_dropped_source == "guest-agent" else None

        vf = wait_for(known, "two reads of vm-web1's drops")
        assert vf.rx_dropped_pps == 0.0  # the fake's counts stand still
        assert vf.rx_dropped_reason == "guest vm-web1: UDP RcvbufErrors (/proc/net/snmp, snmp6) through its guest agent"
    finally:
        host.close()  # type: ignore[attr-defined]
        fake.close()


def test_linux_off_says_off(tmp_path: Path) -> None:
    agent, host = _linux_agent(tmp_path, guest_rx_drops="off")
    try:
        vfs = agent.view().vfs
        assert {vf.rx_dropped_source for vf in vfs} == {"off"}
        assert {vf.rx_dropped_reason for vf in vfs} == {"guests' socket receive drops are not read (--guest-rx-drops off)"}
    finally:
        host.close()  # type: ignore[attr-defined]


def test_linux_without_a_transport_says_unavailable_and_why(tmp_path: Path) -> None:
    from linux_host import make_host

    host, _ = make_host(tmp_path / "host", libvirt=False, guest_rx_drops="auto")
    try:
        host.inventory()
        got = host.vf_drops(hosttree.vf_bdf(PF0, 0))
        assert got is not None and got.source == "unavailable"
        assert got.reason == ("guests' socket receive drops are not read (--guest-rx-drops auto): no libvirt "
                              "connection (--libvirt-uri none) and no --guest-agent-sockets")
    finally:
        host.close()


def test_linux_a_guest_agent_that_has_not_answered_yet_is_pending(tmp_path: Path, one_vf_web1: str) -> None:
    sockets = tmp_path / "agents"
    sockets.mkdir()
    slow = FakeQga(sockets / "vm-web1.sock", _files(), name="vm-web1")
    slow.hold.clear()  # every reply waits: the first read is under way, not failed
    agent, host = _linux_agent(tmp_path, guest_agent_sockets=sockets, guest_rx_drops="auto")
    try:
        wait_for(lambda: "vm-web1: guest-sync" in slow.events, "vm-web1's poller to ask its agent")
        vf = agent.view().vf(one_vf_web1)
        assert vf is not None and vf.rx_dropped_source == "pending" and vf.rx_dropped_pps is None
        assert vf.rx_dropped_reason == "guest vm-web1: the first read through its guest agent is under way"
    finally:
        slow.hold.set()
        host.close()  # type: ignore[attr-defined]
        slow.close()
