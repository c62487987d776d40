"""The guest-agent actuator against a real qemu-ga, run in a network namespace whose veth has
a fixture VF's MAC: the namespace stands in for the guest, qemu-ga's PATH for its tools."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from waiting import WAIT_S, wait_for

from vftune.hostdriver.linux.guest_agent import (
    AgentChannel,
    AgentError,
    Coalesce,
    GuestAgentActuator,
    GuestVf,
    Limits,
    RestoreEntry,
    UnixSocketChannel,
    guest_exec,
    socket_connector,
)
from vftune.model import Applied

pytestmark = pytest.mark.root

QGA = shutil.which("qemu-ga", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
IP = shutil.which("ip", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") or "ip"
if os.geteuid() != 0:
    pytest.skip("network namespaces and veth pairs need root", allow_module_level=True)
if QGA is None:
    pytest.skip("qemu-ga is not installed (Debian's qemu-guest-agent; scripts/setup --test)", allow_module_level=True)

from pyroute2 import IPRoute  # noqa: E402
from qga_process import qga_argv, start_qga_process, stop_qga_process  # noqa: E402
from vethns import veth_namespace  # noqa: E402

STANDIN = Path(__file__).parent / "fixtures" / "guest_agent"
GUEST = "vm-web0"


def fixture_vf() -> tuple[str, str]:
    """The first VF of vm-web0 and the MAC the libvirt fixture gives it."""
    pci = hosttree.vf_bdf(hosttree.PF0[0], 0)
    root = ET.fromstring(hosttree.libvirt_node_xml())
    for dom in root.iter("domain"):
        if dom.findtext("name") != GUEST:
            continue
        for iface in dom.iter("interface"):
            a = iface.find("source/address")
            assert a is not None
            bdf = f"{int(a.get('domain', '0'), 0):04x}:{int(a.get('bus', '0'), 0):02x}:" \
                  f"{int(a.get('slot', '0'), 0):02x}.{int(a.get('function', '0'), 0):x}"
            mac = iface.find("mac")
            if bdf == pci and mac is not None:
                return pci, mac.get("address", "")
    raise AssertionError(f"no MAC for {pci} in the libvirt fixture")


VF_PCI, VF_MAC = fixture_vf()
VF = GuestVf(VF_PCI, GUEST, VF_MAC)
FAST = Limits(call_timeout_s=3.0, job_deadline_s=10.0, guest_min_interval_s=0.0, backoff_initial_s=60.0)


@pytest.fixture
def guest_ns() -> Iterator[str]:
    with veth_namespace("vftune-qga", mac=VF_MAC) as (name, _):
        yield name


@dataclass
class Agent:
    socket: Path
    proc: subprocess.Popen[bytes]
    ethtool_dir: Path
    log: Path

    def stop(self) -> None:
        stop_qga_process(self.proc)


def start_qga(tmp_path: Path, ns: str, tag: str, standin: bool, *extra: str, path: str | None = None) -> Agent:
    sock, state = tmp_path / f"{tag}.sock", tmp_path / f"{tag}-state"
    state.mkdir()
    etdir = tmp_path / f"{tag}-ethtool"
    etdir.mkdir()
    env = {**os.environ, "VFTUNE_FAKE_ETHTOOL_DIR": str(etdir)}
    if standin:
        env["PATH"] = f"{STANDIN}:{env.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin"
    else:
        env["PATH"] = f"{env.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin"
    if path is not None:
        env["PATH"] = path
    log = tmp_path / f"{tag}.log"
    proc = start_qga_process([IP, "netns", "exec", ns, *qga_argv(sock, state, tmp_path / f"{tag}.pid", *extra)],
                             sock, log, env, WAIT_S)
    return Agent(sock, proc, etdir, log)


@pytest.fixture
def real_agent(tmp_path: Path, guest_ns: str) -> Iterator[Agent]:
    agent = start_qga(tmp_path, guest_ns, "real", standin=False)
    yield agent
    agent.stop()


@pytest.fixture
def standin_agent(tmp_path: Path, guest_ns: str) -> Iterator[Agent]:
    agent = start_qga(tmp_path, guest_ns, "standin", standin=True)
    (agent.ethtool_dir / "vft0a.rx_usecs").write_text("1\n")  # ixgbevf's default: adaptive
    yield agent
    agent.stop()


class Counting:
    """Counts the commands an actuator sends, to show failures are not retried every tick."""

    def __init__(self, inner: AgentChannel) -> None:
        self.inner, self.name, self.sent = inner, inner.name, Counter[str]()

    def command(self, execute: str, arguments: dict[str, Any] | None = None, timeout_s: float = 3.0) -> Any:
        self.sent[execute] += 1
        return self.inner.command(execute, arguments, timeout_s)

    def close(self) -> None:
        self.inner.close()


def actuator_for(agent_socket: Path, journal: list[tuple[GuestVf, str, Coalesce]] | None = None,
                 limits: Limits = FAST) -> tuple[GuestAgentActuator, list[Counting]]:
    channels: list[Counting] = []

    def connect(guest: str) -> AgentChannel:
        channels.append(Counting(socket_connector(lambda _g: agent_socket)(guest)))
        return channels[-1]

    hook = (lambda vf, ifname, old: journal.append((vf, ifname, old))) if journal is not None else None
    return GuestAgentActuator(connect, journal=hook, limits=limits), channels


def ready(act: GuestAgentActuator, pci: str = VF_PCI) -> Any:
    return wait_for(lambda: (s := act.status(pci)) is not None and s.reason != "guest agent not checked yet" and s,
                    f"{pci} to be checked")


def next_result(act: GuestAgentActuator) -> Applied:
    results: list[Applied] = []
    wait_for(lambda: results.extend(act.collect()) or results, "a write result")
    assert len(results) == 1, results
    return results[0]


# -- discovery --------------------------------------------------------------------------------


def test_discovery_finds_the_vf_interface_by_mac(real_agent: Agent) -> None:
    act, _ = actuator_for(real_agent.socket)
    try:
        act.attach(VF)
        status = ready(act)
        assert status.actuator == "guest-agent"
        assert status.ifname == "vft0a"
        assert status.reason == f"guest agent answers; MAC {VF_MAC} is vft0a in the guest"
    finally:
        act.close()


def test_a_mac_not_in_the_guest_is_reported_not_guessed(real_agent: Agent) -> None:
    act, _ = actuator_for(real_agent.socket)
    try:
        act.attach(GuestVf(VF_PCI, GUEST, "52:54:00:ff:ff:ff"))
        status = ready(act)
        assert status.actuator == "none" and status.ifname is None
        assert status.reason == "guest vm-web0: no interface has the VF's MAC 52:54:00:ff:ff:ff (interfaces: lo, " \
                                "vft0a, vft0b)"
        assert not act.submit(VF_PCI, 48).accepted
    finally:
        act.close()


def test_a_bridge_sharing_the_mac_is_not_guessed_either(real_agent: Agent, guest_ns: str) -> None:
    with IPRoute(netns=guest_ns) as ipr:
        ipr.link("add", ifname="br0", kind="bridge")
        ipr.link("set", index=ipr.link_lookup(ifname="br0")[0], address=VF_MAC)
    act, _ = actuator_for(real_agent.socket)
    try:
        act.attach(VF)
        status = ready(act)
        # veth has no permanent address, so `ethtool -P` cannot tell the VF from the bridge.
        assert status.actuator == "none"
        assert status.reason == f"guest vm-web0: the VF's MAC {VF_MAC} is on br0, vft0a and the permanent " \
                                "address does not tell which is the VF"
    finally:
        act.close()


def test_a_renamed_interface_is_found_again(standin_agent: Agent, guest_ns: str) -> None:
    act, _ = actuator_for(standin_agent.socket)
    try:
        act.attach(VF)
        assert ready(act).ifname == "vft0a"
        with IPRoute(netns=guest_ns) as ipr:
            idx = ipr.link_lookup(ifname="vft0a")[0]
            ipr.link("set", index=idx, state="down")
            ipr.link("set", index=idx, ifname="ens5")
        (standin_agent.ethtool_dir / "ens5.rx_usecs").write_text("1\n")
        assert act.submit(VF_PCI, 48).accepted
        a = next_result(act)
        assert a.ok and a.applied == 48
        assert act.status(VF_PCI).ifname == "ens5"  # type: ignore[union-attr]
        assert (standin_agent.ethtool_dir / "ens5.rx_usecs").read_text().strip() == "48"
    finally:
        act.close()


# -- the real ethtool on veth: EOPNOTSUPP -------------------------------------------------------


def test_real_ethtool_on_veth_is_a_clear_failure_and_backs_off(real_agent: Agent) -> None:
    journal: list[tuple[GuestVf, str, Coalesce]] = []
    act, channels = actuator_for(real_agent.socket, journal)
    try:
        act.attach(VF)
        assert ready(act).actuator == "guest-agent"
        assert act.submit(VF_PCI, 48).accepted
        a = next_result(act)
        # The guest's ethtool cannot even read veth's coalescing: nothing is written or journaled.
        assert not a.ok and a.applied is None and journal == []
        assert a.error == "guest vm-web0: ethtool -c vft0a: netlink error: Operation not supported (exit 1)"
        status = act.status(VF_PCI)
        assert status is not None and status.actuator == "none" and status.reason == a.error
        execs = channels[-1].sent["guest-exec"]
        for _ in range(50):  # fifty ticks that want the write again
            s = act.submit(VF_PCI, 48)
            assert not s.accepted and "backing off" in s.reason and "Operation not supported" in s.reason
        assert act.collect() == [] and channels[-1].sent["guest-exec"] == execs
    finally:
        act.close()


def test_real_ethtool_set_through_guest_exec_reports_exit_1(real_agent: Agent) -> None:
    chan = UnixSocketChannel(real_agent.socket, GUEST)
    try:
        res = guest_exec(chan, "ethtool", ["-C", "vft0a", "rx-usecs", "48"], time.monotonic() + WAIT_S)
        assert res.exitcode == 1 and not res.ok
        assert res.failure() == "netlink error: Operation not supported (exit 1)"
        with pytest.raises(AgentError) as err:
            guest_exec(chan, "no-such-tool", [], time.monotonic() + WAIT_S)
        assert err.value.kind == "command" and "no-such-tool" in str(err.value)
    finally:
        chan.close()


# -- the stand-in ethtool: success, read-back, restore -----------------------------------------


def test_write_reads_back_journals_once_and_restores(standin_agent: Agent) -> None:
    journal: list[tuple[GuestVf, str, Coalesce]] = []
    act, channels = actuator_for(standin_agent.socket, journal)
    rx = standin_agent.ethtool_dir / "vft0a.rx_usecs"
    try:
        act.attach(VF)
        ready(act)
        assert act.submit(VF_PCI, 48).accepted
        assert next_result(act) == Applied(VF_PCI, "rx_usecs", 48, 1, 48)
        assert rx.read_text().strip() == "48"
        assert journal == [(VF, "vft0a", Coalesce(1, None))]
        # The same value again is no job at all.
        execs = channels[-1].sent["guest-exec"]
        assert act.submit(VF_PCI, 48).reason == f"{VF_PCI}: already rx-usecs 48"
        assert act.submit(VF_PCI, 100).accepted
        assert next_result(act) == Applied(VF_PCI, "rx_usecs", 100, 48, 100)
        assert channels[-1].sent["guest-exec"] == execs + 3  # ethtool -c, -C, -c
        assert len(journal) == 1  # the guest's own value, not ours
        status = act.status(VF_PCI)
        assert status is not None and status.original == Coalesce(1, None) and status.current == Coalesce(100, None)
        assert status.actuator == "guest-agent"

        restored = act.restore([RestoreEntry(VF, journal[0][2], expect=100)], deadline_s=WAIT_S)
        assert restored == [Applied(VF_PCI, "rx_usecs", 1, 100, 1)]
        assert rx.read_text().strip() == "1"
        assert act.status(VF_PCI).original is None  # type: ignore[union-attr]
    finally:
        act.close()


def test_adaptive_flag_drivers_get_adaptive_rx_off_and_back_on(standin_agent: Agent) -> None:
    (standin_agent.ethtool_dir / "vft0a.rx_usecs").write_text("0\n")
    (standin_agent.ethtool_dir / "vft0a.adaptive").write_text("on\n")
    act, _ = actuator_for(standin_agent.socket, [])
    try:
        act.attach(VF)
        ready(act)
        act.submit(VF_PCI, 20)
        assert next_result(act) == Applied(VF_PCI, "rx_usecs", 20, 1, 20)
        assert (standin_agent.ethtool_dir / "vft0a.adaptive").read_text().strip() == "off"
        assert act.restore([RestoreEntry(VF, Coalesce(0, True), expect=20)], WAIT_S)[0].ok
        assert (standin_agent.ethtool_dir / "vft0a.adaptive").read_text().strip() == "on"
        assert (standin_agent.ethtool_dir / "vft0a.rx_usecs").read_text().strip() == "0"
    finally:
        act.close()


def test_restore_leaves_a_value_someone_else_set(standin_agent: Agent) -> None:
    act, _ = actuator_for(standin_agent.socket, [])
    rx = standin_agent.ethtool_dir / "vft0a.rx_usecs"
    try:
        act.attach(VF)
        ready(act)
        act.submit(VF_PCI, 48)
        assert next_result(act).ok
        rx.write_text("30\n")  # the guest's admin changed it since
        assert act.restore([RestoreEntry(VF, Coalesce(1, None), expect=48)], WAIT_S) == [
            Applied(VF_PCI, "rx_usecs", 1, 30, 30)]
        assert rx.read_text().strip() == "30"
    finally:
        act.close()


def test_a_refused_write_carries_the_guests_message(standin_agent: Agent) -> None:
    (standin_agent.ethtool_dir / "fail-set").write_text("Cannot set device coalesce parameters: Invalid argument\n")
    act, channels = actuator_for(standin_agent.socket, [])
    try:
        act.attach(VF)
        ready(act)
        act.submit(VF_PCI, 48)
        a = next_result(act)
        assert not a.ok and a.old == 1 and a.applied is None
        assert a.error == "guest vm-web0: ethtool -C vft0a rx-usecs 48: Cannot set device coalesce parameters: " \
                          "Invalid argument (exit 1)"
        assert (standin_agent.ethtool_dir / "vft0a.rx_usecs").read_text().strip() == "1"
        status = act.status(VF_PCI)
        # The agent and the interface work; the driver said no: still this VF's actuator.
        assert status is not None and status.actuator == "guest-agent"
        assert status.reason == f"last write failed: {a.error}"
        execs = channels[-1].sent["guest-exec"]
        assert not act.submit(VF_PCI, 48).accepted
        assert channels[-1].sent["guest-exec"] == execs
    finally:
        act.close()


def test_backoff_doubles_per_failure_and_a_good_write_clears_it(standin_agent: Agent) -> None:
    now = [1000.0]  # the actuator's clock, moved by hand; agent calls still run in real time
    fail = standin_agent.ethtool_dir / "fail-set"
    fail.write_text("Cannot set device coalesce parameters: Invalid argument\n")
    act = GuestAgentActuator(socket_connector(lambda _g: standin_agent.socket), journal=lambda *_: None,
                             limits=Limits(guest_min_interval_s=0.0, backoff_initial_s=10.0, backoff_max_s=25.0),
                             clock=lambda: now[0])
    try:
        act.attach(VF)
        ready(act)
        waits = []
        for _ in range(3):
            assert act.submit(VF_PCI, 48).accepted
            assert not next_result(act).ok
            retry = act.status(VF_PCI).retry_in_s  # type: ignore[union-attr]
            waits.append(retry)
            now[0] += retry - 1
            assert not act.submit(VF_PCI, 48).accepted  # one second early
            now[0] += 1
        assert waits == [10.0, 20.0, 25.0]
        fail.unlink()
        assert act.submit(VF_PCI, 48).accepted
        assert next_result(act).ok
        assert act.status(VF_PCI).retry_in_s == 0  # type: ignore[union-attr]
    finally:
        act.close()


def test_journal_failure_stops_the_write(standin_agent: Agent) -> None:
    def broken(vf: GuestVf, ifname: str, old: Coalesce) -> None:
        raise OSError(28, "No space left on device")

    act = GuestAgentActuator(socket_connector(lambda _g: standin_agent.socket), journal=broken, limits=FAST)
    try:
        act.attach(VF)
        ready(act)
        act.submit(VF_PCI, 48)
        a = next_result(act)
        assert not a.ok and a.error == f"{VF_PCI}: journal: [Errno 28] No space left on device"
        assert (standin_agent.ethtool_dir / "vft0a.rx_usecs").read_text().strip() == "1"
    finally:
        act.close()


def test_one_guest_is_rate_limited_and_keeps_the_latest_request(standin_agent: Agent) -> None:
    act, channels = actuator_for(standin_agent.socket, [], Limits(guest_min_interval_s=3600.0))
    try:
        act.attach(VF)
        ready(act)  # the check took this guest's slot for the next hour
        assert act.submit(VF_PCI, 48).accepted
        assert act.submit(VF_PCI, 64).reason == f"{VF_PCI}: queued, replacing rx-usecs 48 not yet sent"
        assert act.collect() == []
        assert channels[-1].sent["guest-exec"] == 0
    finally:
        act.close()


# -- no agent, a hung agent --------------------------------------------------------------------


def test_no_agent_socket(tmp_path: Path) -> None:
    missing = tmp_path / "absent.sock"
    with pytest.raises(AgentError) as err:
        UnixSocketChannel(missing, GUEST).command("guest-ping")
    assert err.value.kind == "absent"
    assert str(err.value) == f"guest vm-web0: no guest agent at {missing}: No such file or directory"
    act = GuestAgentActuator(socket_connector(lambda _g: missing), limits=FAST)
    try:
        act.attach(VF)
        status = ready(act)
        assert status.actuator == "none" and status.reason == str(err.value)
        assert 0 < status.retry_in_s <= 60
    finally:
        act.close()


@pytest.fixture
def hung_socket(tmp_path: Path) -> Iterator[Path]:
    """Accepts connections (the backlog does) and never answers."""
    path = tmp_path / "hung.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    yield path
    srv.close()


def test_a_hung_agent_costs_a_timeout_within_the_deadline(hung_socket: Path) -> None:
    chan = UnixSocketChannel(hung_socket, GUEST)
    start = time.monotonic()
    with pytest.raises(AgentError) as err:
        chan.command("guest-ping", None, timeout_s=0.3)
    assert err.value.kind == "timeout"
    assert str(err.value) == "guest vm-web0: guest-ping: no reply from the guest agent in time"
    assert time.monotonic() - start < 5.0  # bounded by the deadline, not by the agent


def test_a_hung_agent_never_blocks_the_caller(hung_socket: Path) -> None:
    act = GuestAgentActuator(socket_connector(lambda _g: hung_socket),
                             limits=Limits(call_timeout_s=0.3, job_deadline_s=1.0))
    try:
        act.attach(VF)
        # While the worker waits on the agent, the tick's calls return at once.
        assert act.submit(VF_PCI, 48).accepted
        assert act.collect() == []
        status = ready(act)
        assert status.actuator == "none"
        # guest-info (the check) or guest-network-get-interfaces (the write): whichever ran first.
        assert status.reason.startswith("guest vm-web0: guest-")
        assert status.reason.endswith(": no reply from the guest agent in time")
        out = act.restore([RestoreEntry(VF, Coalesce(1, None))], deadline_s=0.5)
        assert len(out) == 1 and not out[0].ok
    finally:
        act.close()


def test_stale_replies_are_skipped_until_the_sync_id(tmp_path: Path) -> None:
    """An agent still answering an abandoned call: its reply comes before ours and is dropped."""
    path = tmp_path / "stale.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def serve() -> None:
        import json

        conn, _ = srv.accept()
        f = conn.makefile("rwb")
        line = f.readline()
        assert line.startswith(b"\xff")  # the parser reset comes first
        sync = json.loads(line[1:])
        f.write(b'{"return": {"pid": 4242}}\n{"return": 7}\nnot json\n')
        f.write(json.dumps({"return": sync["arguments"]["id"]}).encode() + b"\n")
        f.flush()
        assert json.loads(f.readline())["execute"] == "guest-info"
        f.write(b'{"return": {"version": "7.2.22"}}\n')
        f.flush()
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    chan = UnixSocketChannel(path, GUEST)
    try:
        assert chan.command("guest-info", None, WAIT_S) == {"version": "7.2.22"}
    finally:
        chan.close()
        t.join(WAIT_S)
        srv.close()


def test_a_restarted_guest_or_an_old_reading_is_written_again(standin_agent: Agent) -> None:
    now = [1000.0]
    rx = standin_agent.ethtool_dir / "vft0a.rx_usecs"
    act = GuestAgentActuator(socket_connector(lambda _g: standin_agent.socket), journal=lambda *_: None,
                             limits=Limits(guest_min_interval_s=0.0, reverify_s=60.0), clock=lambda: now[0])
    try:
        act.attach(VF)
        ready(act)
        act.submit(VF_PCI, 48)
        assert next_result(act).ok
        rx.write_text("1\n")  # the guest rebooted: ixgbevf is back to adaptive
        assert act.submit(VF_PCI, 48).reason == f"{VF_PCI}: already rx-usecs 48"  # not known yet
        act.attach(VF)  # what the backend does on the guest's lifecycle event
        assert act.submit(VF_PCI, 48).accepted
        assert next_result(act) == Applied(VF_PCI, "rx_usecs", 48, 1, 48)
        rx.write_text("1\n")  # changed inside the guest, no event at all
        now[0] += 61
        assert act.submit(VF_PCI, 48).reason == f"{VF_PCI}: queued"
        assert next_result(act) == Applied(VF_PCI, "rx_usecs", 48, 1, 48)
        assert rx.read_text().strip() == "48"
    finally:
        act.close()


def test_half_a_command_left_by_a_dead_client_does_not_break_the_next(real_agent: Agent) -> None:
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.connect(str(real_agent.socket))
    dead.sendall(b'{"execute": "guest-in')
    dead.close()
    chan = UnixSocketChannel(real_agent.socket, GUEST)
    try:
        assert "version" in chan.command("guest-info", None, WAIT_S)
    finally:
        chan.close()


def test_a_guest_that_blocks_guest_exec_is_reported_at_attach(tmp_path: Path, guest_ns: str) -> None:
    agent = start_qga(tmp_path, guest_ns, "blocked", False, "-b", "guest-exec,guest-exec-status")
    act, channels = actuator_for(agent.socket)
    try:
        act.attach(VF)
        status = ready(act)
        assert status.actuator == "none"
        assert status.reason.startswith("guest vm-web0: its guest agent (qemu-ga ")
        assert status.reason.endswith(") does not allow guest-exec, guest-exec-status")
        assert channels[-1].sent["guest-exec"] == 0
    finally:
        act.close()
        agent.stop()


def test_a_guest_without_ethtool_is_a_clear_failure(tmp_path: Path, guest_ns: str) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    agent = start_qga(tmp_path, guest_ns, "no-ethtool", False, path=str(empty))
    act, _ = actuator_for(agent.socket)
    try:
        act.attach(VF)
        assert ready(act).actuator == "guest-agent"
        act.submit(VF_PCI, 48)
        a = next_result(act)
        assert not a.ok and "ethtool" in (a.error or "") and "No such file or directory" in (a.error or "")
        status = act.status(VF_PCI)
        assert status is not None and status.actuator == "none" and status.reason == a.error
    finally:
        act.close()
        agent.stop()


def test_a_guest_command_that_outlives_its_deadline_is_a_timeout(real_agent: Agent) -> None:
    chan = UnixSocketChannel(real_agent.socket, GUEST)
    try:
        with pytest.raises(AgentError) as err:
            guest_exec(chan, "sleep", ["5"], time.monotonic() + 0.5)
        assert err.value.kind == "timeout"
        assert str(err.value) == "guest vm-web0: sleep 5: did not finish in time (it may still run in the guest)"
    finally:
        chan.close()


def test_a_bug_in_a_job_costs_that_job_not_the_worker() -> None:
    def connect(guest: str) -> AgentChannel:
        raise RuntimeError("boom")

    act = GuestAgentActuator(connect, limits=Limits(guest_min_interval_s=0.0))
    try:
        act.attach(VF)
        status = ready(act)
        assert status.actuator == "none" and status.reason == "guest vm-web0: internal error: RuntimeError: boom"
        out = act.restore([RestoreEntry(VF, Coalesce(1, None))], deadline_s=WAIT_S)
        assert out == [Applied(VF_PCI, "rx_usecs", 1, None, None, ok=False,
                               error="guest vm-web0: internal error: RuntimeError: boom")]
    finally:
        act.close()


def test_a_vf_without_a_mac_is_not_matched_to_loopback(real_agent: Agent) -> None:
    act, _ = actuator_for(real_agent.socket)
    try:
        act.attach(GuestVf(VF_PCI, GUEST, "00:00:00:00:00:00"))
        status = ready(act)
        assert status.actuator == "none" and status.ifname is None
        assert status.reason.startswith(f"{VF_PCI}: the PF reports no usable MAC for this VF ('00:00:00:00:00:00')")
    finally:
        act.close()


def test_restore_drops_a_write_still_queued(standin_agent: Agent) -> None:
    act, channels = actuator_for(standin_agent.socket, [], Limits(guest_min_interval_s=3600.0))
    rx = standin_agent.ethtool_dir / "vft0a.rx_usecs"
    try:
        act.attach(VF)
        ready(act)  # the check holds the guest's slot for the next hour
        assert act.submit(VF_PCI, 48).accepted
        assert act.restore([RestoreEntry(VF, Coalesce(1, None))], WAIT_S) == [Applied(VF_PCI, "rx_usecs", 1, 1, 1)]
        assert rx.read_text().strip() == "1"
        assert channels[-1].sent["guest-exec"] == 1  # the restore's ethtool -c only
        # Nothing is left to replace: the queued 48 is gone.
        assert act.submit(VF_PCI, 64).reason == f"{VF_PCI}: queued"
    finally:
        act.close()
