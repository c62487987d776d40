"""Names and PCI addresses as real dual-port 82599s show them.

The first NIC's PFs are 0000:03:00.0 and 0000:03:00.1 (enp3s0f0, enp3s0f1). SR-IOV places VF n
of a PF at routing id PF + First VF Offset (0x80) + n * VF Stride (2), so PF0's VFs are
03:10.0, 03:10.2, ..., 03:11.0, ... and PF1's are 03:10.1, 03:10.3, ... A host with more than
two ports has more than one NIC: ports 2 and 3 are the second NIC's, on the next bus (04:00.0,
enp4s0f0, its VFs 04:10.0, ...), and so on; every VF keeps an address of its own.
"""

from __future__ import annotations

BUS = 3
PORTS_PER_NIC = 2  # the 82599 is a dual-port part
SRIOV_OFFSET = 0x80
SRIOV_STRIDE = 2
PF_DRIVER = "ixgbe"


def _place(pf: int) -> tuple[int, int]:
    """(bus, function) of port `pf`: its NIC's bus and its function on that NIC."""
    return BUS + pf // PORTS_PER_NIC, pf % PORTS_PER_NIC


def pf_name(pf: int) -> str:
    bus, function = _place(pf)
    return f"enp{bus}s0f{function}"


def pf_pci(pf: int) -> str:
    bus, function = _place(pf)
    return f"0000:{bus:02x}:00.{function}"


def vf_pci(pf: int, index: int) -> str:
    bus, function = _place(pf)
    routing_id = (bus << 8) + function + SRIOV_OFFSET + index * SRIOV_STRIDE
    bus, devfn = routing_id >> 8, routing_id & 0xFF
    return f"0000:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}"
