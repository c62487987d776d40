"""The records that cross layers: inventory, counters, samples, decisions, write outcomes.

hostdriver produces Inventory, Snapshot and Applied; the agent turns snapshots into samples
and its policies into decisions; store and api read all of them. Everything here is a frozen
value and imports nothing from vftune but the 82599's units, so any layer may depend on it.
Units: ITR in interrupts/s (0 = the VF's own adaptive ITR), rates per second, bits for bps,
times in seconds on the host's clock (store: Unix seconds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar

from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE, ITR_STEP_US, quantize_units

T = TypeVar("T")


def maker(cls: type[T]) -> Callable[[Sequence[Any]], T]:
    """A fast constructor of a frozen dataclass from every field's value in order: the same
    object as cls(*values), built without the frozen __init__'s object.__setattr__ per field
    (a VfSample: ~1.0 us against ~2.2 us; one per VF per tick). A dataclass without
    __post_init__ or slots only; fewer values than fields go through cls(*values)."""
    names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    assert not hasattr(cls, "__post_init__") and not hasattr(cls, "__slots__"), cls
    new, count = object.__new__, len(names)

    def make(values: Sequence[Any]) -> T:
        if len(values) != count:
            return cls(*values)
        made = new(cls)
        made.__dict__.update(zip(names, values))
        return made

    return make


RxMode = Literal["napi", "de", "hybrid"]
RX_MODES: tuple[str, ...] = ("napi", "de", "hybrid")
# A setting's value as a host reports it: a rate or usecs (int), a mode or sysfs text (str).
SettingValue = int | str | None


@dataclass(frozen=True)
class Guest:
    name: str
    uuid: str
    pid: int | None = None


ActuatorKind = Literal["patched", "guest-agent", "none"]


@dataclass(frozen=True)
class VfActuator:
    """How a VF's ITR reaches it: the patched PF's sysfs, the guest's ethtool through its
    guest agent, or nothing (then it is observed only); reason says why, in one line."""

    actuator: ActuatorKind
    reason: str


# Whether a VF's guest socket drops (VfView.rx_dropped_pps) are known, in one word:
# guest-agent: counts arrive through its guest's agent; pending: not read twice yet (a rate needs
# two reads); unavailable: the agent is missing, times out, blocks guest-file-* or no transport
# reaches it (the reason says which, and when it is tried again); shared: its guest holds other VFs
# too, and a guest's drops cannot be split between them; no-guest: no running guest holds the VF;
# off: not read (--guest-rx-drops off, or a backend that cannot).
DropsSource = Literal["guest-agent", "pending", "unavailable", "shared", "no-guest", "off"]
DROPS_SOURCES: tuple[str, ...] = ("guest-agent", "pending", "unavailable", "shared", "no-guest", "off")


@dataclass(frozen=True)
class VfDrops:
    """Where a VF's guest socket drops come from (DropsSource) and why, in one line."""

    source: DropsSource
    reason: str


@dataclass(frozen=True)
class VfInfo:
    pf: str  # PF network interface name
    index: int  # VF number on its PF (virtfnN)
    pci: str  # VF PCI address, 0000:03:10.0
    driver: str | None  # vfio-pci, ixgbevf or None when unbound
    guest: Guest | None = None
    mac: str | None = None  # the PF's IFLA_VF_MAC for it, aa:bb:cc:dd:ee:ff; None when unknown


@dataclass(frozen=True)
class PfInfo:
    name: str
    pci: str
    device_id: int
    driver: str
    num_vfs: int
    total_vfs: int
    vfs: tuple[VfInfo, ...] = ()


@dataclass(frozen=True)
class Ignored:
    name: str
    reason: str


@dataclass(frozen=True)
class Inventory:
    pfs: tuple[PfInfo, ...]
    ignored: tuple[Ignored, ...] = ()

    def vfs(self) -> list[VfInfo]:
        return [vf for pf in self.pfs for vf in pf.vfs]

    def vf(self, pci: str) -> VfInfo | None:
        return next((vf for vf in self.vfs() if vf.pci == pci), None)


