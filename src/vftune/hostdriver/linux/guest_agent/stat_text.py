"""A guest's /proc/stat text: the CPU time its own work got.

The first line sums every CPU's time in USER_HZ ticks (fs/proc/stat.c): ``cpu  user nice system
idle iowait irq softirq steal guest guest_nice``. The guest's own work, what its applications
and its system calls ran, is user + nice + system; irq and softirq are the time its interrupts
and their softirqs (the network's receive work among them) took first. USER_HZ is 100 on every
architecture a KVM guest of an x86 host runs.

The text comes from a guest, so anything may arrive: the parser raises only StatTextError,
whose message is one line naming the file, the line number and the line.
"""

from __future__ import annotations

from vftune.hostdriver.base import HostError

STAT_PATH = "/proc/stat"
USER_HZ = 100
WORK_FIELDS = 3  # user, nice, system: the first three counts of the "cpu" line
_SHOWN = 80  # characters of a bad line quoted in the message


class StatTextError(HostError):
    """The text is not what the guest kernel prints; the message is one line."""


def parse_work_seconds(text: str, source: str = STAT_PATH) -> float:
    """Cumulative seconds the guest's CPUs spent on its own work (user + nice + system)."""
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or parts[0] != "cpu":
            continue
        counts = parts[1:]
        if len(counts) < WORK_FIELDS:
            raise _fail(source, number, line, f"{len(counts)} counts, expected at least {WORK_FIELDS}")
        ticks = 0
        for raw in counts[:WORK_FIELDS]:
            if not (raw.isascii() and raw.isdigit()):
                raise _fail(source, number, line, f"{raw!r} is not a counter")
            ticks += int(raw)
        return ticks / USER_HZ
    raise StatTextError(f"{source}: no 'cpu' line (is this /proc/stat?)")


def _fail(source: str, number: int, line: str, why: str) -> StatTextError:
    shown = line if len(line) <= _SHOWN else line[:_SHOWN] + "..."
    return StatTextError(f"{source}: line {number}: {shown!r}: {why}")
