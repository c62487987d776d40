"""A guest's own CPU accounting from QEMU's guest agent: the reply to guest-get-cpustats.

qemu-ga (7.1 and later, Linux guests) reads the guest's /proc/stat and returns one object per
vCPU line (`cpu0`, `cpu1`, ...; the summed `cpu` line is left out): {"type": "linux", "cpu": N,
"user", "nice", "system", "idle"} always, and "iowait", "irq", "softirq", "steal", "guest",
"guestnice" when the guest's kernel prints them, each in milliseconds (qga/commands-posix.c:
jiffies * 1000 / CLK_TCK). The kernel counts guest time inside user and guest_nice inside nice,
so guest and guestnice are not added again.

The reply comes from a guest, so anything may arrive: parse_cpustats raises only
CpuStatsError, whose message is one line naming what is wrong and the value.
"""

from __future__ import annotations

from typing import Any

from vftune.hostdriver.base import HostError
from vftune.model import GuestCpuTimes

COMMAND = "guest-get-cpustats"
LINUX = "linux"
ALWAYS = ("user", "nice", "system", "idle")  # qemu-ga fails the command without these
OPTIONAL = ("iowait", "irq", "softirq", "steal")  # absent on kernels that do not print them: 0
MAX_CPUS = 8192  # a guest claiming more vCPUs is not one QEMU runs (its limit is 4096 on x86)
_SHOWN = 60  # characters of a bad value quoted in the message


class CpuStatsError(HostError):
    """The reply is not what qemu-ga sends for a Linux guest; the message is one line."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _millis(entry: dict[str, Any], key: str, index: int) -> int:
    value = entry.get(key, 0)
    # JSON integers only: qemu-ga prints uint64 values, never floats, booleans or strings.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CpuStatsError(f"{COMMAND}: vCPU entry {index}: {key} is {_shown(value)}, not a count of milliseconds")
    return value


def parse_cpustats(reply: Any) -> GuestCpuTimes:
    """The guest's CPU times summed over its vCPUs, in seconds."""
    if not isinstance(reply, list):
        raise CpuStatsError(f"{COMMAND}: the reply is {_shown(reply)}, not a list of vCPUs")
    if not reply:
        raise CpuStatsError(f"{COMMAND}: the reply lists no vCPU")
    if len(reply) > MAX_CPUS:
        raise CpuStatsError(f"{COMMAND}: the reply lists {len(reply)} vCPUs, more than {MAX_CPUS}")
    totals = dict.fromkeys(ALWAYS + OPTIONAL, 0)
    seen: set[int] = set()
    for index, entry in enumerate(reply):
        if not isinstance(entry, dict):
            raise CpuStatsError(f"{COMMAND}: vCPU entry {index} is {_shown(entry)}, not an object")
        if entry.get("type") != LINUX:
            raise CpuStatsError(f"{COMMAND}: vCPU entry {index}: type {_shown(entry.get('type'))}, "
                                f"only {LINUX!r} is read")
        cpu = entry.get("cpu")
        if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
            raise CpuStatsError(f"{COMMAND}: vCPU entry {index}: cpu is {_shown(cpu)}, not a CPU number")
        if cpu in seen:
            raise CpuStatsError(f"{COMMAND}: vCPU entry {index}: cpu {cpu} is listed twice")
        seen.add(cpu)
        for key in ALWAYS:
            if key not in entry:
                raise CpuStatsError(f"{COMMAND}: vCPU entry {index}: no {key}")
        for key in totals:
            totals[key] += _millis(entry, key, index)
    return GuestCpuTimes(
        user=(totals["user"] + totals["nice"]) / 1000.0,
        system=totals["system"] / 1000.0,
        interrupts=(totals["irq"] + totals["softirq"]) / 1000.0,
        idle=(totals["idle"] + totals["iowait"]) / 1000.0,
        steal=totals["steal"] / 1000.0,
    )