@dataclass(frozen=True)
class VfCounters:
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int
    # Cumulative interrupts of the VF's vectors as the host sees them; None when unknown.
    interrupts: int | None
    # When the packet/byte counters were last refreshed (unpatched ixgbe: every 2 s).
    counters_time: float
    # True when the counters did not change since the previous snapshot although
    # the refresh period says they should have been copied again.
    stale: bool = False
    # True when packets move but host interrupt counts do not (posted interrupts).
    interrupts_frozen: bool = False
    mac: str | None = None  # IFLA_VF_MAC as the PF reports it now


make_vf_counters = maker(VfCounters)


# A Linux guest counts CPU time in USER_HZ ticks (100 a second); qemu-ga reports whole ticks as
# milliseconds, so any reading is a multiple of this.
GUEST_CLOCK_TICK_S = 0.01


@dataclass(frozen=True)
class GuestCpuTimes:
    """A guest's own CPU accounting, cumulative seconds summed over its vCPUs: its kernel's
    /proc/stat as QEMU's guest agent reports it (guest-get-cpustats). The host sees a vCPU
    thread busy; only the guest can say whether that time went to its applications or to its
    interrupt handlers and network stack."""

    user: float  # user + nice: its processes
    system: float
    interrupts: float  # irq + softirq: handlers and the receive path they run
    idle: float  # idle + iowait
    steal: float  # runnable while the host ran something else

    @property
    def total(self) -> float:
        return self.user + self.system + self.interrupts + self.idle + self.steal


@dataclass(frozen=True)
class PfCounters:
    rx_packets: int
    rx_bytes: int
    # Read from the patched driver when present: the mode in force and its estimate.
    current_mode: str | None = None
    rate_pps: int | None = None
    switches: int | None = None


@dataclass(frozen=True)
class Snapshot:
    time: float
    vfs: Mapping[str, VfCounters]  # by VF PCI address
    pfs: Mapping[str, PfCounters]  # by PF name
    guest_cpu: Mapping[str, float]  # cumulative CPU seconds by guest name
    host_irq_cpu: float  # cumulative irq + softirq seconds over all host CPUs
    host_cpus: int = 1
    errors: tuple[str, ...] = ()  # one line per source that could not be read
    # Cumulative datagrams each guest's sockets dropped on receive (UDP and UDP-Lite over IPv4 and
    # IPv6: RcvbufErrors in the guest's /proc/net/snmp and snmp6), by guest name, as its guest
    # agent reports them. The VF counters count what the guest took off the ring; these packets
    # never reached an application. A guest missing here: unknown (no agent, or not read).
    guest_rx_drops: Mapping[str, int] = field(default_factory=dict)
    # When each of those counts was read (this snapshot's clock; a guest missing: at `time`). An
    # agent is read off the tick, so a count may be older than the snapshot or unchanged since.
    guest_rx_drops_time: Mapping[str, float] = field(default_factory=dict)
    # Each guest's own CPU accounting, read with its socket drops (at guest_rx_drops_time's
    # time); a guest missing here: unknown (no agent, one without guest-get-cpustats, not read).
    guest_cpu_times: Mapping[str, GuestCpuTimes] = field(default_factory=dict)


