"""Response models: the API's contract with orchestrators, and what /openapi.json documents.

The state models read vftune.model's frozen views by attribute (from_attributes), so the
API's JSON is these models' fields, not hand-built dicts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vftune.itr import ITR_MAX_RATE
from vftune.model import DropsSource


class ViewModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class ErrorBody(BaseModel):
    error: str = Field(description="One line naming the problem and the value")


class Health(BaseModel):
    status: Literal["ok", "starting", "stalled", "degraded"] = Field(
        description="ok; starting (no tick yet); stalled (no tick for 3 intervals, HTTP 503); degraded "
                    "(tuning and restoring go on, history is not recorded: `degraded` says why)")
    ticks: int
    last_tick_age_s: float | None
    backend: str
    degraded: str | None = Field(default=None, description="why history is not being recorded (disk full)")


class CapabilitiesOut(ViewModel):
    backend: str
    itr_min: int
    itr_max: int
    vf_itr: bool
    rx_modes: list[str]
    napi_budget: bool
    counter_refresh_s: float
    missing: list[str]


class PfOut(ViewModel):
    name: str
    pci: str
    device_id: str = Field(description="PCI device id, 0x10fb")
    driver: str
    num_vfs: int
    total_vfs: int
    mode: str
    napi_budget: int | None
    controller: str
    controller_state: dict[str, Any]
    rx_pps: float | None
    rx_bps: float | None
    last_decision: str | None
    mode_now: str | None = Field(description="de or napi: what the port runs now (mode may be hybrid)")
    switches: int | None = Field(description="DE/NAPI switches since start")

    @field_validator("device_id", mode="before")
    @classmethod
    def _hex(cls, value: object) -> object:
        return f"0x{value:04x}" if isinstance(value, int) else value


class IgnoredOut(ViewModel):
    name: str
    reason: str


class CostModel(ViewModel):
    fit: dict[str, float] | None = Field(
        description="alpha: CPU s per million bytes, beta: per thousand packets, gamma: per thousand interrupts")
    cpu_per_1000_interrupts_s: float | None
    saved_cpu_s_per_s: float | None = Field(
        description="CPU seconds per second the set ITRs save against the VFs' own adaptive ITR")
    rows: int
    note: str | None


class VsAdaptiveOut(ViewModel):
    merit: Literal["throughput", "response time"] = Field(
        description="what the merit is: throughput, or for a request/response load its transaction rate "
        "(response time is its inverse)")
    merit_change: float = Field(description="the merit at the set rate against the adaptive ITR's, a fraction: "
                                "+0.12 = 12% better (more throughput, or shorter response time)")
    cpu_per_gbit_change: float = Field(description="CPU per Gb at the set rate against the adaptive ITR's: "
                                       "-0.1 = 10% cheaper")
    cpu_change_cores: float = Field(description="CPU seconds per second that change costs at the VF's "
                                    "throughput now: + spent, - saved")
    age_s: float = Field(description="age of the older of the two measurements, seconds")


class HostVsAdaptiveOut(ViewModel):
    vfs: int = Field(description="VFs under a set rate with both sides measured")
    merit_change: float | None = Field(description="their merit changes, weighted by throughput")
    cpu_change_cores: float = Field(description="CPU seconds per second they spend (+) or save (-) together")
    text: str = Field(description="the same in one line, as `vftune status` shows it")


class VfActuatorOut(ViewModel):
    pci: str
    actuator: str = Field(description="how the VF's ITR is set: patched, guest-agent or none")
    actuator_reason: str


class HostOut(ViewModel):
    backend: str
    detail: str
    started: float
    interval_s: float
    ticks: int
    vf_count: int
    capabilities: CapabilitiesOut
    pfs: list[PfOut]
    ignored: list[IgnoredOut]
    cost_model: CostModel
    actuators: list[VfActuatorOut] = Field(description="per VF: which actuator sets its ITR, and why")
    vs_adaptive: HostVsAdaptiveOut | None = Field(
        None, description="what the set rates bought against the VFs' adaptive ITRs, summed; null: "
        "no VF under a set rate is measured on both sides yet")


class VfOut(ViewModel):
    pci: str
    pf: str
    index: int
    driver: str | None
    guest: str | None
    guest_uuid: str | None
    itr: int = Field(description="interrupts/s in force now; 0 = the VF's own adaptive ITR")
    vs_adaptive: VsAdaptiveOut | None = Field(
        None, description="what the set rate bought against the VF's own adaptive ITR, from the tuner's "
        "windows at each; null while it runs its adaptive ITR or searches, or before both are measured")
    itr_pending: int | None = Field(
        None, description="a rate written but not in force yet (the patched VF takes it at its next fetch, "
        "within 2 s; the guest agent when ethtool has run); null: none")
    policy: str
    phase: str | None = Field(description="the policy's phase: idle, probing, holding")
    rx_pps: float | None
    rx_bps: float | None
    tx_pps: float | None
    tx_bps: float | None
    interrupts_per_s: float | None
    guest_cpu: float | None = Field(description="CPU seconds per second of the owning guest")
    guest_irq_cpu: float | None = Field(
        None, description="CPU seconds per second the owning guest's own kernel spent in interrupt and softirq "
        "handling (its /proc/stat through its guest agent's guest-get-cpustats, qemu-ga 7.1 and later); the "
        "receive work interrupts cost inside the guest, which the host's guest_cpu does not separate. Guest-wide; "
        "null when unknown")
    guest_user_cpu: float | None = Field(
        None, description="CPU seconds per second in the owning guest's processes (user + nice), from the same "
        "read; null when unknown")
    fresh: bool | None
    updated: float | None = Field(
        description="Unix time the figures above end at. A VF at rest (no traffic, no interrupts, its policy "
        "idle) has its counters compared every tick but is rated once per history row (1 s): up to that old")
    last_decision: str | None
    state: str = Field(description="converged, searching, adaptive (the VF's own ITR), excluded or pinned")
    objective: str = Field(description="balanced (the default), throughput, efficiency or latency (from a config "
                           "rule, else the [tuner] default)")
    margin: float | None = Field(
        None, description="the share of the VF's best merit a rule gives up for fewer interrupts (0.05 = 5%); "
        "null: the objective's own (balanced 3%, efficiency 10%, throughput the noise only)")
    rule: str | None = Field(description="the config rule that matched this VF; null: none")
    actuator: str = Field(description="how its ITR is set: patched (the PF's sysfs), guest-agent (the guest's "
                          "ethtool through its QEMU guest agent) or none (observed only)")
    actuator_reason: str
    rx_dropped_pps: float | None = Field(
        None, description="datagrams/s its guest's sockets dropped on receive (UDP RcvbufErrors, read through "
        "the guest's agent); null when unknown or when the guest has other VFs too. The tuner credits the VF "
        "with what reached applications: received less these")
    rx_dropped_source: DropsSource = Field(
        description="whether rx_dropped_pps is known: guest-agent (it is), pending (not read twice yet), "
        "unavailable (the guest's agent is missing, times out or blocks guest-file-*; see rx_dropped_reason), "
        "shared (its guest holds other VFs too: drops are per guest), no-guest, or off (--guest-rx-drops off)")
    rx_dropped_reason: str = Field(description="why, in one line: the agent's error and when it is tried again")


class VfDetail(VfOut):
    policy_state: dict[str, Any]


class SampleOut(BaseModel):
    t: float
    dt: float
    rx_pps: float
    rx_bps: float
    tx_pps: float
    tx_bps: float
    interrupts_per_s: float | None
    itr: int
    guest_cpu: float | None
    fresh: bool


class DecisionOut(BaseModel):
    id: int
    t: float
    target: str
    setting: str
    old: str | None
    requested: str | None
    applied: str | None
    ok: bool
    reason: str
    error: str | None


class History(BaseModel):
    pci: str
    since: float
    until: float
    samples: list[SampleOut]
    decisions: list[DecisionOut]
    next_cursor: str | None = Field(default=None, description="pass as cursor= for the page of older samples and decisions")


GUEST_OPERATIONS = ("prepare", "start", "started", "stopped", "release", "migrate", "restore", "reconnect", "attach")
Operation = Literal["prepare", "start", "started", "stopped", "release", "migrate", "restore", "reconnect", "attach"]
PCI_PATTERN = r"^[0-9a-fA-F]{4,5}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$"
UUID_PATTERN = r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"


def _printable(value: str | None) -> str | None:
    # No control characters (they forge log lines) and no lone surrogates (not UTF-8, not storable).
    if value is None:
        return value
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise ValueError("control characters and unpaired surrogates are not allowed")
    return value


class GuestEventIn(BaseModel):
    """What a libvirt hook reports: a guest's lifecycle step and the VFs its XML holds."""

    model_config = ConfigDict(extra="forbid")

    guest: str = Field(min_length=1, max_length=256, description="libvirt domain name")
    uuid: str | None = Field(default=None, pattern=UUID_PATTERN, description="libvirt domain UUID")
    operation: Operation = Field(description="libvirt hook operation")
    vfs: list[Annotated[str, Field(pattern=PCI_PATTERN)]] = Field(
        default_factory=list, max_length=512, description="PCI addresses from the domain XML, 0000:03:10.0")
    source: str = Field(default="libvirt-hook", min_length=1, max_length=64)

    @field_validator("guest", "source")
    @classmethod
    def _no_control(cls, value: str) -> str | None:
        return _printable(value)


