"""Guests' socket receive drops: the /proc/net/snmp{,6} parsers, the reader against an agent on a
real UNIX socket (a wire-protocol fake, and a real qemu-ga where it runs), and LinuxHost's
snapshot() on the fixture host carrying them without ever waiting for a guest."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from fake_qga import FakeQga
from qga_process import QGA, qga_argv, start_qga_process, stop_qga_process
from waiting import wait_for

from vftune.hostdriver.linux.guest_agent import socket_connector
from vftune.hostdriver.linux.guest_agent.snmp_text import SnmpTextError, parse_snmp, parse_snmp6
from vftune.hostdriver.linux.guest_agent.socket_drops import DropsLimits, DropsReading, GuestDropsReader
from vftune.model import GuestCpuTimes

FIXTURES = Path(__file__).parent / "fixtures" / "guest_net"
SNMP_TEXT = (FIXTURES / "snmp").read_text()
SNMP6_TEXT = (FIXTURES / "snmp6").read_text()


def with_snmp(text: str, table: str, field: str, value: int) -> str:
    """The fixture's text with one field of one /proc/net/snmp table set (header, values pairs)."""
    lines = text.splitlines(keepends=True)
    for i in range(0, len(lines) - 1, 2):
        names, values = lines[i].split(), lines[i + 1].split()
        if names[0] == f"{table}:":
            values[names.index(field)] = str(value)
            lines[i + 1] = " ".join(values) + "\n"
    return "".join(lines)


def with_snmp6(text: str, field: str, value: int) -> str:
    return re.sub(rf"^({field}\s+)\d+$", rf"\g<1>{value}", text, flags=re.M)


def guest_texts(udp: int = 17, udplite: int = 4, udp6: int = 5, udplite6: int = 2) -> tuple[str, str]:
    v4 = with_snmp(with_snmp(SNMP_TEXT, "Udp", "RcvbufErrors", udp), "UdpLite", "RcvbufErrors", udplite)
    v6 = with_snmp6(with_snmp6(SNMP6_TEXT, "Udp6RcvbufErrors", udp6), "UdpLite6RcvbufErrors", udplite6)
    return v4, v6


# -- the parsers ---------------------------------------------------------------------------------


def test_this_machines_own_files_parse() -> None:
    v4, v6 = guest_texts()
    assert parse_snmp(v4) == 21  # Udp: 17 + UdpLite: 4; Ip:/Tcp: fields around them are not counted
    assert parse_snmp6(v6) == 7  # Udp6RcvbufErrors 5 + UdpLite6RcvbufErrors 2
    assert parse_snmp(SNMP_TEXT) == 0 and parse_snmp6(SNMP6_TEXT) == 0  # verbatim: this machine dropped none


@pytest.mark.parametrize(("text", "message"), [
    ("Udp: InDatagrams RcvbufErrors\nUdp: 1\n",
     "/proc/net/snmp: line 2: 'Udp: 1': 1 values for 2 names of Udp:"),
    ("Udp: InDatagrams RcvbufErrors\nUdp: 1 -3\n",
     "/proc/net/snmp: line 2: 'Udp: 1 -3': Udp: RcvbufErrors '-3' is not a counter"),
    ("Udp: InDatagrams RcvbufErrors\n", "/proc/net/snmp: line 1: 'Udp: InDatagrams RcvbufErrors': the Udp: names "
     "have no line of values"),
    ("Ip: Forwarding\nIp: 1\n", "/proc/net/snmp: no Udp: table (is this /proc/net/snmp?)"),
    ("Udp: InDatagrams\nUdp: 4\n", "/proc/net/snmp: line 1: 'Udp: InDatagrams': no RcvbufErrors among the Udp: names"),
    ("Udp: RcvbufErrors\nTcp: 3\n", "/proc/net/snmp: line 2: 'Tcp: 3': expected the values of Udp:"),
    ("<html>\n", "/proc/net/snmp: line 1: '<html>': expected 'Proto: Field ...'"),
])
def test_snmp_errors_name_the_file_and_the_line(text: str, message: str) -> None:
    with pytest.raises(SnmpTextError) as err:
        parse_snmp(text)
    assert str(err.value) == message


