"""Fresh VF counters on a stock ixgbe: read the PF's ethtool statistics (ETHTOOL_GSTATS).

ixgbe copies the per-VF counters (PVFGPRC, PVFGORC, ...) from the hardware in
ixgbe_update_stats, which its service task runs about every 2 s, and which
ixgbe_get_ethtool_stats runs too: one ETHTOOL_GSTATS ioctl on the PF (what `ethtool -S` does)
refreshes every VF's counters at once, so the netlink VF stats read right after it are fresh
and a measurement window can be a fraction of a second.

Each read walks the PF's statistics registers over PCIe, so reads are rate-limited per PF
(min_interval_s) and their cost is measured (wall time per read, kept in `cost`). The ioctl is
the raw SIOCETHTOOL one (pyroute2's Ethtool has no GSTATS): ETHTOOL_GSSET_INFO for the number
of statistics, then ETHTOOL_GSTATS into a buffer of that many u64s (include/uapi/linux/ethtool.h).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

SIOCETHTOOL = 0x8946
ETHTOOL_GSTATS = 0x0000001D
ETHTOOL_GSSET_INFO = 0x00000037
ETH_SS_STATS = 1
IFNAMSIZ = 16
MAX_STATS = 1 << 16  # a sanity bound: ixgbe has a few hundred

# (ifname, request buffer) -> None; raises OSError like fcntl.ioctl. The buffer is the ethtool
# command struct the request points at (ifr_data), filled in place.
Ioctl = Callable[[str, ctypes.Array[ctypes.c_char]], None]


def socket_ioctl(sock: socket.socket) -> Ioctl:
    """SIOCETHTOOL on `sock` (a socket opened in the PF's network namespace)."""
    def call(ifname: str, buf: ctypes.Array[ctypes.c_char]) -> None:
        name = ifname.encode()
        if not 0 < len(name) < IFNAMSIZ:
            raise OSError(errno.EINVAL, f"bad interface name {ifname!r}")
        ifreq = struct.pack(f"{IFNAMSIZ}sP", name, ctypes.addressof(buf))
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)

    return call


def stats_count(ioctl: Ioctl, ifname: str) -> int:
    """ETHTOOL_GSSET_INFO for ETH_SS_STATS: how many u64 statistics the device reports."""
    # struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
    buf = ctypes.create_string_buffer(struct.pack("=IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0))
    ioctl(ifname, buf)
    _, _, mask, count = struct.unpack("=IIQI", buf.raw[:20])
    if not mask & (1 << ETH_SS_STATS):
        return 0
    if count > MAX_STATS:
        raise OSError(errno.EOVERFLOW, f"{count} statistics")
    return int(count)


def read_stats(ioctl: Ioctl, ifname: str, count: int) -> tuple[int, ...]:
    """ETHTOOL_GSTATS: the device's `count` u64 statistics (running the driver's stats update)."""
    # struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
    buf = ctypes.create_string_buffer(struct.pack("=II", ETHTOOL_GSTATS, count) + bytes(8 * count))
    ioctl(ifname, buf)
    n = struct.unpack("=II", buf.raw[:8])[1]
    if n > count:
        raise OSError(errno.EOVERFLOW, f"{n} statistics, buffer for {count}")
    return struct.unpack(f"={n}Q", buf.raw[8:8 + 8 * n])


@dataclass
class RefreshCost:
    """What the reads cost: how many, and their wall time (seconds)."""

    reads: int = 0
    skipped: int = 0  # refreshes asked within min_interval_s of the last read
    total_s: float = 0.0
    max_s: float = 0.0
    errors: int = 0
    last_error: str | None = None

    @property
    def mean_s(self) -> float | None:
        return self.total_s / self.reads if self.reads else None

    def as_dict(self) -> dict[str, object]:
        return {"reads": self.reads, "skipped": self.skipped, "mean_s": self.mean_s, "max_s": self.max_s,
                "errors": self.errors, "last_error": self.last_error}


class EthtoolStatsRefresher:
    """Refreshes a PF's VF counters by reading its ethtool statistics, at most every min_interval_s.

    refresh(pf) returns the time of the read when it happened now or within min_interval_s (the
    counters are that fresh), None when it could not read (the error is kept in cost; a device
    without GSTATS is remembered and not asked again)."""

    def __init__(self, min_interval_s: float = 0.25, ioctl: Ioctl | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not min_interval_s >= 0:
            raise ValueError(f"min_interval_s must be >= 0, got {min_interval_s!r}")
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._sock: socket.socket | None = None
        if ioctl is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            ioctl = socket_ioctl(self._sock)
        self._ioctl = ioctl
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._last: dict[str, float] = {}
        self._unsupported: dict[str, str] = {}
        self.cost: dict[str, RefreshCost] = {}

    def forget(self) -> None:
        """The PFs may have changed (inventory re-read): ask again."""
        with self._lock:
            self._unsupported.clear()
            self._counts.clear()

    def supported(self, pf: str) -> bool:
        return pf not in self._unsupported

    def why_not(self, pf: str) -> str | None:
        return self._unsupported.get(pf)

    def refresh(self, pf: str) -> float | None:
        with self._lock:
            cost = self.cost.setdefault(pf, RefreshCost())
            if pf in self._unsupported:
                return None
            now = self._clock()
            last = self._last.get(pf)
            if last is not None and now - last < self.min_interval_s:
                cost.skipped += 1
                return last
            started = time.perf_counter()
            try:
                if pf not in self._counts:
                    self._counts[pf] = stats_count(self._ioctl, pf)
                read_stats(self._ioctl, pf, self._counts[pf])
            except OSError as exc:
                cost.errors += 1
                cost.last_error = f"{pf}: ETHTOOL_GSTATS: {os.strerror(exc.errno) if exc.errno else exc}"
                if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.EPERM, errno.ENODEV):
                    self._unsupported[pf] = cost.last_error
                self._counts.pop(pf, None)
                return None
            spent = time.perf_counter() - started
            cost.reads += 1
            cost.total_s += spent
            cost.max_s = max(cost.max_s, spent)
            self._last[pf] = now
            return now

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
