"""Wire-exact RTM_NEWLINK replies (pyroute2's ifinfmsg encoder) through the backend's parser."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from netlink_wire import VfCounts, error_reply, link_reply

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.netlink_vfstats import (
    RTEXT_FILTER_VF,
    ReplaySource,
    as_source,
    decode_reply,
    encode_getlink_request,
    parse_link,
    vfinfo_pyroute2,
)
from vftune.hostdriver.linux.rtnl_tables import defer_package_init

NLMSG_DONE = b"\x14\x00\x00\x00\x03\x00\x02\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"


def counts(n: int) -> VfCounts:
    return VfCounts(rx_packets=10**9 + n, rx_bytes=2**40 + n, tx_packets=7 * n, tx_bytes=64 * n)


def test_all_63_vfs_decoded_with_exact_64_bit_counters() -> None:
    reply = link_reply("enp3s0f0", 4, (123456789012, 98765432109876), {n: counts(n) for n in range(63)})
    stats = parse_link(reply, "enp3s0f0")
    assert (stats.rx_packets, stats.rx_bytes) == (123456789012, 98765432109876)
    assert sorted(stats.vfs) == list(range(63))
    for n, vf in stats.vfs.items():
        c = counts(n)
        assert (vf.rx_packets, vf.rx_bytes, vf.tx_packets, vf.tx_bytes) == \
            (c.rx_packets, c.rx_bytes, c.tx_packets, c.tx_bytes)


def test_multi_message_buffer_picks_the_asked_link_and_stops_at_done() -> None:
    other = link_reply("enp3s0f1", 5, (1, 1), {0: counts(9)})
    mine = link_reply("enp3s0f0", 4, (2, 2), {3: counts(3)})
    stats = parse_link(other + mine + NLMSG_DONE + link_reply("late", 9, (0, 0), {}), "enp3s0f0")
    assert list(stats.vfs) == [3] and stats.rx_packets == 2


def test_kernel_errors_and_broken_buffers_are_one_line_errors() -> None:
    with pytest.raises(HostError, match=r"^enp3s0f0: netlink RTM_GETLINK: Operation not permitted \(errno 1\)$"):
        parse_link(error_reply(1), "enp3s0f0")
    reply = link_reply("enp3s0f0", 4, (1, 1), {0: counts(0)})
    with pytest.raises(HostError, match=r"^enp3s0f0: truncated netlink message at byte 0"):
        parse_link(reply[:-8], "enp3s0f0")
    with pytest.raises(HostError, match="holds no link of that name"):
        parse_link(reply, "enp3s0f1")
    with pytest.raises(HostError, match=r"No such device \(errno 19\)"):
        ReplaySource({}).link_reply("gone0")


def test_request_is_getlink_with_the_vf_filter() -> None:
    msg = ifinfmsg(encode_getlink_request("enp3s0f0", sequence=5))
    msg.decode()
    assert msg["header"]["type"] == 18 and msg["header"]["sequence_number"] == 5
    assert msg.get_attr("IFLA_IFNAME") == "enp3s0f0"
    assert msg.get_attr("IFLA_EXT_MASK") == RTEXT_FILTER_VF


def test_source_must_answer_link_requests() -> None:
    with pytest.raises(TypeError, match="netlink source must have link_reply"):
        as_source(object())


def test_fast_vf_walk_agrees_with_pyroute2s_full_decoding() -> None:
    vfs = {n: counts(n) for n in range(0, 63, 2)}
    reply = link_reply("enp3s0f0", 4, (5, 6), vfs)
    msg = decode_reply(reply, "enp3s0f0")[0]
    reference = vfinfo_pyroute2(msg)  # also leaves the message fully decoded, as IPRoute hands it over
    assert reference == parse_link([msg], "enp3s0f0").vfs == parse_link(reply, "enp3s0f0").vfs
    assert sorted(reference) == list(range(0, 63, 2))


def test_vf_without_stats_is_left_out_and_a_bad_attribute_length_is_an_error() -> None:
    msg = ifinfmsg()
    msg["header"]["type"] = 16
    msg["attrs"] = [("IFLA_IFNAME", "enp3s0f0"), ("IFLA_VFINFO_LIST", {"attrs": [
        ("IFLA_VF_INFO", {"attrs": [("IFLA_VF_MAC", {"vf": 0, "mac": "52:54:00:00:00:01"})]}),
    ]})]
    msg.encode()
    wire = bytes(msg.data)
    assert parse_link(wire, "enp3s0f0").vfs == {}
    # Corrupt the first IFLA_VF_INFO length so that it runs past its list.
    at = wire.index(b"\x01\x00", wire.index(b"enp3s0f0") + 12) - 2
    broken = wire[:at] + b"\xff\x00" + wire[at + 2:]
    with pytest.raises(HostError, match=r"^enp3s0f0: IFLA_VFINFO_LIST: malformed netlink attribute"):
        parse_link(broken, "enp3s0f0")


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers(0, 62), st.binary(min_size=6, max_size=6), max_size=8))
def test_vf_mac_is_the_six_bytes_after_the_vf_index(macs: dict[int, bytes]) -> None:
    text = {n: ":".join(f"{b:02x}" for b in raw) for n, raw in macs.items()}
    reply = link_reply("enp3s0f0", 4, (1, 1), {n: counts(n) for n in macs}, macs=text)
    vfs = parse_link(reply, "enp3s0f0").vfs
    assert {n: vf.mac for n, vf in vfs.items()} == text
    assert vfinfo_pyroute2(decode_reply(reply, "enp3s0f0")[0]) == vfs


def test_short_vf_mac_attribute_is_an_error_not_a_guess() -> None:
    import struct

    from vftune.hostdriver.linux.netlink_vfstats import IFLA_VF_INFO, IFLA_VF_MAC, IFLA_VF_STATS, vfinfo_from_buffer

    mac = struct.pack("=HHI3sx", 4 + 4 + 3, IFLA_VF_MAC, 0, b"\x02\x00\x00")  # index, then 3 bytes of MAC
    stats = struct.pack("=HH", 4, IFLA_VF_STATS)
    info = struct.pack("=HH", 4 + len(mac) + len(stats), IFLA_VF_INFO) + mac + stats
    with pytest.raises(HostError, match=r"^IFLA_VF_MAC at byte 4: 7 bytes, need 10$"):
        vfinfo_from_buffer(info, 0, len(info))


def test_the_agent_reads_netlink_without_loading_pyroute2s_whole_library() -> None:
    """pyroute2's __init__ imports NDB, IPDB, nftables, plan9 and the rest: 11 MB of the agent's
    memory it never uses. Asked for later (the test bed's IPRoute), the package is whole."""
    code = """
import json, sys
from vftune.cli.run import run
from vftune.hostdriver.linux import netlink_vfstats
from vftune.hostdriver.linux.host import LinuxHost
loaded = sorted(m for m in sys.modules if m.startswith("pyroute2"))
from pyroute2 import NDB, IPRoute
import pyroute2.netlink.rtnl.ifinfmsg
print(json.dumps({"loaded": loaded, "same_table": pyroute2.netlink.rtnl.ifinfmsg.ifinfmsg is netlink_vfstats.ifinfmsg,
                  "whole": "pyroute2.ndb.main" in sys.modules and IPRoute.__name__ == "IPRoute"}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    got = json.loads(out)
    assert not [m for m in got["loaded"] if m.startswith(("pyroute2.ndb", "pyroute2.ipdb", "pyroute2.nftables"))]
    assert len(got["loaded"]) < 40, got["loaded"]
    assert got["same_table"] and got["whole"]


def test_a_deferred_package_runs_its_init_once_on_the_first_name_asked(tmp_path: Path, monkeypatch) -> None:
    pkg = tmp_path / "deferpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import deferpkg.part\nRUNS = deferpkg.part.runs\nRUNS.append('init')\nNAME = 'x'\n")
    (pkg / "part.py").write_text("from deferpkg import sub\nruns = []\n")
    (pkg / "sub.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("deferpkg", "deferpkg.part", "deferpkg.sub"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    defer_package_init("deferpkg")
    import deferpkg.part

    assert deferpkg.part.runs == []  # the submodule, and its `from deferpkg import sub`, without __init__
    from deferpkg import NAME

    assert (NAME, deferpkg.part.runs) == ("x", ["init"])
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        deferpkg.missing  # noqa: B018
    assert deferpkg.part.runs == ["init"]
