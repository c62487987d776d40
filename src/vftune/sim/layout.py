"""Names and PCI addresses as a real dual-port 82599 on bus 3 shows them.

The PFs are 0000:03:00.0 and 0000:03:00.1 (enp3s0f0, enp3s0f1). SR-IOV places VF n of a PF at
routing id PF + First VF Offset (0x80) + n * VF Stride (2), so PF0's VFs are 03:10.0, 03:10.2,
..., 03:11.0, ... and PF1's are 03:10.1, 03:10.3, ...
"""

from __future__ import annotations

BUS = 3
SRIOV_OFFSET = 0x80
SRIOV_STRIDE = 2
PF_DRIVER = "ixgbe"


def pf_name(pf: int) -> str:
    return f"enp{BUS}s0f{pf}"


def pf_pci(pf: int) -> str:
    return f"0000:{BUS:02x}:00.{pf}"


def vf_pci(pf: int, index: int) -> str:
    routing_id = (BUS << 8) + pf + SRIOV_OFFSET + index * SRIOV_STRIDE
    bus, devfn = routing_id >> 8, routing_id & 0xFF
    return f"0000:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}"