class GuestEventOut(BaseModel):
    id: int
    t: float
    guest: str
    uuid: str | None
    operation: str
    vfs: list[str]
    source: str


class ProfileModel(BaseModel):
    """The best setting remembered for one workload class."""

    model_config = ConfigDict(extra="forbid")
    itr: int = Field(ge=0, le=ITR_MAX_RATE, description="interrupts/s (0: the VF's own adaptive ITR)")
    bps: float = Field(ge=0, allow_inf_nan=False, description="the VF's throughput at itr when found, bits/s")
    cpu_per_bit: float | None = Field(None, ge=0, allow_inf_nan=False, description="guest CPU seconds per bit")
    found_t: float = Field(0.0, allow_inf_nan=False, description="when it was found (the agent's clock)")
    uses: int = Field(0, ge=0, description="recalls since it was found")


class ProfilesRecord(BaseModel):
    """A host's workload memory: by class key (kind/size/mix/1eN, e.g. bulk/large/rx/1e5)."""

    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = Field(description="record format version: this agent reads and writes 1")
    host: dict[str, ProfileModel] = Field(default_factory=dict, description="what any VF of the host found")
    vfs: dict[str, dict[str, ProfileModel]] = Field(default_factory=dict, description="by VF PCI address")


class ProfilesImported(BaseModel):
    imported: int = Field(description="entries merged")
    profiles: ProfilesRecord


class RuleOut(BaseModel):
    match: dict[str, str] = Field(description="guest, uuid, vf or pf globs; all must match")
    objective: str | None = None
    max_interval_us: float | None = None
    margin: float | None = None
    pin_itr: int | None = None
    exclude: bool | None = None
    source: str = Field(description='"api", the config file or the drop-in it came from')
    index: int = Field(description="its place in its source, from 1")


class RulesOut(BaseModel):
    rules: list[RuleOut] = Field(description="in match order: the first that matches a VF decides")
