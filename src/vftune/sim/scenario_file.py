"""Scenario files: the simulated host, its guests and their loads as TOML (docs/scenarios.md).

`load(path)` reads and checks a file and returns a ScenarioFile whose build(seed) gives the
HostSpec the engine runs. Every problem is a ScenarioError whose message is one line naming the
file, the key and the value. The seed picks one host out of the family the file describes: RTTs,
service times, offered loads, pinned windows and PF traffic rates vary by up to +-JITTER, so
tuners are not judged on one exact instance.
"""

from __future__ import annotations

import math
import tomllib
import uuid
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from vftune.itr import MAX_VFS_PER_PF
from vftune.sim.workload import (
    HostSpec,
    HostTraffic,
    Idle,
    Phase,
    Poll,
    Ramp,
    RequestResponse,
    Stream,
    Transmit,
    VfSlot,
    Vm,
    Workload,
)
from vftune.textfile import read_bounded

UUID_NAMESPACE = uuid.UUID("6f1c3c62-7c1e-4d0e-9a59-1f0d2b8c5a10")
JITTER = 0.04
KINDS = ("tcp", "udp", "rr", "idle", "tcp_tx", "poll")
OFFERED_KINDS = ("tcp", "udp", "tcp_tx", "poll")  # kinds with an offered rate (ramp_to_bps)
MAX_QUEUES = 4
DEFAULT_DURATION_S = 600.0  # the bench's run length past the last phase's start (bench/harness)
NICS = ("82599", "pro1000")
COUNTERS = ("stock", "patched")
MAX_PORTS = 4

TOP_KEYS = {"name", "description", "duration_s", "cycle_s", "host", "noise", "guest", "vf", "pf"}
HOST_KEYS = {"cores", "cpu_ghz", "nic", "ports", "irq_time_accounting", "posted_interrupts", "counters",
             "tcp_rmem_max", "guest_agent", "vf_itr_fetch_s", "vf_itr_fetch_busy_s", "vf_itr_busy_s",
             "overcommit"}
NOISE_KEYS = {"sigma", "burst", "microburst_ms", "microburst_gain"}
GUEST_KEYS = {"name", "vcpus", "memory_mb", "background_cpu", "app_cpu"}
VF_KEYS = {"guest", "port", "phase", "queues", "incast_group", "guest_agent"}
PHASE_KEYS = {"at_s", "kind", "packet_bytes", "offered_bps", "window_bytes", "rtt_us", "request_bytes",
              "response_bytes", "in_flight", "service_us", "pps", "ramp_to_bps", "mtu"}
