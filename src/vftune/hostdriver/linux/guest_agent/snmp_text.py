"""A guest's /proc/net/snmp and /proc/net/snmp6 text: the datagrams its sockets dropped on receive.

/proc/net/snmp prints each protocol as two lines with the same "Proto:" prefix, the field names
then their values (net/ipv4/proc.c); /proc/net/snmp6 prints one "Name<padding>value" per line
(net/ipv6/proc.c). A socket whose receive buffer is full counts the datagram in RcvbufErrors:
`Udp:` and `UdpLite:` over IPv4, `Udp6RcvbufErrors` and `UdpLite6RcvbufErrors` over IPv6.

The text comes from a guest, so anything may arrive: the parsers raise only SnmpTextError,
whose message is one line naming the file, the line number and the line.
"""

from __future__ import annotations

from vftune.hostdriver.base import HostError

SNMP_PATH = "/proc/net/snmp"
SNMP6_PATH = "/proc/net/snmp6"
RCVBUF_ERRORS = "RcvbufErrors"
# Tables of /proc/net/snmp whose RcvbufErrors count socket receive drops. Every kernel since 2.6.x
# prints both; a missing Udp: table (or field) is an error, a missing UdpLite: counts nothing.
SNMP_TABLES = ("Udp", "UdpLite")
SNMP_REQUIRED = "Udp"
SNMP6_FIELDS = ("Udp6RcvbufErrors", "UdpLite6RcvbufErrors")
SNMP6_REQUIRED = "Udp6RcvbufErrors"
_SHOWN = 80  # characters of a bad line quoted in the message


class SnmpTextError(HostError):
    """The text is not what the guest kernel prints; the message is one line."""


def _fail(source: str, number: int, line: str, why: str) -> SnmpTextError:
    shown = line if len(line) <= _SHOWN else line[:_SHOWN] + "..."
    return SnmpTextError(f"{source}: line {number}: {shown!r}: {why}")


def _count(text: str) -> int | None:
    """A counter as the kernel prints it: decimal digits (no sign, no spaces, no underscores)."""
    return int(text) if text.isascii() and text.isdigit() else None


def parse_snmp(text: str, source: str = SNMP_PATH) -> int:
    """The summed RcvbufErrors of the Udp: and UdpLite: tables of /proc/net/snmp."""
    lines = text.splitlines()
    found: dict[str, int] = {}
    index = 0
    while index < len(lines):
        header = lines[index]
        if not header.strip():
            index += 1
            continue
        prefix, colon, names_text = header.partition(":")
        if not colon or not prefix or " " in prefix or "\t" in prefix:
            raise _fail(source, index + 1, header, "expected 'Proto: Field ...'")
        if index + 1 >= len(lines):
            raise _fail(source, index + 1, header, f"the {prefix}: names have no line of values")
        values_line = lines[index + 1]
        vprefix, vcolon, values_text = values_line.partition(":")
        if not vcolon or vprefix != prefix:
            raise _fail(source, index + 2, values_line, f"expected the values of {prefix}:")
        names, values = names_text.split(), values_text.split()
        if len(names) != len(values):
            raise _fail(source, index + 2, values_line,
                        f"{len(values)} values for {len(names)} names of {prefix}:")
        if prefix in SNMP_TABLES:
            if prefix in found:
                raise _fail(source, index + 1, header, f"a second {prefix}: table")
            if RCVBUF_ERRORS in names:
                raw = values[names.index(RCVBUF_ERRORS)]
                count = _count(raw)
                if count is None:
                    raise _fail(source, index + 2, values_line,
                                f"{prefix}: {RCVBUF_ERRORS} {raw!r} is not a counter")
                found[prefix] = count
            elif prefix == SNMP_REQUIRED:
                raise _fail(source, index + 1, header, f"no {RCVBUF_ERRORS} among the {prefix}: names")
        index += 2
    if SNMP_REQUIRED not in found:
        raise SnmpTextError(f"{source}: no {SNMP_REQUIRED}: table (is this /proc/net/snmp?)")
    return sum(found.values())


def parse_snmp6(text: str, source: str = SNMP6_PATH) -> int:
    """The summed Udp6RcvbufErrors and UdpLite6RcvbufErrors of /proc/net/snmp6."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise _fail(source, number, line, "expected 'Name value'")
        name, raw = parts
        count = _count(raw)
        if count is None:
            raise _fail(source, number, line, f"{raw!r} is not a counter")
        if name in SNMP6_FIELDS:
            if name in found:
                raise _fail(source, number, line, f"a second {name}")
            found[name] = count
    if SNMP6_REQUIRED not in found:
        raise SnmpTextError(f"{source}: no {SNMP6_REQUIRED} line (is this /proc/net/snmp6?)")
    return sum(found.values())