@dataclass(frozen=True)
class Capabilities:
    """What a host can read and set: the agent and its policies adapt to it."""

    backend: str
    itr_min: int = ITR_MIN_RATE  # interrupts/s the tuner may ask for
    itr_max: int = ITR_MAX_RATE
    vf_itr: bool = False  # can the host push a VF's ITR
    vf_itr_bounds: bool = False  # can it bound a VF's own adaptive ITR
    rx_modes: tuple[str, ...] = ("napi",)  # modes the PF can switch to
    napi_budget: bool = False
    counter_refresh_s: float = 2.0  # how old a VF counter may be
    missing: tuple[str, ...] = ()  # why a capability is absent, one line each
    vf_itr_unsupported_pfs: tuple[str, ...] = ()  # PFs whose VFs' ITR cannot be set (stock driver)
    # One unit of the NIC's interval register (the 82599's EITR step): the rates it delivers are
    # 1e6 / (units * this), up to the interval of itr_min.
    itr_unit_us: float = ITR_STEP_US

    def quantize(self, itr: float) -> int:
        """The rate this host's NIC delivers for a request (whole interval units)."""
        return quantize_units(itr, self.itr_unit_us, self.itr_min)

    @property
    def longest_interval_us(self) -> float:
        """The NIC's longest interrupt interval: that of its lowest rate."""
        return 1e6 / self.itr_min


@dataclass(frozen=True)
class Applied:
    """The outcome of one actuator call, read back from the host."""

    target: str  # VF PCI address or PF name
    setting: str  # "itr", "rx_mode", or the sysfs file a restore wrote
    requested: SettingValue
    old: SettingValue
    applied: SettingValue  # what a read-back shows now
    ok: bool = True
    error: str | None = None
    # Accepted but not done yet: the outcome comes later from HostDriver.collect_applied().
    pending: bool = False


@dataclass(frozen=True)
class VfSample:
    """One VF over one interval [t - dt, t]."""

    pci: str
    pf: str
    t: float
    dt: float
    rx_pps: float
    rx_bps: float  # bits/s delivered to the VF
    tx_pps: float
    tx_bps: float
    interrupts_per_s: float | None  # None when the host cannot see them (posted interrupts)
    interrupts: int | None  # interrupts in this interval
    itr: int  # interrupts/s set now; 0 = the VF's own adaptive ITR
    guest_cpu: float | None  # CPU seconds per second of the owning guest
    fresh: bool = True  # counters were refreshed inside this interval
    # The VF's port (its PF) over the same interval, as the agent sees it; None when unknown.
    port_rx_bps: float | None = None  # received bits/s counted on the port: its VFs' plus the PF's own
    port_rx_capacity_bps: float | None = None  # the same counters at line rate, for the port's mean frame size
    port_rx_share_bps: float | None = None  # this VF's max-min fair share of the port's rx (sampling.port_view)
    # Datagrams/s the owning guest's sockets dropped on receive (Snapshot.guest_rx_drops), when the
    # guest's agent reports them and this is the guest's only VF (else they are not this VF's).
    rx_dropped_pps: float | None = None
    # An ITR the host accepted for this VF that is not in force yet (itr is still the old one):
    # a measurement window must not count this interval as either.
    itr_pending: int | None = None
    # Bits/s (rx + tx) of all the owning guest's VFs together when it owns several, whose CPU
    # guest_cpu covers; None when this VF is the guest's only one (its own throughput_bps).
    guest_bps: float | None = None
    # On a guest with several VFs: its socket drops (datagrams/s) shared out by the VFs' received
    # packets, as a measurement window counts them; rx_dropped_pps stays None (not this VF's own).
    rx_dropped_share_pps: float | None = None
    # The owning guest's own accounting (Snapshot.guest_cpu_times) between its two latest reads,
    # CPU seconds per second over all its vCPUs: in interrupt and softirq handling, and in its
    # processes. None when its agent does not report it. Guest-wide, like guest_cpu.
    guest_irq_cpu: float | None = None
    guest_user_cpu: float | None = None
    guest_idle_cpu: float | None = None  # idle + iowait, from the same reads

    @property
    def throughput_bps(self) -> float:
        return self.rx_bps + self.tx_bps


make_vf_sample = maker(VfSample)