PF_KEYS = {"port", "phase"}
PF_PHASE_KEYS = {"at_s", "pps", "packet_bytes", "constant_rate"}


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message is one line."""


class _Checker:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, value: object, why: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: {key} = {value!r}: {why}")

    def table(self, doc: Any, key: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(doc, dict):
            raise self.fail(key, doc, "must be a table")
        for k in doc:
            if k not in allowed:
                raise self.fail(f"{key}.{k}" if key else k, doc[k], f"unknown key; known: {', '.join(sorted(allowed))}")
        return doc

    def tables(self, doc: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
        value = doc.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(f"{where}{key}", value, f"must be an array of tables ([[{where}{key}]])")
        return value

    def number(self, doc: dict[str, Any], key: str, where: str, default: float | None, low: float | None = None,
               high: float | None = None, above: float | None = None) -> float | None:
        if key not in doc:
            return default
        value = doc[key]
        name = f"{where}{key}"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(name, value, "must be a finite number")
        if above is not None and not value > above:
            raise self.fail(name, value, f"must be more than {above:g}")
        if low is not None and value < low:
            raise self.fail(name, value, f"must be at least {low:g}")
        if high is not None and value > high:
            raise self.fail(name, value, f"must be at most {high:g}")
        return float(value)

    def integer(self, doc: dict[str, Any], key: str, where: str, default: int, low: int, high: int) -> int:
        if key not in doc:
            return default
        value = doc[key]
        name = f"{where}{key}"
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 2.0 means 2
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(name, value, "must be a whole number")
        if not low <= value <= high:
            raise self.fail(name, value, f"must be in {low}..{high}")
        return value

    def choice(self, doc: dict[str, Any], key: str, where: str, default: str, choices: tuple[str, ...]) -> str:
        value = doc.get(key, default)
        if value not in choices:
            raise self.fail(f"{where}{key}", value, f"is not one of {', '.join(choices)}")
        return str(value)

    def flag(self, doc: dict[str, Any], key: str, where: str, default: bool) -> bool:
        value = doc.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{where}{key}", value, "must be true or false")
        return value

    def text(self, doc: dict[str, Any], key: str, where: str, default: str | None) -> str | None:
        if key not in doc:
            return default
        value = doc[key]
        if not isinstance(value, str) or (key == "name" and not value.strip()):
            raise self.fail(f"{where}{key}", value, "must be a non-empty string" if key == "name" else "must be a string")
        return value


@dataclass(frozen=True)
class PhaseDef:
    at_s: float
    kind: str
    values: dict[str, float]


@dataclass(frozen=True)
class VfDef:
    guest: str | None
    port: int
    phases: tuple[PhaseDef, ...]
    queues: int = 1
    incast_group: int | None = None
    guest_agent: bool | None = None


@dataclass(frozen=True)
class PfPhaseDef:
    at_s: float
    pps: float
    packet_bytes: int
    constant_rate: bool


@dataclass(frozen=True)
class ScenarioFile:
    """A checked scenario file; build(seed) makes one host of its family."""

    name: str
    description: str
    path: str
    duration_s: float | None
    cycle_s: float | None
    host: dict[str, Any]
    sigma: float
    burst: float
    guests: tuple[tuple[str, int, int, float, float], ...]  # name, vcpus, memory_mb, background_cpu, app_cpu
    vfs: tuple[VfDef, ...]
    pf_phases: tuple[tuple[int, tuple[PfPhaseDef, ...]], ...]
    microburst_ms: float = 0.0
    microburst_gain: float = 1.0

    def _phase_length(self, vf: VfDef, k: int) -> float:
        """How long a VF's phase k lasts: to its next phase, the cycle's end, or the run's end."""
        if k + 1 < len(vf.phases):
            return vf.phases[k + 1].at_s - vf.phases[k].at_s
        if self.cycle_s:
            return self.cycle_s - vf.phases[k].at_s
        last = max(p.at_s for v in self.vfs for p in v.phases)
        end = self.duration_s if self.duration_s is not None else last + DEFAULT_DURATION_S
        return max(0.0, end - vf.phases[k].at_s)

    def build(self, seed: int = 0) -> HostSpec:
        import numpy as np  # here, not at the top: the agent on a real host reads scenario names, never builds one

        rng = np.random.default_rng([seed, 7])

        def j(value: float) -> float:
            return value * (1.0 + JITTER * (2.0 * float(rng.random()) - 1.0))

        starts = sorted({0.0} | {p.at_s for vf in self.vfs for p in vf.phases}
                        | {p.at_s for _, phases in self.pf_phases for p in phases})
        vms = tuple(Vm(name, str(uuid.uuid5(UUID_NAMESPACE, f"{self.name}/{name}")), vcpus, memory, background, app)
                    for name, vcpus, memory, background, app in self.guests)
        built: dict[tuple[int, int], Workload] = {}  # (vf, its phase) -> workload, jittered once
        slots = []
        counters = [0] * self.host["ports"]
        for v, vf in enumerate(self.vfs):
            workloads: list[Workload] = []
            for start in starts:
                current = [i for i, p in enumerate(vf.phases) if p.at_s <= start]
                if not current:
                    workloads.append(Idle(pps=0.0))
                    continue
                key = (v, current[-1])
                if key not in built:
                    k = current[-1]
                    built[key] = _workload(vf.phases[k], j, self._phase_length(vf, k))
                workloads.append(built[key])
            slots.append(VfSlot(vf.port, counters[vf.port], vf.guest, tuple(workloads), vf.queues,
                                vf.incast_group, vf.guest_agent))
            counters[vf.port] += 1
        traffic: list[tuple[HostTraffic, ...]] = [() for _ in range(self.host["ports"])]
        for port, phases in self.pf_phases:
            made = {i: HostTraffic(pps=j(p.pps), packet_bytes=p.packet_bytes, constant_rate=p.constant_rate)
                    for i, p in enumerate(phases)}
            per_start = []
            for start in starts:
                current = [i for i, p in enumerate(phases) if p.at_s <= start]
                per_start.append(made[current[-1]] if current else HostTraffic())
            traffic[port] = tuple(per_start)
        return HostSpec(
            self.name, self.host["cores"], vms, tuple(slots), num_pfs=self.host["ports"],
            phases=tuple(Phase(s, _label(self, s)) for s in starts), cycle_s=self.cycle_s,
            host_traffic=tuple(traffic), patched_counters=self.host["counters"] == "patched",
            noise_sigma=self.sigma, burst_gain=self.burst, description=self.description,
            duration_s=self.duration_s, cpu_ghz=self.host["cpu_ghz"], nic=self.host["nic"],
            irq_time_accounting=self.host["irq_time_accounting"],
            posted_interrupts=self.host["posted_interrupts"], tcp_rmem_max=self.host["tcp_rmem_max"],
            guest_agent=self.host["guest_agent"], vf_itr_fetch_s=self.host["vf_itr_fetch_s"],
            vf_itr_fetch_busy_s=self.host["vf_itr_fetch_busy_s"], vf_itr_busy_s=self.host["vf_itr_busy_s"],
            microburst_s=self.microburst_ms / 1e3, microburst_gain=self.microburst_gain,
            overcommit=self.host["overcommit"],
        )