@pytest.mark.parametrize(("text", "message"), [
    ("Udp6RcvbufErrors 12 extra\n", "/proc/net/snmp6: line 1: 'Udp6RcvbufErrors 12 extra': expected 'Name value'"),
    ("Ip6InReceives\t0x10\n", "/proc/net/snmp6: line 1: 'Ip6InReceives\\t0x10': '0x10' is not a counter"),
    ("Ip6InReceives 1\n", "/proc/net/snmp6: no Udp6RcvbufErrors line (is this /proc/net/snmp6?)"),
    ("Udp6RcvbufErrors 1\nUdp6RcvbufErrors 2\n", "/proc/net/snmp6: line 2: 'Udp6RcvbufErrors 2': a second "
     "Udp6RcvbufErrors"),
])
def test_snmp6_errors_name_the_file_and_the_line(text: str, message: str) -> None:
    with pytest.raises(SnmpTextError) as err:
        parse_snmp6(text)
    assert str(err.value) == message


COUNTER = st.integers(0, 2**64 - 1)
FIELD = st.from_regex(r"[A-Z][A-Za-z0-9]{0,15}", fullmatch=True)


@st.composite
def snmp_tables(draw: st.DrawFn) -> tuple[str, int]:
    """A /proc/net/snmp as net/ipv4/proc.c prints it, and the RcvbufErrors it holds."""
    others = draw(st.lists(st.sampled_from(["Ip", "Icmp", "IcmpMsg", "Tcp", "Ext"]), unique=True))
    tables = {name: draw(st.dictionaries(FIELD.filter(lambda f: f != "RcvbufErrors"),
                                         st.integers(-1, 2**64 - 1), max_size=8)) for name in others}
    expected = 0
    for proto in ("Udp", "UdpLite") if draw(st.booleans()) else ("Udp",):
        fields = draw(st.dictionaries(FIELD, COUNTER, max_size=8))
        fields["RcvbufErrors"] = count = draw(COUNTER)
        keys = draw(st.permutations(list(fields)))
        tables[proto] = {k: fields[k] for k in keys}
        expected += count
    order = draw(st.permutations(list(tables)))
    text = "".join(f"{p}: {' '.join(tables[p])}\n{p}: {' '.join(str(v) for v in tables[p].values())}\n"
                   for p in order)
    return text, expected


@st.composite
def snmp6_lines(draw: st.DrawFn) -> tuple[str, int]:
    """A /proc/net/snmp6 as net/ipv6/proc.c prints it ("%-32s\\t%lu"), and its UDP RcvbufErrors."""
    fields = draw(st.dictionaries(FIELD.filter(lambda f: "RcvbufErrors" not in f), COUNTER, max_size=30))
    fields["Udp6RcvbufErrors"] = draw(COUNTER)
    if draw(st.booleans()):
        fields["UdpLite6RcvbufErrors"] = draw(COUNTER)
    keys = draw(st.permutations(list(fields)))
    text = "".join(f"{k:<32}\t{fields[k]}\n" for k in keys)
    return text, fields["Udp6RcvbufErrors"] + fields.get("UdpLite6RcvbufErrors", 0)


@settings(max_examples=100, deadline=None)
@given(snmp_tables())
def test_snmp_round_trip(table: tuple[str, int]) -> None:
    text, expected = table
    assert parse_snmp(text) == expected


@settings(max_examples=100, deadline=None)
@given(snmp6_lines())
def test_snmp6_round_trip(table: tuple[str, int]) -> None:
    text, expected = table
    assert parse_snmp6(text) == expected


def _never_raises_but_its_error(parse: Callable[[str, str], int], text: str) -> None:
    try:
        assert parse(text, "guest:/proc/net/x") >= 0
    except SnmpTextError as exc:
        message = str(exc)
        assert message.startswith("guest:/proc/net/x: ") and "\n" not in message and "\r" not in message


@settings(max_examples=300, deadline=None)
@given(st.text(), st.sampled_from([parse_snmp, parse_snmp6]))
def test_garbage_raises_only_the_parsers_error(text: str, parse: Callable[[str, str], int]) -> None:
    _never_raises_but_its_error(parse, text)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from([(SNMP_TEXT, parse_snmp), (SNMP6_TEXT, parse_snmp6)]))
def test_a_damaged_real_file_raises_only_the_parsers_error(data: st.DataObject,
                                                           case: tuple[str, Callable[[str, str], int]]) -> None:
    text, parse = case
    at = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 40))
    insert = data.draw(st.text(max_size=8))
    _never_raises_but_its_error(parse, text[:at] + insert + text[at + cut:])


