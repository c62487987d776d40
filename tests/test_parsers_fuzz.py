"""Parsers of host data never kill the loop: arbitrary bytes in any source give a result or a
HostError naming the source, never another exception (hypothesis, fixed seeds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from linux_host import make_host
from netlink_wire import VfCounts, link_reply

from vftune.cli.hook import parse_domain
from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.cpu import HostCpu, parse_pid_stat, parse_proc_stat
from vftune.hostdriver.linux.libvirt_guests import hostdev_addresses
from vftune.hostdriver.linux.netlink_vfstats import LinkMemo, LinkStats, parse_link
from vftune.hostdriver.linux.proc_interrupts import InterruptCounts, InterruptsMemo, parse_interrupts
from vftune.hostdriver.linux.sysfs_inventory import SysfsScan, scan

FUZZ = settings(max_examples=200, derandomize=True, deadline=None)
# Text as a kernel file could hold it, and the nastier cases the issue names: non-ASCII digits,
# counts too long for int(), non-UTF-8 bytes.
NASTY = st.sampled_from(["²", "٣", "9" * 5000, "\x00", "\udcff", ")", "(", "\n", ":", "vfio-msix[0](0000:03:10.0)"])
TEXT = st.lists(st.one_of(st.text(), NASTY), max_size=30).map("".join)
BYTES = st.one_of(st.binary(max_size=4096), TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")))


def as_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")  # what read_source hands a parser


@FUZZ
@given(BYTES)
def test_proc_interrupts_never_raises(data):
    assert isinstance(parse_interrupts(as_text(data)), InterruptCounts)


@FUZZ
@given(st.lists(st.one_of(TEXT, BYTES.map(as_text)), min_size=1, max_size=4), st.data())
def test_proc_interrupts_read_with_the_last_reads_memo_is_the_read_parsed_afresh(texts, data):
    """Rows that did not change are not parsed again: every read gives what it gives alone,
    whatever the reads before it (some rows kept, some changed, the CPU count changed)."""
    real = (" " * 11 + "CPU0       CPU1\n 100:   5   6   IR-PCI-MSIX  vfio-msix[0](0000:03:10.0)\n"
            " 101:   7   8   IR-PCI-MSIX  vfio-msix[1](0000:03:10.0)\n NMI:   1   1   Non-maskable\n")
    memo = InterruptsMemo()
    for text in [real, *texts, real.replace(" 7 ", " 9 "), data.draw(st.sampled_from(texts)) + real]:
        assert parse_interrupts(text, memo) == parse_interrupts(text)


def test_proc_interrupts_skips_what_the_issue_found():
    head = "           CPU0       CPU1\n"
    counts = parse_interrupts(head + " 100:  ²  5  IR-PCI-MSIX  vfio-msix[0](0000:03:10.0)\n"
                              + f" 101:  {'9' * 5000}  1  IR-PCI-MSIX  x\n 102:  3  4  IR-PCI-MSIX  y\n")
    assert counts.by_irq[102] == 7 and counts.by_irq[100] == 0 and counts.by_irq[101] == 0


@FUZZ
@given(BYTES)
def test_proc_stat_gives_a_result_or_a_host_error_naming_the_file(data):
    try:
        assert isinstance(parse_proc_stat(as_text(data), "/proc/stat"), HostCpu)
    except HostError as exc:
        assert str(exc).startswith("/proc/stat")


@FUZZ
@given(BYTES)
def test_pid_stat_gives_seconds_or_a_host_error_naming_the_file(data):
    try:
        assert parse_pid_stat(as_text(data), "/proc/4101/stat") >= 0
    except HostError as exc:
        assert str(exc).startswith("/proc/4101/stat")


@FUZZ
@given(st.binary(max_size=2048))
def test_netlink_reply_gives_stats_or_a_host_error_naming_the_link(data):
    try:
        assert isinstance(parse_link(data, "enp3s0f0"), LinkStats)
    except HostError as exc:
        assert "enp3s0f0" in str(exc)


@FUZZ
@given(st.data())
def test_a_real_netlink_reply_cut_or_corrupted_anywhere(data):
    wire = link_reply("enp3s0f0", 4, (10, 1000), {n: VfCounts(n, 100 * n, 2 * n, 200 * n) for n in range(4)})
    cut = data.draw(st.integers(0, len(wire)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(len(wire) - 1, 0)), st.integers(0, 255)), max_size=8))
    buf = bytearray(wire[:cut] if data.draw(st.booleans()) else wire)
    for at, value in flips:
        if at < len(buf):
            buf[at] = value
    try:
        parse_link(bytes(buf), "enp3s0f0")
    except HostError as exc:
        assert "enp3s0f0" in str(exc)


def _outcome(buf: bytes, memo: dict | None = None) -> object:
    try:
        return parse_link(buf, "enp3s0f0", memo)
    except HostError as exc:
        return str(exc)


@FUZZ
@given(st.data())
def test_a_reply_parsed_with_the_last_replys_memo_is_the_reply_parsed_afresh(data):
    """VFs whose attributes did not change are not parsed again (the memo of the last reply): what
    comes out, a result or the error, is what parsing the reply alone gives."""
    moved = data.draw(st.sets(st.integers(0, 3)))
    wire = link_reply("enp3s0f0", 4, (10, 1000), {n: VfCounts(n, 100 * n, 2 * n, 200 * n) for n in range(4)})
    later = link_reply("enp3s0f0", 4, (20, 2000), {n: VfCounts(n + (n in moved), 100 * n, 2 * n, 200 * n)
                                                     for n in range(4)})
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(later) - 1), st.integers(0, 255)), max_size=3))
    buf = bytearray(later)
    for at, value in flips:
        buf[at] = value
    memo: dict = {}
    assert _outcome(wire, memo) == _outcome(wire)
    assert _outcome(bytes(buf), memo) == _outcome(bytes(buf))
    assert _outcome(bytes(later), memo) == _outcome(bytes(later))


@FUZZ
@given(st.data())
def test_a_reply_read_by_its_last_shape_is_the_reply_parsed_afresh(data):
    """A reply of the shape last parsed in full is read without pyroute2 (LinkMemo): what comes
    out of a run of replies, each cut, corrupted or grown anywhere, a result or the error, is
    what parsing each alone gives; a corrupted reply between good ones changes nothing after it."""
    n_vfs = data.draw(st.integers(0, 4))
    other = data.draw(st.booleans())
    memo = LinkMemo()
    for tick in range(5):
        wire = link_reply("enp3s0f0", 4, (10 * tick, 1000 * tick),
                          {n: VfCounts(n * tick, 100 * n * tick, 2 * n, 200 * n) for n in range(n_vfs)},
                          sequence=tick + 1)
        if other:  # a link of another name first, whose counters move too
            wire = link_reply("enp3s0f1", 5, (tick, tick), {0: VfCounts(tick, tick, 0, 0)}) + wire
        buf = bytearray(wire)
        if data.draw(st.booleans()):
            for at, value in data.draw(st.lists(st.tuples(st.integers(0, len(buf) - 1), st.integers(0, 255)),
                                                max_size=3)):
                buf[at] = value
            if data.draw(st.booleans()):
                buf = buf[:data.draw(st.integers(0, len(buf)))]
        assert _outcome(bytes(buf), memo) == _outcome(bytes(buf))


def test_a_reply_of_the_same_shape_is_read_without_pyroute2(monkeypatch):
    """The fast read is taken (and gives the counters of the reply it reads, not the last)."""
    from vftune.hostdriver.linux import netlink_vfstats

    memo = LinkMemo()
    first = link_reply("enp3s0f0", 4, (1, 2), {0: VfCounts(1, 2, 3, 4)}, sequence=1)
    parse_link(first, "enp3s0f0", memo)
    assert memo.shape is not None
    monkeypatch.setattr(netlink_vfstats, "decode_reply", lambda *a: pytest.fail("pyroute2 decoded it"))
    later = parse_link(link_reply("enp3s0f0", 4, (5, 6), {0: VfCounts(7, 8, 9, 10)}, sequence=2), "enp3s0f0", memo)
    assert (later.rx_packets, later.rx_bytes, later.tx_packets, later.tx_bytes) == (5, 6, 0, 0)
    assert (later.vfs[0].rx_packets, later.vfs[0].rx_bytes, later.vfs[0].tx_packets, later.vfs[0].tx_bytes) == \
        (7, 8, 9, 10)


@FUZZ
@given(st.one_of(TEXT, BYTES.map(as_text)))
def test_libvirt_domain_xml_gives_addresses_or_a_host_error(text):
    try:
        assert isinstance(hostdev_addresses(text), list)
    except HostError as exc:
        assert "domain XML" in str(exc)


@FUZZ
@given(BYTES)
def test_hook_stdin_of_any_bytes_is_fine(data):
    vfs, uuid, problem = parse_domain(data)
    assert isinstance(vfs, list) and (problem is None or isinstance(problem, str))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzhost")
    host, _replies = make_host(root, libvirt=False)
    host.inventory()
    yield root, host
    host.close()


SYSFS_FILES = ["sys/class/net/enp3s0f0/device/sriov_numvfs", "sys/class/net/enp3s0f0/device/vendor",
               "sys/class/net/enp3s0f1/device/device", "sys/class/net/enp3s0f0/device/rxmode/rate_pps",
               "sys/class/net/enp3s0f1/napi_defer_hard_irqs"]
PROC_FILES = ["proc/interrupts", "proc/stat", f"proc/{hosttree.GUESTS[0].pid}/stat"]


@settings(max_examples=30, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(SYSFS_FILES + PROC_FILES), data=BYTES)
def test_a_tick_on_a_host_with_any_bytes_in_any_source_goes_on(tree, which, data):
    """The Linux backend end to end: inventory and a snapshot with one file holding anything.
    A bad source is an error line naming it; the snapshot is still taken."""
    root, host = tree
    path = (root / which).resolve()
    original = path.read_bytes()
    try:
        path.write_bytes(data)
        try:
            assert isinstance(scan(root / "sys"), SysfsScan)
        except HostError as exc:
            assert str(root) in str(exc)
        snap = host.snapshot()
        assert snap.pfs, "the other sources still give counters"
        for err in snap.errors:
            assert "/" in err or "enp" in err, f"an error names its source: {err}"
    finally:
        path.write_bytes(original)
