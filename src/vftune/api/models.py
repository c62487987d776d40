"""Response models: the API's contract with orchestrators, and what /openapi.json documents.

The state models read vftune.model's frozen views by attribute (from_attributes), so the
API's JSON is these models' fields, not hand-built dicts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ViewModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class ErrorBody(BaseModel):
    error: str = Field(description="One line naming the problem and the value")


class Health(BaseModel):
    status: str = Field(description="ok, starting or stalled")
    ticks: int
    last_tick_age_s: float | None
    backend: str


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


class VfOut(ViewModel):
    pci: str
    pf: str
    index: int
    driver: str | None
    guest: str | None
    guest_uuid: str | None
    itr: int = Field(description="interrupts/s set now; 0 = the VF's own adaptive ITR")
    policy: str
    phase: str | None = Field(description="the policy's phase: idle, probing, holding")
    rx_pps: float | None
    rx_bps: float | None
    tx_pps: float | None
    tx_bps: float | None
    interrupts_per_s: float | None
    guest_cpu: float | None = Field(description="CPU seconds per second of the owning guest")
    fresh: bool | None
    updated: float | None
    last_decision: str | None
    actuator: str = Field(description="how its ITR is set: patched (the PF's sysfs), guest-agent (the guest's "
                          "ethtool through its QEMU guest agent) or none (observed only)")
    actuator_reason: str


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


GUEST_OPERATIONS = ("prepare", "start", "started", "stopped", "release", "migrate", "restore", "reconnect", "attach")


class GuestEventIn(BaseModel):
    """What a libvirt hook reports: a guest's lifecycle step and the VFs its XML holds."""

    guest: str = Field(min_length=1, max_length=256)
    uuid: str | None = Field(default=None, max_length=64)
    operation: str = Field(description="libvirt hook operation: " + ", ".join(GUEST_OPERATIONS))
    vfs: list[str] = Field(default_factory=list, description="PCI addresses from the domain XML")
    source: str = Field(default="libvirt-hook", max_length=64)


class GuestEventOut(BaseModel):
    id: int
    t: float
    guest: str
    uuid: str | None
    operation: str
    vfs: list[str]
    source: str
