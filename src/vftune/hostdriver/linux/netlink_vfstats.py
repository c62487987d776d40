"""Per-VF and PF counters from one RTM_GETLINK per PF (IFLA_EXT_MASK = RTEXT_FILTER_VF).

The reply's IFLA_VFINFO_LIST holds one IFLA_VF_INFO per VF with IFLA_VF_STATS (the PF
driver's ndo_get_vf_stats); IFLA_STATS64 holds the PF's own counters. Messages are decoded
with pyroute2's ifinfmsg, whether they come from a live socket or from wire bytes a test
or a recording supplies. The live source (RawLinkSource) hands parse_link the reply's bytes,
so a reply of the last one's shape is read without decoding it (LinkMemo).

The VF list is the hot path (63 VFs x 18 attributes per PF per tick): building a pyroute2
object per attribute costs ~8 ms per PF, so the list is walked over the message's raw buffer
with attribute ids taken from pyroute2's own ifinfmsg tables. vfinfo_pyroute2() decodes it
the slow way; the tests check that both agree on wire-exact messages.
"""

from __future__ import annotations

import os
import socket
import struct
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.rtnl_tables import NLMSG_DONE, NLMSG_ERROR, RTM_NEWLINK, ifinfmsg
from vftune.model import maker

RTEXT_FILTER_VF = 1
_NLMSGHDR = struct.Struct("=IHHII")
_NLAHDR = struct.Struct("=HH")
_U32 = struct.Struct("=I")
_U64 = struct.Struct("=Q")
NLA_TYPE_MASK = 0x3FFF  # strips NLA_F_NESTED / NLA_F_NET_BYTEORDER
MAC_LEN = 6


def _ids(nla_map: tuple[tuple[str, str], ...]) -> dict[str, int]:
    # pyroute2 tables without explicit ids number attributes by position, as the kernel enums do.
    return {name: i for i, (name, _kind) in enumerate(nla_map)}


_VFLIST = _ids(ifinfmsg.vflist.nla_map)
_VFINFO = _ids(ifinfmsg.vflist.vfinfo.nla_map)
_VFSTATS = _ids(ifinfmsg.vflist.vfinfo.vf_stats.nla_map)
IFLA_VF_INFO = _VFLIST["IFLA_VF_INFO"]
IFLA_VF_MAC = _VFINFO["IFLA_VF_MAC"]
IFLA_VF_STATS = _VFINFO["IFLA_VF_STATS"]
_STAT_FIELDS = {
    _VFSTATS["IFLA_VF_STATS_RX_PACKETS"]: 0,
    _VFSTATS["IFLA_VF_STATS_RX_BYTES"]: 1,
    _VFSTATS["IFLA_VF_STATS_TX_PACKETS"]: 2,
    _VFSTATS["IFLA_VF_STATS_TX_BYTES"]: 3,
}


@dataclass(frozen=True)
class VfStat:
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int
    mac: str | None = None  # IFLA_VF_MAC, aa:bb:cc:dd:ee:ff (00:00:00:00:00:00 = none assigned)


# vfinfo_from_buffer's memo: an IFLA_VF_INFO payload -> (VF index, VfStat) or None, and
# (its stats' payload's start and end, the payload without them) -> (VF index, MAC) (_moved_vf_info).
VfInfoMemo = dict[Any, Any]


