"""The Linux host backend: sysfs, procfs, netlink, ethtool and libvirt. See host.LinuxHost."""

from vftune.hostdriver.linux.host import LinuxHost

__all__ = ["LinuxHost"]