# -- the reader against an agent on a UNIX socket ------------------------------------------------


class ManualClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t


FAST = DropsLimits(interval_s=0.5, call_timeout_s=2.0, read_deadline_s=5.0, backoff_initial_s=5.0)


@pytest.fixture
def files() -> dict[str, bytes]:
    v4, v6 = guest_texts()
    return {"/proc/net/snmp": v4.encode(), "/proc/net/snmp6": v6.encode()}


@pytest.fixture
def fake(tmp_path: Path, files: dict[str, bytes]) -> Iterator[FakeQga]:
    agent = FakeQga(tmp_path / "vm-a.sock", files, name="vm-a")
    yield agent
    agent.close()


def error_of(r: GuestDropsReader, guest: str) -> str | None:
    st = r.status(guest)
    return st.error if st is not None else None


def reader_for(sock: Path, clock: Callable[[], float], limits: DropsLimits = FAST, **kwargs: Any) -> GuestDropsReader:
    return GuestDropsReader(socket_connector(lambda _g: sock), limits=limits, clock=clock, **kwargs)


def test_reads_both_files_sums_them_and_closes_every_handle(fake: FakeQga) -> None:
    clock = ManualClock()
    r = reader_for(fake.path, clock)
    try:
        r.track(["vm-a"])
        assert wait_for(lambda: r.latest(), "a reading") == {"vm-a": 28}  # 21 over IPv4, 7 over IPv6
        assert fake.opened == 2 and fake.open_handles == {}
        assert fake.events[:2] == ["vm-a: guest-sync", "vm-a: guest-info"]
    finally:
        r.close()


def test_a_reading_is_fresh_for_two_seconds_then_unknown(fake: FakeQga) -> None:
    clock = ManualClock()
    r = reader_for(fake.path, clock)
    try:
        r.track(["vm-a"])
        wait_for(lambda: r.latest(), "a reading")
        reading = r.reading("vm-a")
        assert reading is not None and reading.read_at == 1000.0
        assert r.latest(1002.0) == {"vm-a": 28}
        assert r.latest(1002.01) == {}  # older than 2 s: left out, not 0
    finally:
        r.close()


def test_reads_follow_the_interval_on_the_clock(fake: FakeQga, files: dict[str, bytes]) -> None:
    clock = ManualClock()
    r = reader_for(fake.path, clock)
    try:
        r.track(["vm-a"])
        wait_for(lambda: r.latest(), "the first reading")
        files["/proc/net/snmp"] = with_snmp(files["/proc/net/snmp"].decode(), "Udp", "RcvbufErrors", 117).encode()
        clock.t += FAST.interval_s  # the next read is due only now
        wait_for(lambda: r.latest() == {"vm-a": 128}, "the second reading")
        reading = r.reading("vm-a")
        assert reading is not None and reading.read_at == 1000.5
        assert fake.opened == 4
    finally:
        r.close()


def test_a_guest_without_ipv6_counts_ipv4_only(fake: FakeQga, files: dict[str, bytes]) -> None:
    del files["/proc/net/snmp6"]
    r = reader_for(fake.path, ManualClock())
    try:
        r.track(["vm-a"])
        assert wait_for(lambda: r.latest(), "a reading") == {"vm-a": 21}
    finally:
        r.close()


