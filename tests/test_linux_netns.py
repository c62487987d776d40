"""Real kernel interfaces: a network namespace with a veth pair, read and written through the backend."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from hosttree import TreeBuilder

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.host import LinuxHost
from vftune.hostdriver.linux.netlink_vfstats import IPRouteSource, LinkMemo, RawLinkSource, parse_link

pytestmark = pytest.mark.root

if os.geteuid() != 0:
    pytest.skip("network namespaces and veth pairs need root", allow_module_level=True)

from pyroute2 import IPRoute, netns  # noqa: E402
from vethns import veth_namespace  # noqa: E402

FRAMES = 25


@pytest.fixture
def veth_ns() -> Iterator[tuple[str, IPRoute]]:
    with veth_namespace("vftune-test", quiet_ipv6=True) as pair:
        yield pair


def send_frames(ns: str, ifname: str, count: int) -> None:
    netns.pushns(ns)
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    finally:
        netns.popns()
    with sock:
        sock.bind((ifname, 0))
        frame = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + b"\x88\xb5" + bytes(46)  # local experimental type
        for _ in range(count):
            sock.send(frame)


def veth_host(tmp_path: Path, netlink: IPRoute | RawLinkSource) -> LinuxHost:
    # sysfs cannot show another namespace's links, so a fixture tree names the veth as the PF.
    tree = TreeBuilder(tmp_path)
    tree.pf(("0000:03:00.0", "vft0a", 4, True, 0))
    tree.proc_files()
    return LinuxHost(tmp_path / "sys", tmp_path / "proc", None, netlink)


@pytest.mark.parametrize("source", ["raw", "iproute"])
def test_real_link_counters_through_the_backend(tmp_path: Path, veth_ns: tuple[str, IPRoute], source: str) -> None:
    # "raw" is what a host runs (the agent's own socket); "iproute" what a netns' IPRoute gives.
    name, ipr = veth_ns
    host = veth_host(tmp_path, raw_source_in(name) if source == "raw" else ipr)
    try:
        host.inventory()
        before = host.snapshot()
        send_frames(name, "vft0b", FRAMES)
        after = host.snapshot()
        assert before.errors == () and after.errors == ()
        assert after.pfs["vft0a"].rx_packets - before.pfs["vft0a"].rx_packets == FRAMES
        assert after.pfs["vft0a"].rx_bytes - before.pfs["vft0a"].rx_bytes == FRAMES * 60
    finally:
        host.close()


def test_missing_link_in_the_namespace_is_enodev(tmp_path: Path, veth_ns: tuple[str, IPRoute]) -> None:
    _, ipr = veth_ns
    ipr.link("del", index=ipr.link_lookup(ifname="vft0a")[0])
    host = veth_host(tmp_path, ipr)
    try:
        host.inventory()
        snap = host.snapshot()
        assert snap.pfs == {}
        assert snap.errors == ("vft0a: netlink RTM_GETLINK: No such device (errno 19)",)
    finally:
        host.close()


def raw_source_in(ns: str) -> RawLinkSource:
    """The agent's own netlink source, its socket opened inside the namespace."""
    netns.pushns(ns)
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    finally:
        netns.popns()
    sock.bind((0, 0))
    return RawLinkSource(sock)


def test_the_raw_netlink_source_reads_what_iproute_reads(veth_ns: tuple[str, IPRoute]) -> None:
    name, ipr = veth_ns
    raw, decoded = raw_source_in(name), IPRouteSource(ipr)
    raw._buffer = bytearray(32)  # shorter than any reply: the source grows it, nothing is cut
    memo = LinkMemo()
    try:
        first = parse_link(raw.link_reply("vft0a"), "vft0a", memo)
        assert first == parse_link(decoded.link_reply("vft0a"), "vft0a")
        send_frames(name, "vft0b", FRAMES)
        # The second reply has the first one's shape: read at its offsets, without pyroute2.
        second = parse_link(raw.link_reply("vft0a"), "vft0a", memo)
        assert memo.shape is not None
        assert second == parse_link(decoded.link_reply("vft0a"), "vft0a")
        assert second.rx_packets - first.rx_packets == FRAMES
        with pytest.raises(HostError, match=r"^nope0: netlink RTM_GETLINK: No such device \(errno 19\)$"):
            parse_link(raw.link_reply("nope0"), "nope0", LinkMemo())
    finally:
        raw.close()

