"""A CPU cgroup for the competing-application testbed: its tasks ahead of the machine's other work.

On a machine shared with other work, the kernel's autogroups give every login session an equal
share of a CPU whatever its tasks' nice values, so a nice -20 server and a nice -10 job still get
only a session's share of their CPU, and how much that is moves with everyone else's load (measured
here: the job ran 14-29% of its CPU's time, waiting the rest). Inside one cgroup the nice values
rank the group's own tasks again (server over job), and the group's weight puts it ahead of the
sessions: what the job loses is then mostly what the network work on its CPU takes, the quantity
the testbed measures. cgroup v1 (``cpu.shares``, the ``cpu`` hierarchy) or v2 (``cpu.weight``).
The group is made per run under a unique name, its weight read back, and removed at teardown
(its tasks moved back to the root group first).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from vftune.testbed.netns import TestbedError

CGROUP_ROOT = Path("/sys/fs/cgroup")
# 64 times a session's weight: ~95% of a CPU against three busy sessions on it.
WEIGHT_FACTOR = 64


@dataclass
class CpuGroup:
    path: Path
    root: Path
    v2: bool

    @classmethod
    def create(cls, name: str, root: Path = CGROUP_ROOT) -> CpuGroup:
        v1 = root / "cpu"
        if (v1 / "cpu.shares").exists():
            base, v2, attr, value = v1, False, "cpu.shares", 1024 * WEIGHT_FACTOR
        elif "cpu" in _read(root / "cgroup.controllers").split():
            base, v2, attr, value = root, True, "cpu.weight", min(10_000, 100 * WEIGHT_FACTOR)
            if "cpu" not in _read(root / "cgroup.subtree_control").split():
                raise TestbedError(f"cgroup v2 at {root}: the cpu controller is not enabled for child groups")
        else:
            raise TestbedError(f"no cgroup cpu controller under {root} (v1 cpu/cpu.shares or v2 cpu)")
        path = base / name
        try:
            path.mkdir()
        except OSError as exc:
            raise TestbedError(f"cannot create cgroup {path}: {exc}") from None
        group = cls(path, base, v2)
        try:
            (path / attr).write_text(f"{value}\n")
            got = _read(path / attr).strip()
        except OSError as exc:
            group.remove()
            raise TestbedError(f"{path / attr}: {exc}") from None
        if got != str(value):
            group.remove()
            raise TestbedError(f"{path / attr}: wrote {value}, read back {got}")
        return group

    def add(self, pid: int) -> None:
        try:
            (self.path / "cgroup.procs").write_text(f"{pid}\n")
        except ProcessLookupError:
            return  # it has exited already: nothing to place
        except OSError as exc:
            raise TestbedError(f"cannot move pid {pid} into {self.path}: {exc}") from None

    def pids(self) -> list[int]:
        return [int(p) for p in _read(self.path / "cgroup.procs").split()]

    def remove(self) -> None:
        """Idempotent: move what is left to the root group, then remove the group."""
        if not self.path.exists():
            return
        for pid in self.pids():
            with contextlib.suppress(OSError):
                (self.root / "cgroup.procs").write_text(f"{pid}\n")
        with contextlib.suppress(OSError):
            os.rmdir(self.path)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
