"""Workload classes and the best setting remembered per class, per VF and per host.

A window's class: the packet size class of its busier direction, the rx/tx mix, the decade of
its packet rate, and bulk vs request/response (data both ways, or one packet back for each
packet in; a bulk flow's other direction carries acknowledgements alone).
The best ITR found for a class does not change while the class holds, so a VF whose load
returns to a class it has seen jumps to the remembered setting within one window instead of
searching again, and a VF seeing a class for the first time starts from what another VF of the
host found for it. Classification has hysteresis (a rate near a decade's edge, or a size near a
size class's edge, keeps the class it had) so noise does not flip classes.

The memory exports and imports as plain data (ProfilesRecord.to_json/from_json, versioned),
so an orchestrator can seed a new host from a fleet. Pure logic.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from vftune.control.window import Window

Kind = Literal["bulk", "rr"]
Mix = Literal["rx", "tx", "both"]
# bytes: tiny < 128 <= small < 512 <= medium < 1200 <= large < 2048 <= jumbo. A jumbo frame is a
# load of its own: at 9000 bytes the same bits take a sixth of the packets and interrupts.
SIZE_EDGES = (128.0, 512.0, 1200.0, 2048.0)
SIZE_NAMES = ("tiny", "small", "medium", "large", "jumbo")
HYSTERESIS = 0.15  # of a decade (log10) or of a size edge (relative): keep the class inside it
# Request/response: both directions carry data. A bulk flow's other direction carries its
# receiver's ACKs alone: packets of headers only (IP, TCP with options, the frame's; counted as
# the NIC counts them), at most one for every second segment (delayed ACK, RFC 1122). A load
# with one packet back for each packet in is not bulk, whatever its packets carry. (A QUIC
# download's acknowledgements are larger: read as request/response, tuned as before this rule.)
ACK_MAX_BYTES = 100.0  # a direction's mean packet at most this: acknowledgements alone
RR_ONE_TO_ONE = 1.5  # packets one way over the other at most this: one back for each in
MIX_SHARE = 0.8  # a direction with this share of the bytes makes the mix one-way
PROFILES_VERSION = 1


@dataclass(frozen=True, order=True)
class WorkloadClass:
    kind: Kind
    size: str
    mix: Mix
    decade: int  # floor(log10(packets/s))

    def key(self) -> str:
        return f"{self.kind}/{self.size}/{self.mix}/1e{self.decade}"

    @property
    def shape(self) -> tuple[str, str, str]:
        """Kind, size and mix: the class but its rate's decade (which the probes move)."""
        return (self.kind, self.size, self.mix)

    @classmethod
    def from_key(cls, key: str) -> WorkloadClass:
        try:
            kind, size, mix, decade = key.split("/")
            if kind not in ("bulk", "rr") or size not in SIZE_NAMES or mix not in ("rx", "tx", "both"):
                raise ValueError
            if not decade.startswith("1e"):
                raise ValueError
            return cls(kind, size, mix, int(decade[2:]))  # type: ignore[arg-type]
        except ValueError:
            raise ValueError(f"workload class {key!r}: expected kind/size/mix/1eN, e.g. bulk/large/rx/1e5") from None

    def __str__(self) -> str:
        return self.key()


def _size_index(size: float, previous: int | None) -> int:
    index = sum(size >= e for e in SIZE_EDGES)
    if previous is not None and index != previous:
        # Inside HYSTERESIS of the edge between them: keep the previous class.
        edge = SIZE_EDGES[min(index, previous)]
        if abs(size / edge - 1.0) < HYSTERESIS:
            return previous
    return index


def classify(w: Window, previous: WorkloadClass | None = None) -> WorkloadClass | None:
    """The window's class (None when it carried no packets); `previous` gives hysteresis."""
    if w.packets <= 0 or w.duration <= 0:
        return None
    kind, size, mix = shape_of(w.bits, w.rx_bits, w.packets, w.rx_packets, previous)
    level = math.log10(max(w.pps, 1.0))
    decade = math.floor(level)
    same = previous if previous is not None and previous.kind == kind and previous.mix == mix else None
    if same is not None and same.decade != decade and same.decade - HYSTERESIS <= level < same.decade + 1 + HYSTERESIS:
        decade = same.decade
    return WorkloadClass(kind, size, mix, decade)


def shape_of(bits: float, rx_bits: float, packets: float, rx_p: float,
             previous: WorkloadClass | None = None) -> tuple[Kind, str, Mix]:
    """Kind, size and mix of traffic (WorkloadClass.shape; bits and packets both ways, and
    received), with `previous`'s hysteresis."""
    tx_bits, tx_p = bits - rx_bits, packets - rx_p
    rx_size = rx_bits / 8.0 / rx_p if rx_p > 0 else 0.0
    tx_size = tx_bits / 8.0 / tx_p if tx_p > 0 else 0.0
    rx_share = rx_bits / bits if bits > 0 else 0.0
    mix: Mix = "rx" if rx_share >= MIX_SHARE else "tx" if rx_share <= 1.0 - MIX_SHARE else "both"
    one_to_one = rx_p > 0 and tx_p > 0 and max(rx_p, tx_p) <= RR_ONE_TO_ONE * min(rx_p, tx_p)
    kind: Kind = "rr" if one_to_one or min(rx_size, tx_size) > ACK_MAX_BYTES else "bulk"
    busy_size = rx_size if rx_bits >= tx_bits else tx_size
    same = previous is not None and previous.kind == kind and previous.mix == mix
    size = _size_index(busy_size, SIZE_NAMES.index(previous.size) if same and previous is not None else None)
    return kind, SIZE_NAMES[size], mix