def _label(scenario: ScenarioFile, start: float) -> str:
    kinds = sorted({p.kind for vf in scenario.vfs for p in vf.phases if p.at_s == start})
    return f"{start:g}s:" + "+".join(kinds) if kinds else f"{start:g}s"


def _workload(p: PhaseDef, j: Any, length_s: float) -> Workload:
    v = p.values
    offered = v.get("offered_bps")
    offered_now = j(offered) if offered else None
    ramp = None
    if "ramp_to_bps" in v and offered_now:
        # The ramp's end is jittered by the same relative amount as its start.
        ramp = Ramp(v["ramp_to_bps"] * offered_now / offered, p.at_s, length_s)
    packet = int(v.get("packet_bytes", 1500))
    if p.kind == "tcp":
        window = v.get("window_bytes")
        return Stream(packet_bytes=packet, acked=True, offered_bps=offered_now,
                      window_bytes=j(window) if window else None, rtt_s=j(v.get("rtt_us", 60.0)) * 1e-6, ramp=ramp)
    if p.kind == "udp":
        return Stream(packet_bytes=packet, acked=False, offered_bps=offered_now,
                      rtt_s=j(v.get("rtt_us", 60.0)) * 1e-6, ramp=ramp)
    if p.kind == "tcp_tx":
        window = v.get("window_bytes")
        return Transmit(packet_bytes=packet, offered_bps=offered_now, window_bytes=j(window) if window else None,
                        rtt_s=j(v.get("rtt_us", 60.0)) * 1e-6, ramp=ramp)
    if p.kind == "poll":
        return Poll(packet_bytes=packet, offered_bps=offered_now, ramp=ramp)
    if p.kind == "rr":
        return RequestResponse(request_bytes=int(v.get("request_bytes", 100)),
                               response_bytes=int(v.get("response_bytes", 100)),
                               concurrency=int(v.get("in_flight", 1)), rtt_s=j(v.get("rtt_us", 50.0)) * 1e-6,
                               service_s=j(v.get("service_us", 5.0)) * 1e-6, mtu=int(v.get("mtu", 1500)))
    return Idle(pps=v.get("pps", 4.0), packet_bytes=int(v.get("packet_bytes", 90)))


