"""PF interrupt coalescing through the ethtool ioctl (pyroute2's Ethtool get/set_coalesce).

Only rx_coalesce_usecs is touched: ixgbe declares just the usecs parameters as supported,
and the ethtool core answers EOPNOTSUPP to any other non-zero field. For ixgbe 1 means
adaptive, 0 no throttling, larger values a fixed interval.
"""

from __future__ import annotations

import errno
import os
from typing import Any

from vftune.hostdriver.base import HostError


def _failure(ifname: str, op: str, code: int) -> HostError:
    return HostError(f"{ifname}: ethtool {op}: {os.strerror(code)} (errno {code})")


class CoalesceIO:
    """Opens pyroute2's Ethtool on first use; `ethtool` may be one made inside a netns."""

    def __init__(self, ethtool: Any = None) -> None:
        self._ethtool = ethtool

    def _tool(self) -> Any:
        if self._ethtool is None:
            from pyroute2.ethtool import Ethtool

            self._ethtool = Ethtool()
        return self._ethtool

    def _call(self, ifname: str, op: str, fn: Any, *args: Any) -> Any:
        from pyroute2.ethtool.ioctl import NoSuchDevice, NotSupportedError

        try:
            return fn(ifname, *args)
        except NotSupportedError:
            raise _failure(ifname, op, errno.EOPNOTSUPP) from None
        except NoSuchDevice:
            raise _failure(ifname, op, errno.ENODEV) from None
        except OSError as exc:
            raise _failure(ifname, op, exc.errno or errno.EIO) from None

    def get_rx_usecs(self, ifname: str) -> int:
        c = self._call(ifname, "get_coalesce", self._tool().get_coalesce)
        return int(c["rx_coalesce_usecs"])

    def set_rx_usecs(self, ifname: str, usecs: int) -> int:
        """Write and read back what the driver kept (ixgbe rounds odd values down)."""
        self._call(ifname, "set_coalesce", self._tool().set_coalesce, {"rx_coalesce_usecs": usecs})
        return self.get_rx_usecs(ifname)

    def close(self) -> None:
        if self._ethtool is not None and hasattr(self._ethtool, "close"):
            self._ethtool.close()
        self._ethtool = None
