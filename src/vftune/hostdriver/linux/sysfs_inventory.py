"""PFs and VFs from sysfs: class/net/<if>/device -> PCI device -> sriov_* and virtfnN links.

Only the 82599 family (ixgbe) is managed; every other network device is listed as ignored
with the reason, so `vftune inventory` explains what it skipped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux import patched_attrs
from vftune.hostdriver.linux.sysfs_io import read_int
from vftune.itr import PF_DEVICE_IDS
from vftune.model import Ignored, PfInfo, VfInfo

INTEL_VENDOR = 0x8086

_VIRTFN = re.compile(r"virtfn([0-9]{1,6})$")


@dataclass(frozen=True)
class VfDevice:
    """Where to find one VF's data; read once per inventory, used on every tick."""

    pf: str
    index: int
    pci: str
    driver: str | None
    msi_irqs: tuple[int, ...]  # host IRQ numbers of its MSI-X vectors
    host_ifname: str | None  # set when ixgbevf drives it on the host


@dataclass(frozen=True)
class PfDevice:
    name: str
    pci: str
    device_dir: Path  # /sys/bus/pci/devices/<bdf>, resolved
    net_dir: Path  # /sys/class/net/<if>
    patched_itr: bool
    patched_rxmode: bool


@dataclass(frozen=True)
class SysfsScan:
    pfs: tuple[PfInfo, ...]
    ignored: tuple[Ignored, ...]
    pf_devices: dict[str, PfDevice]
    vf_devices: dict[str, VfDevice]  # by VF PCI address


def _link_name(path: Path) -> str | None:
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


def _irqs(device_dir: Path) -> tuple[int, ...]:
    try:
        # isdigit() alone takes "²" and other non-ASCII digits, which int() refuses.
        return tuple(sorted(int(n) for n in os.listdir(device_dir / "msi_irqs") if n.isascii() and n.isdigit()
                            and len(n) < 10))
    except OSError:
        return ()


def _first_netdev(device_dir: Path) -> str | None:
    try:
        names = sorted(os.listdir(device_dir / "net"))
    except OSError:
        return None
    return names[0] if names else None


def _scan_vfs(pf_name: str, device_dir: Path) -> list[VfDevice]:
    vfs = []
    for entry in os.listdir(device_dir):
        m = _VIRTFN.match(entry)
        if not m:
            continue
        vf_dir = device_dir / entry
        pci = _link_name(vf_dir)
        if pci is None:
            continue  # the link went away while we looked: VFs are being disabled
        vfs.append(VfDevice(
            pf=pf_name, index=int(m.group(1)), pci=pci, driver=_link_name(vf_dir / "driver"),
            msi_irqs=_irqs(vf_dir), host_ifname=_first_netdev(vf_dir),
        ))
    return sorted(vfs, key=lambda v: v.index)


def _classify(sysfs_root: Path, name: str) -> tuple[PfInfo, PfDevice, list[VfDevice]] | Ignored:
    net_dir = sysfs_root / "class" / "net" / name
    dev_link = net_dir / "device"
    if not dev_link.exists():
        return Ignored(name, "virtual device: no PCI device behind it")
    device_dir = Path(os.path.realpath(dev_link))
    pci = device_dir.name
    physfn = _link_name(device_dir / "physfn")
    if physfn is not None:
        return Ignored(name, f"SR-IOV VF {pci} of PF {physfn}")
    if not (device_dir / "sriov_totalvfs").exists():
        return Ignored(name, f"no SR-IOV: {pci} has no sriov_totalvfs")
    driver = _link_name(device_dir / "driver") or "none"
    vendor = read_int(device_dir / "vendor", 16)
    device = read_int(device_dir / "device", 16)
    if vendor != INTEL_VENDOR or device not in PF_DEVICE_IDS:
        return Ignored(name, f"not an Intel ixgbe-family PF (82599, X540, X550, X552, X553): {pci} is "
                             f"{vendor:04x}:{device:04x} driven by {driver}")
    vfs = _scan_vfs(name, device_dir)
    pf = PfInfo(
        name=name, pci=pci, device_id=device, driver=driver,
        num_vfs=read_int(device_dir / "sriov_numvfs"), total_vfs=read_int(device_dir / "sriov_totalvfs"),
        vfs=tuple(VfInfo(pf=name, index=v.index, pci=v.pci, driver=v.driver) for v in vfs),
    )
    dev = PfDevice(
        name=name, pci=pci, device_dir=device_dir, net_dir=net_dir,
        patched_itr=patched_attrs.is_patched_vf_itr(device_dir),
        patched_rxmode=patched_attrs.is_patched_rxmode(device_dir),
    )
    return pf, dev, vfs


def scan(sysfs_root: Path) -> SysfsScan:
    class_net = sysfs_root / "class" / "net"
    try:
        names = sorted(os.listdir(class_net))
    except OSError as exc:
        raise HostError(f"{class_net}: {os.strerror(exc.errno or 5)} (errno {exc.errno})") from None
    pfs: list[PfInfo] = []
    ignored: list[Ignored] = []
    pf_devices: dict[str, PfDevice] = {}
    vf_devices: dict[str, VfDevice] = {}
    for name in names:
        try:
            found = _classify(sysfs_root, name)
        except HostError as exc:
            ignored.append(Ignored(name, f"unreadable: {exc}"))
            continue
        except ValueError as exc:  # a link or file name no kernel writes: say which device
            ignored.append(Ignored(name, f"unreadable: {class_net / name}: {exc}"))
            continue
        except OSError as exc:
            ignored.append(Ignored(name, f"unreadable: {exc.filename}: {os.strerror(exc.errno or 5)} (errno {exc.errno})"))
            continue
        if isinstance(found, Ignored):
            ignored.append(found)
            continue
        pf, dev, vfs = found
        pfs.append(pf)
        pf_devices[name] = dev
        vf_devices.update((v.pci, v) for v in vfs)
    return SysfsScan(tuple(pfs), tuple(ignored), pf_devices, vf_devices)
