"""The guest's `ethtool -c` text, and the `ethtool -C` arguments that move it to a setting.

ethtool 6.x (netlink) prints one "name: value" per line with "n/a" for what the driver does not
support, and "Adaptive RX: on  TX: off" on one line. ixgbevf supports only the usecs fields:
its adaptive mode is rx-usecs 1 and "Adaptive RX" reads n/a. Drivers with a real adaptive flag
(virtio_net, iavf, mlx5) report it on/off. The parser takes arbitrary guest output and never
raises: anything it cannot read comes back as Unparsable with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# rx-usecs as the drivers (and DESIGN-NOTES) mean it: 0 no throttling, 1 adaptive, >1 static.
RX_USECS_OFF = 0
RX_USECS_ADAPTIVE = 1
RX_USECS_MAX = 0xFFFF_FFFF  # the ethtool ABI field is a u32

_RX_USECS = re.compile(r"^rx-usecs:[ \t]*(\S+)[ \t]*$")
_ADAPTIVE = re.compile(r"^Adaptive RX:[ \t]*(\S+)")


@dataclass(frozen=True)
class Coalesce:
    """What the guest reports for one interface."""

    rx_usecs: int
    adaptive_rx: bool | None  # None: the driver has no adaptive flag ("n/a"), as ixgbevf

    @property
    def effective_rx_usecs(self) -> int:
        """The setting in rx-usecs terms: 1 (adaptive) whenever the adaptive flag is on."""
        return RX_USECS_ADAPTIVE if self.adaptive_rx else self.rx_usecs

    def as_dict(self) -> dict[str, object]:
        """For the write journal: {"rx_usecs": int, "adaptive_rx": bool | None}."""
        return {"rx_usecs": self.rx_usecs, "adaptive_rx": self.adaptive_rx}

    @staticmethod
    def from_dict(obj: object) -> Coalesce | Unparsable:
        """Back from a journal entry (which a crash may have left odd); never raises."""
        if not isinstance(obj, dict):
            return Unparsable(f"journal entry is {type(obj).__name__}, not an object")
        usecs, flag = obj.get("rx_usecs"), obj.get("adaptive_rx")
        if type(usecs) is not int or not 0 <= usecs <= RX_USECS_MAX:
            return Unparsable(f"journal rx_usecs {usecs!r:.40} is not a number 0..{RX_USECS_MAX}")
        if flag is not None and type(flag) is not bool:
            return Unparsable(f"journal adaptive_rx {flag!r:.40} is not true, false or null")
        return Coalesce(usecs, flag)

    def describe(self) -> str:
        flag = "" if self.adaptive_rx is None else f" adaptive-rx {'on' if self.adaptive_rx else 'off'}"
        return f"rx-usecs {self.rx_usecs}{flag}"


@dataclass(frozen=True)
class Unparsable:
    reason: str


def parse_coalesce(text: str) -> Coalesce | Unparsable:
    """Parse `ethtool -c IF` output; never raises."""
    rx_values: list[str] = []
    adaptive_values: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        m = _RX_USECS.match(line)
        if m:
            rx_values.append(m.group(1))
            continue
        m = _ADAPTIVE.match(line)
        if m:
            adaptive_values.append(m.group(1))
    if not rx_values:
        return Unparsable(f"no rx-usecs line in ethtool -c output: {_excerpt(text)}")
    if len(rx_values) > 1:
        return Unparsable(f"{len(rx_values)} rx-usecs lines in ethtool -c output")
    value = rx_values[0]
    if value == "n/a":
        return Unparsable("the guest's driver reports rx-usecs n/a: it has no interrupt moderation to set")
    if not value.isascii() or not value.isdigit() or int(value) > RX_USECS_MAX:
        return Unparsable(f"rx-usecs {value[:40]!r} is not a number 0..{RX_USECS_MAX}")
    if len(adaptive_values) > 1:
        return Unparsable(f"{len(adaptive_values)} 'Adaptive RX' lines in ethtool -c output")
    adaptive: bool | None = None
    if adaptive_values:
        flag = adaptive_values[0]
        if flag not in ("on", "off", "n/a"):
            return Unparsable(f"Adaptive RX {flag[:40]!r} is not on, off or n/a")
        adaptive = None if flag == "n/a" else flag == "on"
    return Coalesce(int(value), adaptive)


def _excerpt(text: str, limit: int = 80) -> str:
    one_line = " ".join(text.split())
    return repr(one_line[:limit] + ("..." if len(one_line) > limit else ""))


def set_args(ifname: str, current: Coalesce, rx_usecs: int) -> list[str] | None:
    """`ethtool -C` arguments that give the interface `rx_usecs` (0 off, 1 adaptive, >1 static).

    On a driver with an adaptive flag, 1 means "adaptive-rx on" and any other value turns the
    flag off (a static interval means nothing while it is on). None: already there, no write.
    """
    args: list[str] = []
    if current.adaptive_rx is None:
        if current.rx_usecs != rx_usecs:
            args += ["rx-usecs", str(rx_usecs)]
    elif rx_usecs == RX_USECS_ADAPTIVE:
        if not current.adaptive_rx:
            args += ["adaptive-rx", "on"]
    else:
        if current.adaptive_rx:
            args += ["adaptive-rx", "off"]
        if current.rx_usecs != rx_usecs:
            args += ["rx-usecs", str(rx_usecs)]
    return ["-C", ifname, *args] if args else None


def restore_args(ifname: str, current: Coalesce, original: Coalesce) -> list[str] | None:
    """`ethtool -C` arguments that put `original` back exactly; None when it is already there."""
    args: list[str] = []
    if original.adaptive_rx is not None and current.adaptive_rx is not None \
            and current.adaptive_rx != original.adaptive_rx:
        args += ["adaptive-rx", "on" if original.adaptive_rx else "off"]
    if current.rx_usecs != original.rx_usecs:
        args += ["rx-usecs", str(original.rx_usecs)]
    return ["-C", ifname, *args] if args else None
