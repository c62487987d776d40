"""What runs on the simulated host: per-VF workloads, host traffic, and the host's layout.

Plain frozen data; the fluid model (model.py) turns it into rates, scenarios.py builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vftune.itr import MAX_VFS_PER_PF, MTU


@dataclass(frozen=True)
class Stream:
    """Bulk receive into the guest (netperf-like): bounded by window/RTT when acknowledged."""

    packet_bytes: int = MTU  # IP packet size; large messages travel as MTU-sized segments
    offered_bps: float | None = None  # IP-level bits/s the sender offers; None = as fast as it can
    acked: bool = True  # TCP: window-limited and self-clocked; False: UDP, arrivals ignore the receiver
    window_bytes: float | None = None  # pinned receive window; None = autotuned to tcp_rmem's max
    rtt_s: float = 60e-6  # round trip without coalescing delay
    ramp: Ramp | None = None  # the offered rate moves linearly over the phase
    kind: str = "stream"


@dataclass(frozen=True)
class Ramp:
    """An offered rate that moves linearly from the workload's offered_bps to `to_bps` over the
    `seconds` from `start_s` (the phase's start within the cycle), then holds: a diurnal curve
    without 120 phase tables."""

    to_bps: float
    start_s: float
    seconds: float

    def factor(self, offered_bps: float, t_in_cycle: float) -> float:
        """The offered rate at this time over the phase's starting rate."""
        since = t_in_cycle - self.start_s
        frac = min(1.0, max(0.0, since / self.seconds)) if self.seconds > 0 else 1.0
        return (offered_bps + (self.to_bps - offered_bps) * frac) / offered_bps


@dataclass(frozen=True)
class Transmit:
    """Bulk TCP sent by the guest (video, CDN, backups out): the VF receives only ACKs.

    Scored on what the guest's application sends. The sender's window is autotuned (tcp_wmem)
    unless pinned; ACKs and transmit completions reach the sender at its interrupts."""

    packet_bytes: int = MTU
    offered_bps: float | None = None  # what the application would send; None = as fast as it can
    window_bytes: float | None = None  # pinned send window; None = autotuned
    rtt_s: float = 60e-6
    ramp: Ramp | None = None
    kind: str = "tcp_tx"


@dataclass(frozen=True)
class Poll:
    """A poll-mode driver in the guest (DPDK): a busy-polling core takes packets off the ring
    with its interrupts off, so the VF raises (almost) no interrupts and its ITR changes nothing."""

    packet_bytes: int = MTU
    offered_bps: float | None = None  # None = line rate
    ramp: Ramp | None = None
    kind: str = "poll"


@dataclass(frozen=True)
class RequestResponse:
    """Transactions served in the guest: a request comes in, the response goes out."""

    request_bytes: int = 200
    response_bytes: int = 1_000
    concurrency: int = 4  # transactions in flight
    rtt_s: float = 40e-6  # network and client time per transaction
    service_s: float = 8e-6  # guest CPU per transaction for the application itself
    mtu: int = MTU  # messages larger than a packet travel as several
    kind: str = "rr"


@dataclass(frozen=True)
class Idle:
    """A VF that only sees background chatter (ARP, keepalives)."""

    pps: float = 4.0
    packet_bytes: int = 90
    kind: str = "idle"


Workload = Stream | RequestResponse | Idle | Transmit | Poll


@dataclass(frozen=True)
class HostTraffic:
    """Traffic the host itself receives on a PF's own queues (storage, migration)."""

    pps: float = 0.0
    packet_bytes: int = MTU
    app_packet_s: float = 2.0e-6  # host application CPU per packet (consumer of the data)
    constant_rate: bool = False  # evenly spaced packets (a generator); False: Poisson arrivals


@dataclass(frozen=True)
class Vm:
    name: str
    uuid: str
    vcpus: int = 2
    memory_mb: int = 512
    background_cpu: float = 0.02  # CPU seconds per second the guest uses without network work
    # CPU seconds per second the guest's own application wants beside its network work; the
    # receive path's interrupts and softirqs run first, the application gets what is left.
    app_cpu: float = 0.0


@dataclass(frozen=True)
class VfSlot:
    """One VF: which PF, which guest (None = unassigned), and its workload in each phase."""

    pf: int  # PF ordinal (0 -> enp3s0f0)
    index: int  # VF number on that PF
    guest: str | None
    workloads: tuple[Workload, ...]  # one per phase; a single entry holds for all phases
    queues: int = 1  # RSS: receive queues, each with its own vector and vCPU
    incast_group: int | None = None  # VFs of one group burst together
    guest_agent: bool | None = None  # None: the host's [host] guest_agent


@dataclass(frozen=True)
class Phase:
    start_s: float
    label: str = ""


@dataclass(frozen=True)
class HostSpec:
    """One built scenario instance: the host, its guests, VFs and phases."""

    name: str
    host_cpus: int
    vms: tuple[Vm, ...]
    vfs: tuple[VfSlot, ...]
    num_pfs: int = 2
    phases: tuple[Phase, ...] = (Phase(0.0),)
    cycle_s: float | None = None  # phases repeat with this period; None = last phase holds
    host_traffic: tuple[tuple[HostTraffic, ...], ...] = ()  # per PF, one per phase
    patched_counters: bool = False
    noise_sigma: float = 0.03  # per-second log-normal jitter of capacity and offered load
    burst_gain: float = 1.5  # offered-load factor while a VF is in a burst
    # Microbursts: the offered load arrives in bursts this long at this many times its mean
    # rate, silent between them (0 = smooth arrivals).
    microburst_s: float = 0.0
    microburst_gain: float = 1.0
    # The guests' vCPUs are overcommitted on the host's cores: a vCPU woken for a request may
    # wait in the host's run queue when the busy vCPUs exceed the cores.
    overcommit: bool = False
    description: str = ""
    duration_s: float | None = None  # the bench's run length for this scenario (None: its default)
    cpu_ghz: float = 2.6
    nic: str = "82599"  # "82599" (10 GbE, EITR throttle) or "pro1000" (1 GbE, absolute delay)
    irq_time_accounting: bool = True  # False: the host's hardirq time reads ~0 (Debian 6.1)
    posted_interrupts: bool = False  # True: no VM exits per interrupt, vfio-msix counts frozen
    tcp_rmem_max: int = 6_291_456  # net.ipv4.tcp_rmem's maximum in the guests
    guest_agent: bool = True  # guests run the QEMU guest agent: their socket drops are visible
    # The patched ixgbevf fetches the host's ITR request from its watchdog, at least this often
    # (vfdriver-patches/README.md): a host write is in force 0..this many seconds later. 0: at once.
    vf_itr_fetch_s: float = 2.0
    # While the host wrote a VF's values within vf_itr_busy_s, the PF's reply to the VF's fetch
    # says so and the VF fetches again after vf_itr_fetch_busy_s (0: never faster).
    vf_itr_fetch_busy_s: float = 0.25
    vf_itr_busy_s: float = 10.0
    vm_by_name: dict[str, Vm] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vm_by_name", {vm.name: vm for vm in self.vms})
        for pf in range(self.num_pfs):
            n = sum(1 for vf in self.vfs if vf.pf == pf)
            if n > MAX_VFS_PER_PF:
                raise ValueError(f"scenario {self.name}: {n} VFs on PF {pf}, an 82599 port has at most 63")
        for vf in self.vfs:
            if vf.guest is not None and vf.guest not in self.vm_by_name:
                raise ValueError(f"scenario {self.name}: VF {vf.pf}/{vf.index} names unknown guest {vf.guest!r}")

    def guest_has_agent(self, guest: str) -> bool:
        """Whether a guest runs the QEMU guest agent: its VFs' own setting, else the host's."""
        for vf in self.vfs:
            if vf.guest == guest and vf.guest_agent is not None:
                return vf.guest_agent
        return self.guest_agent

    def phase_index(self, t: float) -> int:
        if self.cycle_s:
            t = t % self.cycle_s
        index = 0
        for i, phase in enumerate(self.phases):
            if t >= phase.start_s:
                index = i
        return index

    def phase_bounds(self, index: int) -> tuple[float, float | None]:
        """Start and end of a phase within the first cycle (end None = open)."""
        start = self.phases[index].start_s
        if index + 1 < len(self.phases):
            return start, self.phases[index + 1].start_s
        return start, self.cycle_s

    def workload(self, vf: VfSlot, phase: int) -> Workload:
        return vf.workloads[min(phase, len(vf.workloads) - 1)]

    def host_load(self, pf: int, phase: int) -> HostTraffic:
        if pf >= len(self.host_traffic) or not self.host_traffic[pf]:
            return HostTraffic()
        per_phase = self.host_traffic[pf]
        return per_phase[min(phase, len(per_phase) - 1)]