def parse(text: str, path: str) -> ScenarioFile:
    """Check a scenario document; ScenarioError names the file, key and value of the first problem."""
    c = _Checker(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    c.table(doc, "", TOP_KEYS)
    if "name" not in doc:
        raise c.fail("name", None, "is required")
    name = c.text(doc, "name", "", None) or ""
    description = c.text(doc, "description", "", "") or ""
    duration = c.number(doc, "duration_s", "", None, low=10.0)
    cycle = c.number(doc, "cycle_s", "", None, above=0.0)
    h = c.table(doc.get("host", {}), "host", HOST_KEYS)
    host: dict[str, Any] = {
        "cores": c.integer(h, "cores", "host.", 12, 1, 1024),
        "cpu_ghz": c.number(h, "cpu_ghz", "host.", 2.6, low=0.5, high=10.0),
        "nic": c.choice(h, "nic", "host.", "82599", NICS),
        "ports": c.integer(h, "ports", "host.", 2, 1, MAX_PORTS),
        "irq_time_accounting": c.flag(h, "irq_time_accounting", "host.", True),
        "posted_interrupts": c.flag(h, "posted_interrupts", "host.", False),
        "counters": c.choice(h, "counters", "host.", "stock", COUNTERS),
        "tcp_rmem_max": int(c.number(h, "tcp_rmem_max", "host.", 6_291_456, low=4096, high=2**31) or 0),
        "guest_agent": c.flag(h, "guest_agent", "host.", True),
        "vf_itr_fetch_s": c.number(h, "vf_itr_fetch_s", "host.", 2.0, low=0.0, high=10.0),
        "vf_itr_fetch_busy_s": c.number(h, "vf_itr_fetch_busy_s", "host.", 0.25, low=0.0, high=10.0),
        "vf_itr_busy_s": c.number(h, "vf_itr_busy_s", "host.", 10.0, low=0.0, high=600.0),
        "overcommit": c.flag(h, "overcommit", "host.", False),
    }
    n = c.table(doc.get("noise", {}), "noise", NOISE_KEYS)
    sigma = c.number(n, "sigma", "noise.", 0.03, low=0.0, high=1.0) or 0.0
    burst = c.number(n, "burst", "noise.", 1.5, low=1.0, high=20.0) or 1.0
    for given, missing in (("microburst_ms", "microburst_gain"), ("microburst_gain", "microburst_ms")):
        if given in n and missing not in n:
            raise c.fail(f"noise.{missing}", None, f"is required with noise.{given}")
    microburst_ms = c.number(n, "microburst_ms", "noise.", 0.0, above=0.0, high=1000.0) or 0.0
    microburst_gain = c.number(n, "microburst_gain", "noise.", 1.0, low=1.0, high=100.0) or 1.0
    guests = []
    names: set[str] = set()
    for i, g in enumerate(c.tables(doc, "guest", "")):
        where = f"guest[{i}]."
        c.table(g, f"guest[{i}]", GUEST_KEYS)
        if "name" not in g:
            raise c.fail(f"{where}name", None, "is required")
        gname = c.text(g, "name", where, None) or ""
        if gname in names:
            raise c.fail(f"{where}name", gname, "names a guest twice")
        names.add(gname)
        vcpus = c.integer(g, "vcpus", where, 2, 1, 1024)
        memory = c.integer(g, "memory_mb", where, 2048, 64, 1 << 24)
        background = c.number(g, "background_cpu", where, 0.02, low=0.0, high=float(vcpus)) or 0.0
        app = c.number(g, "app_cpu", where, 0.0, low=0.0, high=float(vcpus)) or 0.0
        guests.append((gname, vcpus, memory, background, app))
    vfs = []
    per_port = [0] * host["ports"]
    for i, raw in enumerate(c.tables(doc, "vf", "")):
        where = f"vf[{i}]."
        c.table(raw, f"vf[{i}]", VF_KEYS)
        guest = c.text(raw, "guest", where, None)
        if guest is not None and guest not in names:
            raise c.fail(f"{where}guest", guest, "names no [[guest]]")
        port = c.integer(raw, "port", where, 0, 0, host["ports"] - 1)
        per_port[port] += 1
        if per_port[port] > MAX_VFS_PER_PF:
            raise c.fail(f"{where}port", port, f"more than {MAX_VFS_PER_PF} VFs on one 82599 port")
        phases = c.tables(raw, "phase", where)
        if not phases:
            raise c.fail(f"{where}phase", [], "needs at least one [[vf.phase]]")
        queues = c.integer(raw, "queues", where, 1, 1, MAX_QUEUES)
        incast = c.integer(raw, "incast_group", where, -1, 0, 1 << 20) if "incast_group" in raw else None
        agent = c.flag(raw, "guest_agent", where, True) if "guest_agent" in raw else None
        vfs.append(VfDef(guest, port, tuple(_phase(c, p, f"{where}phase[{k}].", cycle, host["nic"])
                                            for k, p in enumerate(phases)), queues, incast, agent))
        _ordered(c, [p.at_s for p in vfs[-1].phases], where)
    pfs = []
    for i, raw in enumerate(c.tables(doc, "pf", "")):
        where = f"pf[{i}]."
        c.table(raw, f"pf[{i}]", PF_KEYS)
        port = c.integer(raw, "port", where, 0, 0, host["ports"] - 1)
        pf_phases: list[PfPhaseDef] = []
        for k, p in enumerate(c.tables(raw, "phase", where)):
            pw = f"{where}phase[{k}]."
            c.table(p, f"{where}phase[{k}]", PF_PHASE_KEYS)
            at = _at(c, p, pw, cycle)
            pf_phases.append(PfPhaseDef(at, c.number(p, "pps", pw, 0.0, low=0.0, high=1e8) or 0.0,
                                        c.integer(p, "packet_bytes", pw, 1500, 46, 9000),
                                        c.flag(p, "constant_rate", pw, False)))
        _ordered(c, [p.at_s for p in pf_phases], where)
        pfs.append((port, tuple(pf_phases)))
    return ScenarioFile(name, description, path, duration, cycle, host, sigma, burst, tuple(guests), tuple(vfs),
                        tuple(pfs), microburst_ms, microburst_gain)


def _at(c: _Checker, p: dict[str, Any], where: str, cycle: float | None) -> float:
    at = c.number(p, "at_s", where, 0.0, low=0.0) or 0.0
    if cycle is not None and at >= cycle:
        raise c.fail(f"{where}at_s", p["at_s"], f"starts after the cycle ends (cycle_s = {cycle:g})")
    return at


def _ordered(c: _Checker, starts: list[float], where: str) -> None:
    for k, (a, b) in enumerate(pairwise(starts)):
        if b <= a:
            raise c.fail(f"{where}phase[{k + 1}].at_s", b, "phases must start in increasing order")


def _phase(c: _Checker, p: dict[str, Any], where: str, cycle: float | None, nic: str) -> PhaseDef:
    c.table(p, where.rstrip("."), PHASE_KEYS)
    at = _at(c, p, where, cycle)
    if "kind" not in p:
        raise c.fail(f"{where}kind", None, f"is required: one of {', '.join(KINDS)}")
    kind = c.choice(p, "kind", where, "", KINDS)
    max_packet = 9000 if nic == "82599" else 16110
    values: dict[str, float] = {}
    for key, least, most in (("packet_bytes", 46, max_packet), ("request_bytes", 1, 1 << 26),
                             ("response_bytes", 1, 1 << 26), ("in_flight", 1, 4096), ("mtu", 576, 9000)):
        if key in p:
            values[key] = float(c.integer(p, key, where, 0, least, most))
    bounds: tuple[tuple[str, float | None, float, float | None], ...] = (
        ("offered_bps", None, 1e11, 0.0), ("window_bytes", 1024.0, 2.0**31, None), ("rtt_us", 0.0, 1e6, None),
        ("service_us", 0.0, 1e6, None), ("pps", 0.0, 1e8, None), ("ramp_to_bps", None, 1e11, 0.0))
    for key, low, high, above in bounds:
        value = c.number(p, key, where, None, low=low, high=high, above=above)
        if value is not None:
            values[key] = value
    if kind in ("tcp", "tcp_tx") and values.get("packet_bytes", 1500) <= 52:
        raise c.fail(f"{where}packet_bytes", p["packet_bytes"], "a TCP segment needs more than 52 bytes of headers")
    if "mtu" in p and kind != "rr":
        raise c.fail(f"{where}mtu", p["mtu"], f"applies to kind rr only (this phase is {kind}: use packet_bytes)")
    if "ramp_to_bps" in p:
        if kind not in OFFERED_KINDS:
            raise c.fail(f"{where}ramp_to_bps", p["ramp_to_bps"],
                         f"applies to kinds with an offered rate ({', '.join(OFFERED_KINDS)}), not {kind}")
        if "offered_bps" not in p:
            raise c.fail(f"{where}ramp_to_bps", p["ramp_to_bps"], "needs offered_bps, the rate the ramp starts from")
    return PhaseDef(at, kind, values)


def load(path: str | Path) -> ScenarioFile:
    """Read and check one scenario file."""
    name = str(path)
    try:
        text = read_bounded(path)  # a device (/dev/zero), a FIFO or a huge file: refused, not read
    except FileNotFoundError:
        raise ScenarioError(f"{name}: no such file") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ScenarioError(f"{name}: cannot read: {reason}") from None
    return parse(text, name)
