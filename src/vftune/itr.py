"""Every Intel 82599 (ixgbe/ixgbevf) fact vftune relies on, in one place.

ITR is always interrupts per second in vftune; the register keeps an interval. EITR/VTEITR's
interval field (bits 11:3) counts 2.048 us steps, 1..511, so the rates the hardware delivers
are 1e6 / (steps * 2.048): 956..488281 interrupts/s (IXGBE_MIN_INT_RATE, IXGBE_MAX_INT_RATE).
`ethtool -C rx-usecs`: 0 = no throttling, 1 = the driver's adaptive ITR, 2..1022 = static;
the drivers store usecs << 2, so odd values round down to 2 us (one step).
"""

from __future__ import annotations

ITR_STEP_US = 2.048
ITR_MAX_STEPS = 511  # the 9-bit interval field
ITR_MIN_RATE = 956  # IXGBE_MIN_INT_RATE, 511 steps
ITR_MAX_RATE = 488281  # IXGBE_MAX_INT_RATE, 1 step
MAX_RX_USECS = 1022  # 511 steps of 2 us as rx-usecs
ITR_TOLERANCE = 0.05  # a read-back within 5% of the request is the request (whole steps)

# Reset traps on the PF (ixgbe keeps rx-usecs << 2; ixgbe_update_rsc, ixgbe_set_coalesce): a PF
# rx-usecs change across either threshold resets the port. vftune never writes the PF's rx-usecs
# (per-VF ITR and the rx mode need neither); anything that does must stay on one side of both.
RSC_MAX_USECS = 6  # IXGBE_MIN_RSC_ITR (24) >> 2: at or below, RSC is off (with LRO on)
WTHRESH_USECS = 10  # IXGBE_100K_ITR (40) >> 2: crossing it rewrites TXDCTL.WTHRESH

# The port: 10 Gb/s on the wire. Byte counters count the frame (Ethernet header + FCS, 18 B
# beyond the IP packet); on the wire each frame also takes 8 B preamble and a 12 B gap.
LINE_RATE_BPS = 10e9
FRAME_OVERHEAD_B = 18
WIRE_OVERHEAD_B = 20
MTU = 1500

MAX_VFS_PER_PF = 63  # with one traffic class (31 with 4 TCs, 15 with 8)
MSIX_PER_VF = 3  # two queue vectors (rx/tx pairs) and the mailbox

# Device ids from Debian's linux-source-6.1 (ixgbe_type.h; ixgbevf's defines.h, which vf.h
# includes): every PF ixgbe drives with SR-IOV, by MAC family. The 82598 has no SR-IOV and is
# left out. What vftune reads and writes is the same on all of them in that driver: EITR/VTEITR
# with the same interval field (IXGBE_MIN_INT_RATE 956, IXGBE_MAX_INT_RATE 488281, 2.048-us steps),
# the VF mailbox, per-VF counters copied by ixgbe_update_stats for every MAC type
# (PVFGPRC/PVFGPTC/PVFGORC/PVFGOTC/PVFMPRC), and at most 63 VFs a port (IXGBE_MAX_VFS_DRV_LIMIT).
PF_FAMILIES: dict[int, str] = {
    **dict.fromkeys((0x10FB, 0x10F7, 0x10F8, 0x10F9, 0x10FC, 0x1507, 0x1514, 0x1517, 0x151C, 0x1529,
                     0x152A, 0x154A, 0x154D, 0x154F, 0x1557, 0x1558), "82599"),
    **dict.fromkeys((0x1528, 0x1560), "X540"),
    **dict.fromkeys((0x1563, 0x15D1), "X550"),
    **dict.fromkeys((0x15AA, 0x15AB, 0x15AC, 0x15AD, 0x15AE, 0x15B0), "X552"),  # X550EM_x
    **dict.fromkeys((0x15C2, 0x15C3, 0x15C4, 0x15C6, 0x15C7, 0x15C8, 0x15CE, 0x15E4, 0x15E5), "X553"),  # X550EM_a
}
PF_DEVICE_IDS = frozenset(PF_FAMILIES)
# Their VFs (ixgbevf), and the same under Hyper-V.
VF_FAMILIES: dict[int, str] = {0x10ED: "82599", 0x152E: "82599", 0x1515: "X540", 0x1530: "X540",
                               0x1565: "X550", 0x1564: "X550", 0x15A8: "X552", 0x15A9: "X552", 0x15C5: "X553"}