@dataclass(frozen=True)
class PfSample:
    pf: str
    t: float
    dt: float
    rx_pps: float
    rx_bps: float
    mode: str  # mode in force now
    switches: int | None = None  # DE/NAPI switches the driver counted (patched driver), None: not shown


@dataclass(frozen=True)
class ItrDecision:
    itr: int  # interrupts/s; 0 = hand back to the VF's adaptive ITR
    reason: str  # rendered for operators; a tuner's starts with its cause
    cause: str | None = None  # the policy's cause (vftune.control.causes.Cause value), when it has one


@dataclass(frozen=True)
class ModeDecision:
    mode: str  # "napi" | "de" | "hybrid"
    napi_budget: int | None
    reason: str
    cliff_pps: float | None = None  # "hybrid": where the driver switches
    epsilon: float | None = None


@dataclass(frozen=True)
class Decision:
    """One setting the agent changed (or tried to), as the store keeps it."""

    t: float  # Unix seconds
    target: str
    setting: str
    old: SettingValue
    requested: SettingValue
    applied: SettingValue
    ok: bool
    reason: str
    error: str | None = None
    cause: str | None = None  # the policy's cause; the store keeps it as the reason's first word


MeritKind = Literal["throughput", "response time"]


@dataclass(frozen=True)
class VsAdaptive:
    """What one VF's set rate bought against its own adaptive ITR, from the tuner's measured
    windows of the same load shape at each (agent/value.py): merit_change is the change of its
    merit (throughput; for request/response loads the transaction rate, whose inverse is the
    response time), + is better; cpu_per_gbit_change the change of CPU per Gb, + is costlier;
    cpu_change_cores that change at the VF's current throughput (CPU s/s, + spent); age_s the
    age of the older of the two measurements."""

    merit: MeritKind
    merit_change: float
    cpu_per_gbit_change: float
    cpu_change_cores: float
    age_s: float

    @property
    def response_time_change(self) -> float:
        """For a request/response load: the response time's change (- is better)."""
        return 1.0 / (1.0 + self.merit_change) - 1.0 if self.merit_change > -1.0 else math.inf


@dataclass(frozen=True)
class HostVsAdaptive:
    """The host's VFs under a set rate together: how many, their throughput-weighted merit
    change, the CPU they spend (+) or save (-) against their adaptive ITRs, and the line that
    says it (e.g. "+12% throughput on 5 VFs, -8% response time on 3, for 0.40 CPU")."""

    vfs: int
    merit_change: float | None
    cpu_change_cores: float
    text: str


@dataclass(frozen=True)
class VfView:
    """One VF as the API, the metrics and `vftune status` show it, taken in one read of the agent."""

    pci: str
    pf: str
    index: int
    driver: str | None
    guest: str | None
    guest_uuid: str | None
    itr: int  # what the agent set (read back); 0 = the VF's own adaptive ITR
    policy: str
    phase: str | None  # the policy's phase, when it has one
    rx_pps: float | None  # None until a sample exists
    rx_bps: float | None
    tx_pps: float | None
    tx_bps: float | None
    interrupts_per_s: float | None
    guest_cpu: float | None
    fresh: bool | None
    updated: float | None  # Unix seconds of the latest sample
    last_decision: str | None
    policy_state: Mapping[str, object]
    # Added for operators: the VF's phase in one word (VF_STATES), its objective and the
    # config rule that decided them (None = no rule matched).
    state: str = "adaptive"
    objective: str = "balanced"
    margin: float | None = None  # the share of the VF's best given up; None: the objective's own
    rule: str | None = None
    # Counted since the agent started, in base units (VF_TOTALS), for Prometheus counters.
    totals: Mapping[str, float] = field(default_factory=dict)
    actuator: ActuatorKind = "none"  # how its ITR is set: "patched", "guest-agent" or "none"
    actuator_reason: str = ""
    rx_dropped_pps: float | None = None  # its guest's socket receive drops (VfSample's), when known
    # Whether rx_dropped_pps is known (DropsSource: "guest-agent" exactly when it is) and why not.
    rx_dropped_source: DropsSource = "off"
    rx_dropped_reason: str = ""
    # A rate the host accepted that the VF has not taken yet (itr is the one in force), or None.
    itr_pending: int | None = None
    # What its set rate bought against its adaptive ITR; None while it runs the adaptive ITR,
    # searches, or either side is not measured yet.
    vs_adaptive: VsAdaptive | None = None
    # Its guest's own accounting (VfSample's): interrupt and softirq, and process CPU s/s.
    guest_irq_cpu: float | None = None
    guest_user_cpu: float | None = None


