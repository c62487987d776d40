"""The Linux host backend: sysfs, procfs, netlink, ethtool and libvirt. See host.LinuxHost.

LinuxHost is imported on first use: `vftune hook` reads domain XML with libvirt_guests and
must not pay for pyroute2 under libvirt's wait."""

from __future__ import annotations

from typing import Any

__all__ = ["LinuxHost"]


def __getattr__(name: str) -> Any:
    if name == "LinuxHost":
        from vftune.hostdriver.linux.host import LinuxHost

        return LinuxHost
    raise AttributeError(name)