VF_DEVICE_IDS = frozenset(VF_FAMILIES)
PF_DEVICE_ID_SFP = 0x10FB  # 82599 SFP+, the common card


def itr_steps(itr: float) -> int:
    """EITR interval steps (2.048 us each, 1..511) whose rate is nearest to `itr`."""
    return max(1, min(ITR_MAX_STEPS, round(1_000_000 / (itr * ITR_STEP_US))))


def steps_to_itr(steps: int) -> int:
    """The rate (interrupts/s) of a whole number of interval steps."""
    return int(round(1_000_000 / (steps * ITR_STEP_US)))


def quantize_itr(itr: float) -> int:
    """The rate the 82599 really delivers for a request: whole 2.048 us interval steps."""
    return steps_to_itr(itr_steps(itr))


def quantize_units(itr: float, unit_us: float, itr_min: int) -> int:
    """The rate a NIC whose interval counts `unit_us` units delivers for a request: whole
    units, from one up to the longest interval (the rate itr_min). quantize_itr is the 82599's."""
    longest = max(1, round(1e6 / (itr_min * unit_us)))
    units = max(1, min(longest, round(1e6 / (itr * unit_us))))
    return int(round(1e6 / (units * unit_us)))


def itr_to_usecs(itr: int) -> int:
    """Interrupts/s to the drivers' rx-usecs (even, 2..1022) that deliver the nearest rate.

    ixgbe/ixgbevf store usecs << 2 and the 82599 keeps bits 11:3 of that, i.e. usecs / 2 steps
    of 2.048 us: 48 us is 24 steps, 49.15 us, 20345/s. 0 stays 0 (adaptive is the caller's).
    """
    return 0 if itr <= 0 else 2 * itr_steps(itr)


def usecs_to_itr(usecs: int) -> int:
    """The rate the 82599 delivers for an rx-usecs setting; 0 and 1 (off, adaptive) give 0."""
    if usecs <= 1:
        return 0
    return steps_to_itr(max(1, min(ITR_MAX_STEPS, usecs // 2)))


def itr_bounds_to_usecs(min_itr: int, max_itr: int) -> tuple[int, int]:
    """Rate bounds (interrupts/s, 0 = open) to interval bounds (rx-usecs min, max; 0 = open).

    The one place the bounds change direction: the lowest rate is the longest interval."""
    return (itr_to_usecs(max_itr) if max_itr > 0 else 0, itr_to_usecs(min_itr) if min_itr > 0 else 0)


def usecs_bounds_to_itr(min_usecs: int, max_usecs: int) -> tuple[int, int]:
    """Interval bounds read back (rx-usecs, 0 = open) as rate bounds (min, max interrupts/s)."""
    return (usecs_to_itr(max_usecs) if max_usecs > 1 else 0, usecs_to_itr(min_usecs) if min_usecs > 1 else 0)


def same_itr(a: int, b: int) -> bool:
    """Whether a read-back ITR is the one asked for (the hardware rounds to whole steps)."""
    if a <= 0 or b <= 0:
        return a == b
    return abs(a - b) <= ITR_TOLERANCE * max(a, b)


def itr_label(itr: int, unit: str = "/s") -> str:
    """How an ITR reads to an operator: 0 is the VF's own adaptive ITR."""
    return "adaptive" if itr == 0 else f"{itr}{unit}"


def frame_bytes(ip_bytes: float) -> float:
    """What the NIC's byte counters count for one packet (header + FCS included)."""
    return ip_bytes + FRAME_OVERHEAD_B


def wire_bytes(ip_bytes: float) -> float:
    """What one packet occupies on the wire."""
    return ip_bytes + FRAME_OVERHEAD_B + WIRE_OVERHEAD_B