VF_TOTALS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "interrupts")

# converged: holds a searched ITR; searching: a search runs; adaptive: the VF's own adaptive ITR;
# excluded: a config rule keeps the agent off it; pinned: a fixed ITR (rule or --policy fixed).
VF_STATES = ("converged", "searching", "adaptive", "excluded", "pinned")


@dataclass(frozen=True)
class PfView:
    """One PF as the API shows it: inventory, the mode in force and its controller."""

    name: str
    pci: str
    device_id: int
    driver: str
    num_vfs: int
    total_vfs: int
    mode: str
    napi_budget: int | None
    controller: str
    controller_state: Mapping[str, object]
    rx_pps: float | None
    rx_bps: float | None
    last_decision: str | None
    # Added for operators: what the port runs at this moment ("de" or "napi" even when `mode` is
    # "hybrid", as the driver reports it) and how often it switched between them.
    mode_now: str | None = None
    switches: int | None = None


# Upper bounds (seconds) of the tick duration histogram: a tick reads every VF's counters,
# so a large host or a slow sysfs shows here first.
TICK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True)
class TickTimes:
    """How long the agent's ticks took: counts per TICK_BUCKETS bound (not cumulative; the last
    entry counts the ticks above every bound), their sum and their number."""

    counts: tuple[int, ...]
    sum_s: float
    count: int


def decision_cause(reason: str) -> str:
    """A decision's cause in one word, for a metric label: the first word of its reason when it
    is one of the known ones ("probe", "converged", "pinned", ...), else "other"."""
    word = reason.split(" ", 1)[0].rstrip(":;,").lower()
    return word if word in DECISION_CAUSES else "other"


# First words of the reasons the agent and its policies give (tuner, pins, exclusions, owner
# changes, the PF controllers, the restore on stop); a bounded label set.
DECISION_CAUSES = ("start", "probe", "converged", "restart", "abort", "fixed", "pinned", "excluded", "owner",
                   "restore", "napi", "de", "hybrid")


@dataclass(frozen=True)
class AgentView:
    """Everything readers show of a running agent, copied under its lock in one call."""

    backend: str
    detail: str  # what the agent runs on (scenario and seed, or the sysfs root)
    started: float  # Unix seconds
    interval_s: float
    ticks: int
    last_tick_wall: float | None  # Unix seconds of the last tick; None before the first
    capabilities: Capabilities
    pfs: tuple[PfView, ...]
    vfs: tuple[VfView, ...]
    ignored: tuple[Ignored, ...]
    cost_model: Mapping[str, object]
    # Added for the metrics: decisions by (setting, cause) and tick durations, since start.
    decisions: Mapping[tuple[str, str], int] = field(default_factory=dict)
    tick_times: TickTimes | None = None
    vs_adaptive: HostVsAdaptive | None = None  # the VFs' VsAdaptive summed (None: no VF has one)

    @property
    def vf_count(self) -> int:
        return len(self.vfs)

    @property
    def actuators(self) -> tuple[VfView, ...]:
        """Per VF, how its ITR is set (the API's /v1/host shows pci, actuator, actuator_reason)."""
        return self.vfs

    def vf(self, pci: str) -> VfView | None:
        return next((vf for vf in self.vfs if vf.pci == pci), None)