@dataclass
class Profile:
    """The best setting found for one class, and what it measured when it was found."""

    itr: int
    bps: float  # the VF's throughput at itr when found (bits/s)
    cpu_per_bit: float | None = None
    found_t: float = 0.0
    uses: int = 0  # recalls since found

    def as_dict(self) -> dict[str, Any]:
        return {"itr": self.itr, "bps": round(self.bps), "cpu_per_bit": self.cpu_per_bit,
                "found_t": round(self.found_t, 3), "uses": self.uses}


@dataclass
class ClassMemory:
    """Best settings by workload class, for one VF or for a whole host.

    The agent's tick changes it while the API exports or imports it: every change and every
    walk over it holds `lock` (one per host, shared by its tables)."""

    profiles: dict[WorkloadClass, Profile] = field(default_factory=dict)
    max_classes: int = 64  # the least recently found go first
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def get(self, klass: WorkloadClass) -> Profile | None:
        return self.profiles.get(klass)

    def nearest(self, klass: WorkloadClass) -> tuple[WorkloadClass, Profile] | None:
        """The class itself, else the same kind, size and mix one decade away: a window measured
        at the previous load's setting may show a rate that setting held down (or up)."""
        with self.lock:
            return self._nearest(klass)

    def _nearest(self, klass: WorkloadClass) -> tuple[WorkloadClass, Profile] | None:
        if klass in self.profiles:
            return klass, self.profiles[klass]
        near = [k for k in self.profiles
                if k.shape == klass.shape and abs(k.decade - klass.decade) == 1]
        if not near:
            return None
        best = max(near, key=lambda k: self.profiles[k].found_t)
        return best, self.profiles[best]

    def remember(self, klass: WorkloadClass, profile: Profile) -> None:
        with self.lock:
            self.profiles[klass] = profile
            if len(self.profiles) > self.max_classes:
                oldest = min(self.profiles, key=lambda k: self.profiles[k].found_t)
                del self.profiles[oldest]

    def forget(self, klass: WorkloadClass) -> None:
        with self.lock:
            self.profiles.pop(klass, None)

    def __len__(self) -> int:
        return len(self.profiles)

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {k.key(): p.as_dict() for k, p in sorted(self.profiles.items())}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> ClassMemory:
        memory = cls()
        for key, value in data.items():
            klass = WorkloadClass.from_key(key)
            if not isinstance(value, Mapping):
                raise ValueError(f"{where}.{key}: expected an object, got {value!r}")
            itr, bps, cpb = value.get("itr"), value.get("bps"), value.get("cpu_per_bit")
            if not isinstance(itr, int) or isinstance(itr, bool) or itr < 0:
                raise ValueError(f"{where}.{key}.itr: expected interrupts/s >= 0, got {itr!r}")
            if not isinstance(bps, (int, float)) or isinstance(bps, bool) or not math.isfinite(bps) or bps < 0:
                raise ValueError(f"{where}.{key}.bps: expected bits/s >= 0, got {bps!r}")
            if cpb is not None and (not isinstance(cpb, (int, float)) or not math.isfinite(cpb) or cpb < 0):
                raise ValueError(f"{where}.{key}.cpu_per_bit: expected a number >= 0 or null, got {cpb!r}")
            memory.profiles[klass] = Profile(itr, float(bps), None if cpb is None else float(cpb),
                                             float(value.get("found_t", 0.0) or 0.0), 0)
        return memory


@dataclass
class ProfilesRecord:
    """A host's workload memory as plain data: the host's table and each VF's, by PCI address."""

    host: ClassMemory = field(default_factory=ClassMemory)
    vfs: dict[str, ClassMemory] = field(default_factory=dict)
    version: int = PROFILES_VERSION

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "host": self.host.as_dict(),
                "vfs": {pci: m.as_dict() for pci, m in sorted(self.vfs.items())}}

    @classmethod
    def from_json(cls, data: object) -> ProfilesRecord:
        if not isinstance(data, Mapping):
            raise ValueError(f"profiles: expected an object, got {type(data).__name__}")
        version = data.get("version")
        if version != PROFILES_VERSION:
            raise ValueError(f"profiles.version: this agent reads version {PROFILES_VERSION}, got {version!r}")
        host, vfs = data.get("host", {}), data.get("vfs", {})
        if not isinstance(host, Mapping) or not isinstance(vfs, Mapping):
            raise ValueError("profiles.host and profiles.vfs must be objects keyed by class and PCI address")
        record = cls(ClassMemory.from_dict(host, "profiles.host"))
        for pci, table in vfs.items():
            if not isinstance(table, Mapping):
                raise ValueError(f"profiles.vfs.{pci}: expected an object, got {table!r}")
            record.vfs[str(pci)] = ClassMemory.from_dict(table, f"profiles.vfs.{pci}")
        return record


class HostProfiles:
    """One host's memory: shared by every VF's tuner (the factory hands the same object to all)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.host = ClassMemory(lock=self.lock)
        self.vfs: dict[str, ClassMemory] = {}

    def for_vf(self, pci: str) -> ClassMemory:
        with self.lock:
            return self.vfs.setdefault(pci, ClassMemory(lock=self.lock))

    def export(self) -> dict[str, Any]:
        """The whole memory as plain data (ProfilesRecord's JSON form), taken in one hold."""
        with self.lock:
            return ProfilesRecord(self.host, dict(self.vfs)).to_json()

    def load(self, record: ProfilesRecord) -> int:
        """Merge an imported record: its entries replace this host's for the same classes.
        Returns how many entries it brought."""
        n = 0
        with self.lock:
            for klass, p in record.host.profiles.items():
                self.host.remember(klass, p)
                n += 1
            for pci, memory in record.vfs.items():
                mine = self.for_vf(pci)
                for klass, p in memory.profiles.items():
                    mine.remember(klass, p)
                    n += 1
        return n
