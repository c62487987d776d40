"""Worker processes that end with the process that started them (Linux prctl PR_SET_PDEATHSIG).

A pool's workers outlive a parent killed by SIGTERM or SIGKILL: nothing in the parent runs to
stop them, and they go on burning CPU. The kernel's parent-death signal ends them instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def end_with_parent(parent_pid: int) -> None:
    """Pool initializer: SIGKILL this process when its parent dies; if it already has, exit now."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # not Linux, or refused: the worker lives as before
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