def format_mac(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


@dataclass(frozen=True)
class LinkStats:
    ifname: str
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int
    vfs: dict[int, VfStat]  # by VF index; VFs whose driver reports no IFLA_VF_STATS are absent


Reply = bytes | bytearray | memoryview | Sequence[Any]


class LinkSource(Protocol):
    """Answers one RTM_GETLINK with VF info for a PF: wire bytes or decoded ifinfmsg objects."""

    def link_reply(self, ifname: str) -> Reply: ...

    def close(self) -> None: ...


def _netlink_failure(ifname: str, code: int) -> HostError:
    return HostError(f"{ifname}: netlink RTM_GETLINK: {os.strerror(code)} (errno {code})")


class IPRouteSource:
    """The live source: pyroute2's IPRoute, opened on first use (optionally inside a netns)."""

    def __init__(self, ipr: Any = None) -> None:
        self._ipr = ipr

    def link_reply(self, ifname: str) -> Reply:
        from pyroute2.netlink.exceptions import NetlinkError

        if self._ipr is None:
            from pyroute2 import IPRoute

            self._ipr = IPRoute()
        try:
            reply: Reply = self._ipr.link("get", ifname=ifname, ext_mask=RTEXT_FILTER_VF)
            return reply
        except NetlinkError as exc:
            raise _netlink_failure(ifname, exc.code) from None
        except OSError as exc:
            raise _netlink_failure(ifname, exc.errno or 5) from None

    def close(self) -> None:
        if self._ipr is not None:
            self._ipr.close()
            self._ipr = None


class RawLinkSource:
    """The live source: one RTM_GETLINK per PF on a NETLINK_ROUTE socket of this process's
    network namespace (or `sock`, one opened elsewhere), the reply returned as bytes.

    pyroute2's IPRoute decodes every reply into objects before returning it: 417 us a PF,
    measured on lo, against 81 us for the same request and parse_link over the bytes."""

    REPLY_TIMEOUT_S = 2.0  # the kernel answers a GETLINK at once; this is for a wedged socket
    STALE_REPLIES = 8  # replies of earlier, timed-out requests skipped before giving up

    def __init__(self, sock: socket.socket | None = None) -> None:
        self._sock = sock
        if sock is not None:
            sock.settimeout(self.REPLY_TIMEOUT_S)
        self._requests: dict[str, bytearray] = {}
        self._sequence = 0
        self._buffer = bytearray(1 << 16)  # 63 VFs' IFLA_VF_INFO take ~25 kB; grown when short

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
            sock.bind((0, 0))
            sock.settimeout(self.REPLY_TIMEOUT_S)
            self._sock = sock
        return self._sock

    def link_reply(self, ifname: str) -> Reply:
        sock = self._socket()
        request = self._requests.get(ifname)
        if request is None:
            request = self._requests[ifname] = bytearray(encode_getlink_request(ifname))
        self._sequence = self._sequence % 0xFFFFFFFF + 1
        _U32.pack_into(request, 8, self._sequence)  # nlmsghdr.nlmsg_seq
        try:
            sock.send(request)
            for _ in range(self.STALE_REPLIES + 1):
                size = sock.recv_into(self._buffer, len(self._buffer), socket.MSG_PEEK | socket.MSG_TRUNC)
                if size > len(self._buffer):
                    self._buffer = bytearray(size)
                size = sock.recv_into(self._buffer)
                if size >= _NLMSGHDR.size and _U32.unpack_from(self._buffer, 8)[0] == self._sequence:
                    return bytes(self._buffer[:size])
        except TimeoutError:
            raise _netlink_failure(ifname, 110) from None  # ETIMEDOUT
        except OSError as exc:
            raise _netlink_failure(ifname, exc.errno or 5) from None
        raise _netlink_failure(ifname, 74)  # EBADMSG: no reply to this request among the last ones

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class ReplaySource:
    """Wire-exact replies supplied by the caller (tests, benchmarks, recorded hosts)."""

    def __init__(self, replies: Mapping[str, bytes] | Callable[[str], bytes]) -> None:
        self._replies = replies

    def link_reply(self, ifname: str) -> Reply:
        if callable(self._replies):
            return self._replies(ifname)
        try:
            return self._replies[ifname]
        except KeyError:
            raise _netlink_failure(ifname, 19) from None  # ENODEV, as the kernel answers

    def close(self) -> None:
        pass


def as_source(netlink: Any) -> LinkSource:
    """None: a live netlink socket; an object with link_reply(): used as is; anything else: an
    IPRoute-like (e.g. one opened in a netns)."""
    if netlink is None:
        return RawLinkSource()
    if hasattr(netlink, "link_reply"):
        return cast(LinkSource, netlink)
    if hasattr(netlink, "link"):
        return IPRouteSource(netlink)
    raise TypeError(f"netlink source must have link_reply() or be an IPRoute, got {type(netlink).__name__}")


def encode_getlink_request(ifname: str, sequence: int = 1) -> bytes:
    """The request the live source sends, as bytes (documented here for recordings)."""
    msg = ifinfmsg()
    msg["header"]["type"] = 18  # RTM_GETLINK
    msg["header"]["flags"] = 1  # NLM_F_REQUEST
    msg["header"]["sequence_number"] = sequence
    msg["attrs"] = [("IFLA_IFNAME", ifname), ("IFLA_EXT_MASK", RTEXT_FILTER_VF)]
    msg.encode()
    return bytes(msg.data)


def decode_reply(data: bytes | bytearray | memoryview, ifname: str) -> list[ifinfmsg]:
    """Split a netlink reply buffer into ifinfmsg objects; an NLMSG_ERROR becomes a HostError."""
    buf = bytes(data)
    msgs: list[ifinfmsg] = []
    offset = 0
    while offset + _NLMSGHDR.size <= len(buf):
        length, msg_type, _flags, _seq, _pid = _NLMSGHDR.unpack_from(buf, offset)
        if length < _NLMSGHDR.size or offset + length > len(buf):
            raise HostError(f"{ifname}: truncated netlink message at byte {offset} (length {length})")
        if msg_type == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", buf, offset + _NLMSGHDR.size)
            if code != 0:
                raise _netlink_failure(ifname, -code)
        elif msg_type == NLMSG_DONE:
            break
        elif msg_type == RTM_NEWLINK:
            msg = ifinfmsg(buf[offset:offset + length])
            msg.decode()
            msgs.append(msg)
        offset += (length + 3) & ~3
    return msgs


def _attrs(buf: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    """(type, payload start, payload end) of the attributes in buf[start:end]."""
    out = []
    off = start
    while off + 4 <= end:
        length, kind = _NLAHDR.unpack_from(buf, off)
        if length < 4 or off + length > end:
            raise HostError(f"malformed netlink attribute at byte {off} (length {length})")
        out.append((kind & NLA_TYPE_MASK, off + 4, off + length))
        off += (length + 3) & ~3
    return out


_STAT_ATTR = 4 + _U64.size  # one IFLA_VF_STATS_* attribute as the kernel packs it (nla_put_u64_64bit)
# IFLA_VF_STATS payload size -> its all-u64 layout ("=HHQHHQ...") and the lengths it must hold.
_STATS_STRUCTS: dict[int, tuple[struct.Struct, tuple[int, ...]]] = {}
# The attribute kinds, in order -> where each of the four counters is in the unpacked values.
_STAT_PICKS: dict[tuple[int, ...], tuple[int | None, ...]] = {}
_MACS: dict[bytes, str] = {}  # raw 6 bytes -> aa:bb:cc:dd:ee:ff (a host's VFs' MACs: a few hundred)
_MACS_MAX = 4096
# IFLA_VF_INFO payload size -> the headers its last walk met (a struct reading them all at once,
# their values) and where its MAC and stats were: VFs of one PF share one shape.
_SHAPES: dict[int, tuple[struct.Struct, tuple[int, ...], tuple[tuple[int, int, int], ...]]] = {}
_SHAPES_MAX = 256


def _vf_stats(buf: bytes, start: int, end: int) -> list[int]:
    """The four counters of an IFLA_VF_STATS payload (0 for one not there; the last of a repeat)."""
    counts = [0, 0, 0, 0]
    size = end - start
    if size % _STAT_ATTR == 0 and end <= len(buf):
        # The kernel's layout: every attribute a u64, 12 bytes, no padding: one unpack for all.
        layout = _STATS_STRUCTS.get(size)
        if layout is None:
            layout = _STATS_STRUCTS[size] = (struct.Struct("=" + "HHQ" * (size // _STAT_ATTR)),
                                             (_STAT_ATTR,) * (size // _STAT_ATTR))
        values = layout[0].unpack_from(buf, start)
        if values[0::3] == layout[1]:
            kinds = values[1::3]
            picks = _STAT_PICKS.get(kinds)
            if picks is None:
                if len(_STAT_PICKS) >= _SHAPES_MAX:
                    _STAT_PICKS.clear()
                # Which value fills each counter: the last attribute of its kind.
                last = {_STAT_FIELDS[k & NLA_TYPE_MASK]: 3 * i + 2 for i, k in enumerate(kinds)
                        if (k & NLA_TYPE_MASK) in _STAT_FIELDS}
                picks = _STAT_PICKS[kinds] = tuple(last.get(slot) for slot in range(4))
            return [0 if i is None else values[i] for i in picks]
    for stat, t0, _t1 in _attrs(buf, start, end):
        slot = _STAT_FIELDS.get(stat)
        if slot is not None:
            (counts[slot],) = _U64.unpack_from(buf, t0)
    return counts


def _vf_info(buf: bytes, start: int, end: int) -> tuple[int, VfStat] | None:
    """One IFLA_VF_INFO payload: (VF index, its counters), None without IFLA_VF_MAC or IFLA_VF_STATS."""
    # The level is checked whole before any of it is read (as _attrs does), then MAC and stats
    # are read in their order: the same errors, first to last, as walking it with _attrs.
    shape = _SHAPES.get(end - start)
    if shape is not None and end <= len(buf) and shape[0].unpack_from(buf, start) == shape[1]:
        # Every header where the last VF of this size had its own: the same walk, the same attributes.
        wanted = [(kind, start + r0, start + r1) for kind, r0, r1 in shape[2]]
    else:
        wanted = []
        headers: list[int] = []
        layout = "="
        off = start
        unpack = _NLAHDR.unpack_from
        while off + 4 <= end:
            length, kind = unpack(buf, off)
            if length < 4 or off + length > end:
                raise HostError(f"malformed netlink attribute at byte {off} (length {length})")
            headers += (length, kind)
            step = (length + 3) & ~3
            layout += "HH" + (f"{min(step, end - off) - 4}x" if min(step, end - off) > 4 else "")
            kind &= NLA_TYPE_MASK
            if kind in (IFLA_VF_MAC, IFLA_VF_STATS):
                wanted.append((kind, off + 4, off + length))
            off += step
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[end - start] = (struct.Struct(layout), tuple(headers),
                                tuple((kind, p0 - start, p1 - start) for kind, p0, p1 in wanted))
    index = None
    mac: str | None = None
    counts: list[int] | None = None
    for sub, s0, s1 in wanted:
        if sub == IFLA_VF_MAC:
            # struct ifla_vf_mac { __u32 vf; __u8 mac[32]; }: Ethernet uses the first 6 bytes.
            if s1 - s0 < _U32.size + MAC_LEN:
                raise HostError(f"IFLA_VF_MAC at byte {s0 - 4}: {s1 - s0} bytes, need {_U32.size + MAC_LEN}")
            (index,) = _U32.unpack_from(buf, s0)
            raw = buf[s0 + _U32.size:s0 + _U32.size + MAC_LEN]
            mac = _MACS.get(raw)
            if mac is None:
                if len(_MACS) >= _MACS_MAX:
                    _MACS.clear()
                mac = _MACS[raw] = format_mac(raw)
        else:
            counts = _vf_stats(buf, s0, s1)
    if index is None or counts is None:
        return None
    return index, VfStat(counts[0], counts[1], counts[2], counts[3], mac)


def vfinfo_from_buffer(buf: bytes | bytearray | memoryview, start: int, end: int,
                       memo: VfInfoMemo | None = None) -> dict[int, VfStat]:
    """Walk an IFLA_VFINFO_LIST payload; VFs without IFLA_VF_MAC or IFLA_VF_STATS are skipped.

    memo: the last call's IFLA_VF_INFO payloads and what they gave, refilled with this call's: a
    VF whose attribute did not change by a byte (an idle VF's counters) is not parsed again."""
    data = buf if isinstance(buf, bytes) else bytes(buf)
    vfs: dict[int, VfStat] = {}
    last = dict(memo) if memo is not None else None
    if memo is not None:
        memo.clear()
    for kind, p0, p1 in _attrs(data, start, end):
        if kind != IFLA_VF_INFO:
            continue
        if last is None or memo is None:
            got = _vf_info(data, p0, p1)
        else:
            raw = data[p0:p1]
            got = last.get(raw, _UNSEEN)
            if got is _UNSEEN:
                got = _moved_vf_info(data, p0, p1, last, memo)
            memo[raw] = got
        if got is not None:
            vfs[got[0]] = got[1]
    return vfs


_UNSEEN = object()  # not in the memo (None there: a VF without MAC or stats)
_make_vf_stat = maker(VfStat)


def _moved_vf_info(data: bytes, p0: int, p1: int, last: VfInfoMemo, memo: VfInfoMemo
                   ) -> tuple[int, VfStat] | None:
    """_vf_info of a payload not in the memo. A VF whose payload differs from its last one only
    inside IFLA_VF_STATS' payload (a busy VF's counters) takes its index and MAC from the memo
    and reads only its counters. The memo also keeps each VF by where its stats' payload is and
    its bytes outside it (a tuple: never a payload's own key): the same bytes there, the stats at
    the same place, are the same attribute walk and the same MAC before the stats, and the stats'
    payload is read (its errors met) as _vf_info reads it."""
    shape = _SHAPES.get(p1 - p0)
    if shape is None or len(shape[2]) != 2 or shape[2][0][0] != IFLA_VF_MAC or shape[2][1][0] != IFLA_VF_STATS:
        return _vf_info(data, p0, p1)
    r0, r1 = shape[2][1][1], shape[2][1][2]
    key = (r0, r1, data[p0:p0 + r0] + data[p0 + r1:p1])
    known = last.get(key)
    if known is not None:
        counts = _vf_stats(data, p0 + r0, p0 + r1)
        memo[key] = known
        return known[0], _make_vf_stat((counts[0], counts[1], counts[2], counts[3], known[1]))
    got = _vf_info(data, p0, p1)
    after = _SHAPES.get(p1 - p0)  # this payload's own walk, whether it matched the shape or made it
    if got is not None and after is not None and after[2] == shape[2]:
        memo[key] = (got[0], got[1].mac)
    return got


def vfinfo_pyroute2(msg: ifinfmsg) -> dict[int, VfStat]:
    """The same extraction through pyroute2's full NLA decoding (reference; slow)."""
    vfs: dict[int, VfStat] = {}
    vflist = msg.get_attr("IFLA_VFINFO_LIST")
    if vflist is None:
        return vfs
    for info in vflist.get_attrs("IFLA_VF_INFO"):
        mac = info.get_attr("IFLA_VF_MAC")
        vf_stats = info.get_attr("IFLA_VF_STATS")
        if mac is None or vf_stats is None:
            continue
        get = vf_stats.get_attr
        vfs[mac["vf"]] = VfStat(
            rx_packets=get("IFLA_VF_STATS_RX_PACKETS") or 0,
            rx_bytes=get("IFLA_VF_STATS_RX_BYTES") or 0,
            tx_packets=get("IFLA_VF_STATS_TX_PACKETS") or 0,
            tx_bytes=get("IFLA_VF_STATS_TX_BYTES") or 0,
            mac=str(mac["mac"]).lower(),
        )
    return vfs


def link_messages(reply: Reply, ifname: str) -> list[ifinfmsg]:
    return decode_reply(reply, ifname) if isinstance(reply, (bytes, bytearray, memoryview)) else list(reply)


# The top level of an RTM_NEWLINK as the fast path reads it (LinkMemo): attribute ids from pyroute2's table.
_LINK = _ids(ifinfmsg.nla_map)
IFLA_IFNAME, IFLA_STATS64, IFLA_VFINFO_LIST = _LINK["IFLA_IFNAME"], _LINK["IFLA_STATS64"], _LINK["IFLA_VFINFO_LIST"]
# Attributes whose payload pyroute2 reads while it splits a message into attributes (their class
# is chosen by a function of the payload), and the one _parse_link decodes to pick the message:
# their bytes are part of a reply's shape. Every other payload is left to a later decode, which
# _parse_link asks only of IFLA_STATS64 (read here at the offsets of pyroute2's ifstats64).
_READ_AT_SPLIT = frozenset(
    [IFLA_IFNAME] + [_LINK[name] for name, kind in ifinfmsg.nla_map if isinstance(kind, str) and
                     isinstance(getattr(ifinfmsg, kind, None), types.FunctionType)])
_IFINFO_END = _NLMSGHDR.size + 16  # nlmsghdr + struct ifinfomsg: the attributes start here
_S64 = [name for name, _fmt in ifinfmsg.ifstats64.fields]
assert all(fmt == "Q" for _name, fmt in ifinfmsg.ifstats64.fields), "ifstats64 is not all u64"
_S64_AT = tuple(8 * _S64.index(name) for name in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes"))
_S64_MIN = 8 * 4  # the four counters read fit in a payload this long (else: the slow path every time)
_NO_SPAN = (-1, -1)


class LinkMemo:
    """Kept by the caller between one link's replies: the last reply's IFLA_VF_INFO payloads
    (vfinfo_from_buffer's memo) and its shape (its bytes but for the sequence number, the port
    id and every attribute payload pyroute2 leaves undecoded), with where that reply's link had
    its counters. A reply of the shape last parsed in full is read without pyroute2: the same
    bytes at the same places decode the same, and only the counters' payloads differ."""

    __slots__ = ("vfinfo", "shape", "where")

    def __init__(self) -> None:
        self.vfinfo: VfInfoMemo = {}
        self.shape: bytes | None = None
        # The link's message (start, end), its IFLA_STATS64 payload (start, length; -1: absent) and
        # IFLA_VFINFO_LIST payload (start, end in the message, as pyroute2 and its errors count; -1: absent).
        self.where: tuple[int, int, int, int, int, int] = (-1, -1, -1, -1, -1, -1)


def _shape(buf: bytes) -> tuple[bytes, list[tuple[int, int, int, int, int, int]]] | None:
    """A reply's shape and, per RTM_NEWLINK in order, LinkMemo.where: the message's span, its
    first IFLA_STATS64 (payload start, length) and first IFLA_VFINFO_LIST (payload start, end
    counted in the message), -1 when absent; None for anything
    decode_reply or pyroute2 would meet otherwise than on a well-formed reply (an error, a
    truncation, an attribute whose length is not its own): those go the slow way."""
    parts: list[bytes] = []
    links: list[tuple[int, int, int, int, int, int]] = []
    size, at, offset = len(buf), 0, 0
    unpack_msg, unpack_nla = _NLMSGHDR.unpack_from, _NLAHDR.unpack_from
    while offset + _NLMSGHDR.size <= size:
        length, msg_type, _flags, _seq, _pid = unpack_msg(buf, offset)
        if length < _NLMSGHDR.size or offset + length > size:
            return None
        if msg_type == NLMSG_ERROR:
            return None
        # The header without its sequence number and port id (a live socket's change per request).
        parts.append(buf[at:offset + 8])
        at = offset + _NLMSGHDR.size
        if msg_type == NLMSG_DONE:
            break
        if msg_type == RTM_NEWLINK:
            end = offset + length
            if length < _IFINFO_END:
                return None
            stats64, vflist = _NO_SPAN, _NO_SPAN
            off = offset + _IFINFO_END
            while off + 4 <= end:
                alen, kind = unpack_nla(buf, off)
                if alen < 4 or off + alen > end:
                    return None
                kind &= NLA_TYPE_MASK
                if kind not in _READ_AT_SPLIT:
                    parts.append(buf[at:off + 4])  # up to its header, which stays
                    at = off + alen
                    if kind == IFLA_STATS64 and stats64 is _NO_SPAN:
                        stats64 = (off + 4, alen - 4)
                    elif kind == IFLA_VFINFO_LIST and vflist is _NO_SPAN:
                        vflist = (off + 4 - offset, off + alen - offset)
                off += (alen + 3) & ~3
            links.append((offset, end, *stats64, *vflist))
        offset += (length + 3) & ~3
    parts.append(buf[at:])
    return b"".join(parts), links


def parse_link(reply: Reply, ifname: str,
               memo: VfInfoMemo | LinkMemo | None = None) -> LinkStats:
    """Raises HostError naming the link and the problem; nothing else, whatever the bytes.
    memo: kept by the caller between replies of this link: vfinfo_from_buffer's dict, or a
    LinkMemo, which also reads a reply of the last one's shape without pyroute2 (the same result)."""
    if isinstance(memo, LinkMemo) and isinstance(reply, (bytes, bytearray, memoryview)):
        data = reply if isinstance(reply, bytes) else bytes(reply)
        if memo.shape is not None:
            shape = _shape(data)
            if shape is not None and shape[0] == memo.shape:
                return _read_link(data, ifname, memo)
        try:
            return _parse_link(data, ifname, memo.vfinfo, memo)
        except HostError:
            raise
        except Exception as exc:
            raise HostError(f"{ifname}: malformed netlink reply ({type(exc).__name__}: {exc})") from None
    vfinfo = memo.vfinfo if isinstance(memo, LinkMemo) else memo
    try:
        return _parse_link(reply, ifname, vfinfo)
    except HostError:
        raise
    except Exception as exc:  # pyroute2's decoder raises what it meets on bytes no kernel sent
        raise HostError(f"{ifname}: malformed netlink reply ({type(exc).__name__}: {exc})") from None


def _read_link(data: bytes, ifname: str, memo: LinkMemo) -> LinkStats:
    """A reply of the shape last parsed in full (LinkMemo): its counters where they were then."""
    m0, m1, s0, _slen, v0, v1 = memo.where
    counts = [0, 0, 0, 0]
    if s0 >= 0:
        counts = [_U64.unpack_from(data, s0 + at)[0] for at in _S64_AT]
    vfs: dict[int, VfStat] = {}
    if v0 >= 0:
        try:  # over the message alone, as pyroute2 holds it: an error names the same byte
            vfs = vfinfo_from_buffer(data if m0 == 0 and m1 == len(data) else data[m0:m1], v0, v1, memo.vfinfo)
        except HostError as exc:
            raise HostError(f"{ifname}: IFLA_VFINFO_LIST: {exc}") from None
    return LinkStats(ifname=ifname, rx_packets=counts[0], rx_bytes=counts[1], tx_packets=counts[2],
                     tx_bytes=counts[3], vfs=vfs)


def _parse_link(reply: Reply, ifname: str, memo: VfInfoMemo | None,
                learn: LinkMemo | None = None) -> LinkStats:
    msgs = link_messages(reply, ifname)
    index, msg = next(((i, m) for i, m in enumerate(msgs) if m.get_attr("IFLA_IFNAME") == ifname), (-1, None))
    if msg is None:
        raise HostError(f"{ifname}: netlink reply holds no link of that name")
    stats = msg.get_attr("IFLA_STATS64") or {}
    vfs: dict[int, VfStat] = {}
    for slot in msg["attrs"]:
        if slot[0] == "IFLA_VFINFO_LIST":
            cell = slot.cell[1]  # the attribute over the message buffer, decoded or not
            try:
                vfs = vfinfo_from_buffer(cell.data, cell.offset + 4, cell.offset + cell.length, memo)
            except HostError as exc:
                raise HostError(f"{ifname}: IFLA_VFINFO_LIST: {exc}") from None
            break
    got = LinkStats(
        ifname=ifname,
        rx_packets=stats.get("rx_packets", 0), rx_bytes=stats.get("rx_bytes", 0),
        tx_packets=stats.get("tx_packets", 0), tx_bytes=stats.get("tx_bytes", 0),
        vfs=vfs,
    )
    if learn is not None and isinstance(reply, bytes):
        learn.shape = None
        shape = _shape(reply)
        if shape is not None and len(shape[1]) == len(msgs):
            where = shape[1][index]
            learn.where = where
            # Kept only when the fast read gives what pyroute2 gave (a payload too short for the
            # four counters is decoded by pyroute2 past its end: never read the fast way).
            if (where[2] < 0 or where[3] >= _S64_MIN) and _read_link(reply, ifname, _Probe(where)) == got:
                learn.shape = shape[0]
    return got


class _Probe(LinkMemo):
    """A LinkMemo for checking a fast read against the full parse: no VF memo of its own."""

    __slots__ = ()

    def __init__(self, where: tuple[int, int, int, int, int, int]) -> None:
        super().__init__()
        self.where = where
