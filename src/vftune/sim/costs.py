"""CPU cost per byte, packet and interrupt, and the host's hardware profile.

Costs (Geist et al., "Performance tuning of gigabit network interfaces"): system CPU
T = a*N_MB + b*N_KP + c*N_KI with, for TCP receive on a 1.6 GHz Pentium 4, a = 0.13,
b = 0.37, c = 1.43 jiffies (10 ms) per million bytes, thousand packets and thousand
interrupts. These three numbers are the simulator's only CPU calibration (the "calibration"
row of `vftune sim validate`). Another CPU does the same work in GEIST_CPU_GHZ / (ghz * ipc)
of the time, where `ipc` is the work per clock relative to the Pentium 4 (1.0 for the
NetBurst-era hosts of the 1 GbE papers; MODERN_IPC for a Haswell-or-later server core, an
assumption not fitted to any measurement).

Split of the per-packet cost (assumptions, documented, not fitted):
- GRO_STACK_SHARE of it is protocol work above the driver (IP/TCP receive, socket queueing) that
  GRO pays once per merged super-packet; the rest (descriptor, buffer, DMA unmap) is paid per
  wire packet. Receive aggregation cutting per-packet stack cost is Menon & Zwaenepoel,
  "Optimizing TCP receive performance" (USENIX ATC 2008); Linux's GRO merges up to 64 kB
  (GRO_MAX_SEGS full segments) per flow and poll.
- A UDP receiver makes one recvmsg() per datagram; a TCP bulk receiver reads large chunks. The
  call costs APP_CALL_PACKETS times the per-packet cost (syscall, socket dequeue, skb free).

Interrupts in a guest with a passed-through VF (Gordon et al., "ELI: bare-metal performance for
I/O virtualization", ASPLOS 2012: with SR-IOV the remaining overhead is interrupt delivery; the
data path runs at native speed): without posted interrupts each interrupt costs an external-
interrupt VM exit (the host's vfio handler forwards it through an irqfd) and an EOI exit,
EXITS_PER_INTERRUPT exits of EXIT_CYCLES each in the guest's time, plus HOST_IRQ_CYCLES of
host hardirq work. With posted interrupts the device's message goes straight to the running
vCPU: no exits, no host handler (and the host's vfio-msix counts stay frozen).
"""

from __future__ import annotations

from dataclasses import dataclass

JIFFY_S = 0.010
GEIST_A_JIFFIES_PER_MB = 0.13
GEIST_B_JIFFIES_PER_KP = 0.37
GEIST_C_JIFFIES_PER_KI = 1.43
GEIST_CPU_GHZ = 1.6
MODERN_IPC = 1.33  # Haswell-class core vs NetBurst per clock (assumption)
GRO_STACK_SHARE = 0.5
GRO_MAX_SEGS = 45  # 64 kB / 1448-byte segments
APP_CALL_PACKETS = 1.0
EXITS_PER_INTERRUPT = 2
EXIT_CYCLES = 3_000  # VM exit + handling + entry, a few thousand cycles on VT-x
HOST_IRQ_CYCLES = 4_000  # vfio_msihandler, eventfd signal, irqfd injection


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


def cpu_costs(cpu_ghz: float, ipc: float = MODERN_IPC) -> Costs:
    """Geist's costs on a CPU at `cpu_ghz` doing `ipc` times the P4's work per clock."""
    return GEIST_P4.scaled(GEIST_CPU_GHZ / (cpu_ghz * ipc))


def cycles_s(cycles: float, cpu_ghz: float) -> float:
    return cycles / (cpu_ghz * 1e9)


# The default simulated host: 2.6 GHz modern cores (0.46 ns/byte, 1.71 us/packet, 6.6 us/interrupt).
DEFAULT_GHZ = 2.6
HOST = cpu_costs(DEFAULT_GHZ)
