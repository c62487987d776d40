"""CPU cost per byte, packet and interrupt on the simulated CPU (Geist et al.'s model).

Geist et al. fit system CPU T = a*N_MB + b*N_KP + c*N_KI for TCP on a 1.6 GHz Pentium 4:
a = 0.13, b = 0.37, c = 1.43 jiffies (10 ms) per million bytes, thousand packets and thousand
interrupts. The simulated host is a modern ~3 GHz server core that does that work
CPU_SPEEDUP = 2.5 times faster (clock x 1.9, the rest from IPC); that gives 0.52 ns per byte,
1.48 us per packet and 5.72 us per interrupt on the host.

Inside a guest with a passed-through VF the same work costs GUEST_OVERHEAD = 1.3 times more:
every interrupt is a VM exit and an injection plus an EOI, and the data path walks nested page
tables. 1.3 is a calibration constant: with it and the paper-3vm window the 15000-byte 3-VM
curve peaks near Wu & Wang's 48,000 interrupts/s.

HOST_VF_IRQ_S is what the host pays to forward one passthrough MSI-X (vfio's handler, the
irqfd and the injection); it shows as host irq time.
"""

from __future__ import annotations

from dataclasses import dataclass

JIFFY_S = 0.010
GEIST_A_JIFFIES_PER_MB = 0.13
GEIST_B_JIFFIES_PER_KP = 0.37
GEIST_C_JIFFIES_PER_KI = 1.43
CPU_SPEEDUP = 2.5
GUEST_OVERHEAD = 1.3
HOST_VF_IRQ_S = 1.5e-6


@dataclass(frozen=True)
class Costs:
    per_byte_s: float
    per_packet_s: float
    per_interrupt_s: float

    def scaled(self, factor: float) -> Costs:
        return Costs(self.per_byte_s * factor, self.per_packet_s * factor, self.per_interrupt_s * factor)

    def seconds(self, n_bytes: float, n_packets: float, n_interrupts: float) -> float:
        return n_bytes * self.per_byte_s + n_packets * self.per_packet_s + n_interrupts * self.per_interrupt_s


GEIST_P4 = Costs(
    per_byte_s=GEIST_A_JIFFIES_PER_MB * JIFFY_S / 1e6,
    per_packet_s=GEIST_B_JIFFIES_PER_KP * JIFFY_S / 1e3,
    per_interrupt_s=GEIST_C_JIFFIES_PER_KI * JIFFY_S / 1e3,
)
HOST = GEIST_P4.scaled(1.0 / CPU_SPEEDUP)
GUEST = HOST.scaled(GUEST_OVERHEAD)
