"""Every path of the patched ixgbe's sysfs contract (vfdriver-patches/README.md), in one place.

All paths hang off the PF's PCI device directory (/sys/bus/pci/devices/<PF BDF>/).
Stock-kernel knobs used as the fallback live here too so that writers share one table.
"""

from __future__ import annotations

from pathlib import Path

SRIOV_DIR = "sriov"  # present only on a patched PF with VFs enabled
RXMODE_DIR = "rxmode"  # present only on a patched PF

# Intervals are rx-usecs: 1 unit = 1.024 us of hardware time; odd values round down to even.
VF_ITR_USECS = "itr_usecs"  # rw: 0 leave alone, 1 adaptive (within the bounds), 2..1022 fixed
# rw: bounds of the VF's adaptive interval, 0 = none, else 2..1022; 1 or out of range EINVAL,
# min above a non-zero max (or max below min) ERANGE: raise max before min, lower min before max.
VF_ITR_MIN_USECS = "itr_min_usecs"
VF_ITR_MAX_USECS = "itr_max_usecs"
# ro: what the VF last reported it runs with (1: its adaptive ITR; 0 before its first report).
# The VF fetches the host's values within ~2 s (250 ms for 10 s after a host write; the PF never
# sends them), so confirm with this, not the write.
VF_ITR_APPLIED_USECS = "itr_applied_usecs"
VF_ITR_CAPABLE = "itr_capable"  # ro: 1 once the VF fetched its values since its last reset
VF_CONFIRM_S = 2.0  # the VF's slow fetch period: the longest a write waits

ITR_LEAVE_ALONE = 0
ITR_ADAPTIVE = 1
ITR_BOUND_NONE = 0

RXMODE_MODE = "mode"  # rw: napi | de | hybrid
RXMODE_CLIFF_PPS = "cliff_pps"  # rw: 1..CLIFF_PPS_MAX
CLIFF_PPS_MAX = 100_000_000
RXMODE_EPSILON_PCT = "epsilon_pct"
RXMODE_POLL_LIMIT = "poll_limit"  # rw: 1..64
RXMODE_CURRENT = "current"  # ro: napi | de
RXMODE_RATE_PPS = "rate_pps"  # ro: the hybrid's estimate; 0 in napi and de
RXMODE_SWITCHES = "switches"  # ro
POLL_LIMIT_MAX = 64

# Stock kernel (no patch): per-netdev deferral and the global NAPI budget.
NAPI_DEFER_HARD_IRQS = "napi_defer_hard_irqs"  # under /sys/class/net/<if>/
GRO_FLUSH_TIMEOUT = "gro_flush_timeout"  # ns, under /sys/class/net/<if>/
NETDEV_BUDGET = "sys/net/core/netdev_budget"  # under the procfs root


def vf_dir(pf_device: Path, index: int) -> Path:
    return pf_device / SRIOV_DIR / str(index)


def vf_itr_usecs(pf_device: Path, index: int) -> Path:
    return vf_dir(pf_device, index) / VF_ITR_USECS


def vf_itr_min_usecs(pf_device: Path, index: int) -> Path:
    return vf_dir(pf_device, index) / VF_ITR_MIN_USECS


def vf_itr_max_usecs(pf_device: Path, index: int) -> Path:
    return vf_dir(pf_device, index) / VF_ITR_MAX_USECS


def vf_itr_applied_usecs(pf_device: Path, index: int) -> Path:
    return vf_dir(pf_device, index) / VF_ITR_APPLIED_USECS


def vf_itr_capable(pf_device: Path, index: int) -> Path:
    return vf_dir(pf_device, index) / VF_ITR_CAPABLE


def rxmode(pf_device: Path, name: str) -> Path:
    return pf_device / RXMODE_DIR / name


def is_patched_vf_itr(pf_device: Path) -> bool:
    return (pf_device / SRIOV_DIR).is_dir()


def is_patched_rxmode(pf_device: Path) -> bool:
    return (pf_device / RXMODE_DIR / RXMODE_MODE).is_file()