def test_blocked_file_commands_warn_once_and_back_off(tmp_path: Path, files: dict[str, bytes],
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """RHEL's qemu-ga blocks guest-file-* by default: one WARNING, however often it is retried."""
    agent = FakeQga(tmp_path / "rhel.sock", files, blocked=("guest-file-open", "guest-file-read", "guest-file-close"))
    clock = ManualClock()
    r = reader_for(agent.path, clock)
    caplog.set_level(logging.WARNING, "vftune.linux.guest_drops")
    try:
        r.track(["vm-rhel"])
        for tries in (1, 2, 3):
            status = wait_for(lambda n=tries: (st := r.status("vm-rhel")) and st.failures >= n and st,  # type: ignore[misc]
                              f"try {tries}")
            assert status.retry_in_s == 5.0 * 2 ** (tries - 1)  # the backoff doubles: 5, 10, 20 s
            clock.t += status.retry_in_s
        assert r.latest() == {}
        assert agent.opened == 0
        warned = [rec.getMessage() for rec in caplog.records]
        assert warned == ["guest vm-rhel: its guest agent (qemu-ga 7.2.22) does not allow guest-file-open, "
                          "guest-file-read, guest-file-close; its socket drops are unknown, retrying with backoff"]
    finally:
        r.close()
        agent.close()


def test_text_that_is_not_the_kernels_is_an_error_naming_file_and_line(fake: FakeQga, files: dict[str, bytes],
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    files["/proc/net/snmp6"] = b"Udp6RcvbufErrors lots\n"
    r = reader_for(fake.path, ManualClock())
    try:
        r.track(["vm-a"])
        error = wait_for(lambda: error_of(r, "vm-a"), "the failed read")
        assert error == "guest vm-a: /proc/net/snmp6: line 1: 'Udp6RcvbufErrors lots': 'lots' is not a counter"
        assert r.latest() == {} and fake.open_handles == {}
    finally:
        r.close()


def test_a_file_over_the_bound_is_refused_and_its_handle_closed(fake: FakeQga, files: dict[str, bytes]) -> None:
    files["/proc/net/snmp"] = b"x" * 5000
    r = reader_for(fake.path, ManualClock(), DropsLimits(max_file_bytes=4096, chunk_bytes=1024))
    try:
        r.track(["vm-a"])
        assert wait_for(lambda: error_of(r, "vm-a"), "the failed read") == "guest vm-a: /proc/net/snmp: over 4096 bytes"
        assert fake.opened == 1 and fake.open_handles == {}  # closed although the read failed
    finally:
        r.close()


def test_no_agent_is_one_warning_and_unknown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "absent.sock"
    r = reader_for(missing, ManualClock())
    caplog.set_level(logging.WARNING, "vftune.linux.guest_drops")
    try:
        r.track(["vm-gone"])
        assert wait_for(lambda: error_of(r, "vm-gone"), "the failed read") == \
            f"guest vm-gone: no guest agent at {missing}: No such file or directory"
        assert r.latest() == {}
        assert len(caplog.records) == 1 and caplog.records[0].levelno == logging.WARNING
    finally:
        r.close()


def test_a_hung_agent_never_blocks_the_caller(fake: FakeQga) -> None:
    """The order of events, not time: the agent holds its reply while latest() answers."""
    fake.hold.clear()
    # Deadlines far beyond the test's own steps: the agent answers once released, whatever the load.
    r = reader_for(fake.path, ManualClock(), DropsLimits(call_timeout_s=60.0, read_deadline_s=120.0))
    try:
        r.track(["vm-a"])
        wait_for(lambda: "vm-a: guest-sync" in fake.events, "the poller to be waiting on the agent")
        assert r.latest() == {}
        fake.events.append("latest() returned")
        r.track(["vm-a"])  # the inventory's side does not wait either
        fake.events.append("track() returned")
        fake.hold.set()
        assert wait_for(lambda: r.latest(), "the reading once the agent answers") == {"vm-a": 28}
        assert fake.events[:3] == ["vm-a: guest-sync", "latest() returned", "track() returned"]
    finally:
        r.close()


def test_a_timeout_is_a_warning_and_a_retry_after_the_backoff(fake: FakeQga, caplog: pytest.LogCaptureFixture) -> None:
    fake.hold.clear()
    clock = ManualClock()
    r = reader_for(fake.path, clock, DropsLimits(call_timeout_s=0.2, read_deadline_s=1.0))
    caplog.set_level(logging.WARNING, "vftune.linux.guest_drops")
    try:
        r.track(["vm-a"])
        error = wait_for(lambda: error_of(r, "vm-a"), "the timeout")
        assert error == "guest vm-a: guest-sync: no reply from the guest agent in time" or \
            error.endswith(": no reply from the guest agent in time")
        fake.hold.set()

        def retried() -> DropsReading | None:
            clock.t += 600.0  # past any backoff: a retry that times out again (a loaded machine) is retried
            return r.reading("vm-a")
        reading = wait_for(retried, "the retry")
        assert reading.count == 28 and r.latest(reading.read_at) == {"vm-a": 28}
        assert [rec.levelname for rec in caplog.records] == ["WARNING"]  # one per cause, however many tries
    finally:
        r.close()


def test_untracked_guests_lose_their_poller(fake: FakeQga) -> None:
    r = reader_for(fake.path, ManualClock())
    try:
        r.track(["vm-a"])
        wait_for(lambda: r.latest(), "a reading")
        r.track([])
        assert r.latest() == {} and r.reading("vm-a") is None
    finally:
        r.close()


# -- against a real qemu-ga ------------------------------------------------------------------------

@pytest.fixture
def qga(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """qemu-ga on a UNIX socket (no namespace needed: it only reads files here)."""
    if QGA is None:
        pytest.skip("qemu-ga is not installed (Debian's qemu-guest-agent; scripts/setup --test)")
    extra: tuple[str, ...] = getattr(request, "param", ())
    sock, state = tmp_path / "qga.sock", tmp_path / "qga-state"
    state.mkdir()
    proc = start_qga_process(qga_argv(sock, state, tmp_path / "qga.pid", *extra), sock, tmp_path / "qga.log")
    yield sock
    stop_qga_process(proc)


def test_a_real_qemu_ga_serves_the_files(qga: Path, tmp_path: Path) -> None:
    v4, v6 = guest_texts(udp=1000, udplite=1, udp6=30, udplite6=0)
    (tmp_path / "snmp").write_text(v4)
    (tmp_path / "snmp6").write_text(v6)
    r = reader_for(qga, ManualClock(), paths=(str(tmp_path / "snmp"), str(tmp_path / "snmp6")))
    try:
        r.track(["vm-real"])
        assert wait_for(lambda: r.latest(), "a reading") == {"vm-real": 1031}
    finally:
        r.close()


def test_a_real_qemu_ga_reads_its_own_proc_net(qga: Path) -> None:
    """The real files through the real agent: whatever this machine counts, it parses."""
    r = reader_for(qga, ManualClock())
    try:
        r.track(["vm-real"])
        got = wait_for(lambda: r.latest() or error_of(r, "vm-real"), "a reading")
        assert isinstance(got, dict) and got["vm-real"] >= 0, got
    finally:
        r.close()


@pytest.mark.parametrize("qga", [("-b", "guest-file-open,guest-file-read,guest-file-close")], indirect=True)
def test_a_real_qemu_ga_that_blocks_file_commands_is_told_apart(qga: Path) -> None:
    r = reader_for(qga, ManualClock())
    try:
        r.track(["vm-rhel"])
        error = wait_for(lambda: error_of(r, "vm-rhel"), "the refusal")
        assert re.fullmatch(r"guest vm-rhel: its guest agent \(qemu-ga [\d.]+\) does not allow guest-file-open, "
                            r"guest-file-read, guest-file-close", error), error
    finally:
        r.close()


# -- LinuxHost.snapshot() on the fixture host -------------------------------------------------------


@pytest.fixture
def agents(tmp_path: Path, files: dict[str, bytes]) -> Iterator[tuple[Path, dict[str, FakeQga], list[str]]]:
    """vm-web0 serves its files, vm-web1 holds every reply; vm-db0 and vm-cache0 have no agent.
    vm-stopped (no VF) has an agent that must never be asked."""
    sockets = tmp_path / "agents"
    sockets.mkdir()
    events: list[str] = []
    fakes = {name: FakeQga(sockets / f"{name}.sock", files, events=events, name=name)
             for name in ("vm-web0", "vm-web1", "vm-stopped")}
    fakes["vm-web1"].hold.clear()
    yield sockets, fakes, events
    for f in fakes.values():
        f.close()


def test_snapshot_carries_fresh_guest_drops_and_never_waits_for_a_guest(
        tmp_path: Path, agents: tuple[Path, dict[str, FakeQga], list[str]], caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("libvirt")
    from linux_host import ManualClock as HostClock
    from linux_host import make_host

    sockets, fakes, events = agents
    fakes["vm-web0"].cpustats = [{"type": "linux", "cpu": 0, "user": 1000, "nice": 0, "system": 250, "idle": 3000}]
    clock = HostClock()
    caplog.set_level(logging.WARNING, "vftune.linux.guest_drops")
    host, _ = make_host(tmp_path / "host", clock=clock, sleeper=clock.sleep, guest_agent_sockets=sockets,
                        guest_rx_drops="auto")
    try:
        host.inventory()
        snap = wait_for(lambda: (s := host.snapshot()).guest_rx_drops and s, "vm-web0's drops in a snapshot")
        assert snap.guest_rx_drops == {"vm-web0": 28}
        # Its own CPU accounting came with the same read; the guests whose agents lack it have none.
        assert snap.guest_cpu_times == {"vm-web0": GuestCpuTimes(user=1.0, system=0.25, interrupts=0.0, idle=3.0,
                                                                 steal=0.0)}
        # With the time of the read, on the host's clock: the count may be older than the snapshot.
        assert set(snap.guest_rx_drops_time) == {"vm-web0"} and snap.guest_rx_drops_time["vm-web0"] <= snap.time
        # vm-web1's agent has the request and holds the reply: the snapshot did not wait for it.
        wait_for(lambda: "vm-web1: guest-sync" in events, "vm-web1's poller to wait on its agent")
        snap = host.snapshot()
        events.append("snapshot returned")
        assert "vm-web1" not in snap.guest_rx_drops and snap.guest_rx_drops["vm-web0"] == 28
        assert events.index("vm-web1: guest-sync") < events.index("snapshot returned")
        assert "vm-web1: guest-info" not in events  # still held: nothing past the first call
        assert not any(e.startswith("vm-stopped:") for e in events)  # it holds no VF
        # Guests without an agent: one warning each, however many snapshots.
        def absent() -> list[str]:
            return sorted(r.getMessage().split(":")[0] for r in caplog.records if "no guest agent" in r.getMessage())
        wait_for(lambda: len(absent()) >= 2, "vm-db0's and vm-cache0's pollers to find no agent")
        for _ in range(3):
            assert not {"vm-db0", "vm-cache0"} & set(host.snapshot().guest_rx_drops)
        assert absent() == ["guest vm-cache0", "guest vm-db0"]

        # A count older than 2 s is left out: vm-web0's agent goes away, the host's clock moves on.
        fakes["vm-web0"].close()
        clock.sleep(2.5)
        assert "vm-web0" not in host.snapshot().guest_rx_drops
        fakes["vm-web1"].hold.set()
    finally:
        host.close()


def test_off_reads_no_guest(tmp_path: Path, agents: tuple[Path, dict[str, FakeQga], list[str]]) -> None:
    pytest.importorskip("libvirt")
    from linux_host import make_host

    sockets, _, events = agents
    host, _ = make_host(tmp_path / "host", guest_agent_sockets=sockets, guest_rx_drops="off")
    try:
        host.inventory()
        assert host.snapshot().guest_rx_drops == {}
        assert events == []
    finally:
        host.close()


def test_without_a_transport_the_capabilities_say_why(tmp_path: Path) -> None:
    from linux_host import make_host

    host, _ = make_host(tmp_path / "host", libvirt=False, guest_rx_drops="auto")
    try:
        host.inventory()
        assert "guests' socket receive drops are not read (--guest-rx-drops auto): no libvirt connection " \
               "(--libvirt-uri none) and no --guest-agent-sockets" in host.capabilities().missing
        assert host.snapshot().guest_rx_drops == {}
    finally:
        host.close()


def test_a_bad_mode_is_one_line_naming_it(tmp_path: Path) -> None:
    from linux_host import make_host

    with pytest.raises(ValueError, match=r"^--guest-rx-drops 'sometimes': choose from auto, off$"):
        make_host(tmp_path / "host", libvirt=False, guest_rx_drops="sometimes")


def test_over_libvirt_a_driver_without_agents_leaves_every_guest_unknown(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """No --guest-agent-sockets: libvirt's qemuAgentCommand, which its test driver does not have."""
    pytest.importorskip("libvirt")
    from linux_host import make_host

    caplog.set_level(logging.WARNING, "vftune.linux.guest_drops")
    host, _ = make_host(tmp_path / "host", guest_rx_drops="auto")
    try:
        host.inventory()

        def warned() -> list[str]:
            return sorted(r.getMessage().split(":")[0] for r in caplog.records)
        wait_for(lambda: len(warned()) >= 4, "a warning for each VF-owning guest")
        assert host.snapshot().guest_rx_drops == {}
        assert warned() == ["guest vm-cache0", "guest vm-db0", "guest vm-web0", "guest vm-web1"]
        assert all("virDomainQemuAgentCommand" in r.getMessage() for r in caplog.records)
    finally:
        host.close()
