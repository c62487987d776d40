"""Fresh VF counters from the PF's ethtool statistics (ETHTOOL_GSTATS): the ioctl's wire format,
the per-PF rate limit and its measured cost, the backend on the fixture tree (a stock PF whose
VF counters are re-copied when its statistics are read, as ixgbe_get_ethtool_stats does), and
the real ioctl on a veth in a network namespace."""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from linux_host import PF_NETLINK, ManualClock, make_tree
from netlink_wire import CountingHost

from test_linux_sampling import StockRefresh
from vftune.hostdriver.linux.ethtool_stats import (
    ETHTOOL_GSSET_INFO,
    ETHTOOL_GSTATS,
    EthtoolStatsRefresher,
    read_stats,
    socket_ioctl,
    stats_count,
)
from vftune.hostdriver.linux.host import LinuxHost
from vftune.hostdriver.linux.netlink_vfstats import ReplaySource

STOCK_PF = hosttree.PF1[1]
STOCK_VF = hosttree.vf_bdf(hosttree.PF1[0], 0)


class FakeEthtool:
    """Answers SIOCETHTOOL requests in the kernel's struct layout (include/uapi/linux/ethtool.h)
    for the named devices; a GSTATS read calls on_read(ifname), as ixgbe updates its stats."""

    def __init__(self, stats: dict[str, list[int]], on_read=None, unsupported: frozenset[str] = frozenset()):
        self.stats, self.on_read, self.unsupported = stats, on_read, unsupported
        self.calls: list[tuple[str, int]] = []

    def __call__(self, ifname: str, buf: ctypes.Array) -> None:
        cmd = struct.unpack("=I", buf.raw[:4])[0]
        self.calls.append((ifname, cmd))
        if ifname in self.unsupported:
            raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        if ifname not in self.stats:
            raise OSError(errno.ENODEV, "No such device")
        values = self.stats[ifname]
        if cmd == ETHTOOL_GSSET_INFO:
            _, _, mask = struct.unpack("=IIQ", buf.raw[:16])
            struct.pack_into("=IIQI", buf, 0, cmd, 0, mask, len(values))
        elif cmd == ETHTOOL_GSTATS:
            n = struct.unpack("=II", buf.raw[:8])[1]
            struct.pack_into(f"=II{min(n, len(values))}Q", buf, 0, cmd, min(n, len(values)), *values[:n])
            if self.on_read:
                self.on_read(ifname)
        else:
            raise OSError(errno.EINVAL, "Invalid argument")


def test_the_ioctl_structs_round_trip():
    fake = FakeEthtool({"eth9": [5, 6, 7]})
    assert stats_count(fake, "eth9") == 3
    assert read_stats(fake, "eth9", 3) == (5, 6, 7)
    assert [c for _, c in fake.calls] == [ETHTOOL_GSSET_INFO, ETHTOOL_GSTATS]


def test_reads_are_rate_limited_per_pf_and_their_cost_counted():
    clock = ManualClock()
    fake = FakeEthtool({"eth0": [1], "eth1": [2]})
    r = EthtoolStatsRefresher(0.25, fake, clock)
    assert r.refresh("eth0") == clock()
    assert r.refresh("eth1") == clock()  # another PF: its own limit
    clock.sleep(0.1)
    assert r.refresh("eth0") == clock() - 0.1  # within 0.25 s: the last read's time, no ioctl
    clock.sleep(0.2)
    assert r.refresh("eth0") == clock()
    cost = r.cost["eth0"]
    assert (cost.reads, cost.skipped, cost.errors) == (2, 1, 0)
    assert cost.mean_s is not None and 0 <= cost.mean_s <= cost.max_s


def test_a_pf_without_gstats_is_asked_once_until_the_inventory_changes():
    fake = FakeEthtool({}, unsupported=frozenset({"veth7"}))
    r = EthtoolStatsRefresher(0.0, fake, ManualClock())
    assert r.refresh("veth7") is None and r.refresh("veth7") is None
    assert len(fake.calls) == 1 and not r.supported("veth7")
    assert "Operation not supported" in (r.why_not("veth7") or "")
    r.forget()
    assert r.refresh("veth7") is None and len(fake.calls) == 2


def stock_host(tmp_path: Path, refresher: bool) -> tuple[LinuxHost, ManualClock]:
    sysfs, procfs, _ = make_tree(tmp_path)
    clock = ManualClock()
    replies = StockRefresh(CountingHost(dict(PF_NETLINK), seed=11), clock, {STOCK_PF})
    # ixgbe_get_ethtool_stats -> ixgbe_update_stats: the VF counters are copied again now.
    fake = FakeEthtool({name: [0] * 40 for name in PF_NETLINK}, on_read=lambda pf: replies.cache.pop(pf, None))
    gstats = EthtoolStatsRefresher(0.25, fake, clock) if refresher else EthtoolStatsRefresher(
        0.25, FakeEthtool({}, unsupported=frozenset(PF_NETLINK)), clock)
    host = LinuxHost(sysfs, procfs, None, ReplaySource(replies), clock=clock, sleeper=clock.sleep,
                     counter_refresh=gstats)
    host.inventory()
    return host, clock


@pytest.mark.parametrize("refresher", [True, False])
def test_a_stock_pfs_vf_counters_are_fresh_every_half_second_tick(tmp_path: Path, refresher: bool):
    host, clock = stock_host(tmp_path, refresher)
    try:
        assert host.capabilities().counter_refresh_s == (0.25 if refresher else 2.0)
        host.snapshot()
        fresh = []
        for _ in range(8):
            clock.sleep(0.5)
            snap = host.snapshot()
            fresh.append(snap.vfs[STOCK_VF].counters_time == snap.time)
        # With GSTATS every 0.5-s snapshot carries new counters; without, one in four (every 2 s).
        assert fresh == ([True] * 8 if refresher else [False, False, False, True] * 2)
        if refresher:
            assert host.counter_refresh_cost[STOCK_PF]["reads"] >= 9
            assert hosttree.PF0[1] not in host.counter_refresh_cost  # patched: on-demand counters
    finally:
        host.close()


# ---- the real ioctl on a veth in a network namespace ----------------------------------------

@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and veth pairs need root")
def test_gstats_on_a_real_veth_in_a_namespace(tmp_path: Path) -> None:
    from pyroute2 import netns
    from vethns import veth_namespace

    with veth_namespace("vftune-gstats", "vfg0a", "vfg0b", up=False) as (name, ipr):
        netns.pushns(name)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        finally:
            netns.popns()
        with sock:
            ioctl = socket_ioctl(sock)
            count = stats_count(ioctl, "vfg0a")
            assert count >= 1  # veth reports peer_ifindex and per-queue counters
            values = read_stats(ioctl, "vfg0a", count)
            assert len(values) == count
            peer = ipr.link_lookup(ifname="vfg0b")[0]
            assert peer in values  # veth's first statistic is its peer's ifindex
            r = EthtoolStatsRefresher(0.25, ioctl)
            assert r.refresh("vfg0a") is not None and r.refresh("vfg0a") is not None
            assert r.cost["vfg0a"].reads == 1 and r.cost["vfg0a"].skipped == 1
            assert r.refresh("nosuch0") is None and not r.supported("nosuch0")
            assert "No such device" in (r.why_not("nosuch0") or "")
