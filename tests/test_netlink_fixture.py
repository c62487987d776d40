"""The fixture host's netlink replies, filled from a template, are byte for byte what pyroute2's
encoder makes: the fixture is fast without being any less wire-exact."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from netlink_wire import CountingHost, link_reply


def encoded(host: CountingHost, ifname: str, tick: int) -> bytes:
    """What CountingHost replied before it had templates: pyroute2's encoding of the same counts."""
    vfs, macs = host.counts(ifname, tick)
    total = sum(v.rx_packets for v in vfs.values())
    return link_reply(ifname, host.pfs[ifname][0], (total, total * 1400), vfs, sequence=tick, macs=macs)


def test_template_replies_equal_the_encoders_across_ticks_and_changes() -> None:
    host = CountingHost({"enp3s0f0": (4, 63), "enp3s0f1": (5, 8)}, seed=3)
    host.macs[("enp3s0f1", 2)] = "52:54:00:aa:bb:cc"
    for tick in range(1, 4):
        for ifname in ("enp3s0f0", "enp3s0f1"):
            assert host(ifname) == encoded(host, ifname, tick)
    host.frozen.add(("enp3s0f0", 5))  # values change, layout not
    host.missing.add(("enp3s0f1", 7))  # a VF gone: another layout
    for tick in range(4, 6):
        for ifname in ("enp3s0f0", "enp3s0f1"):
            assert host(ifname) == encoded(host, ifname, tick)
