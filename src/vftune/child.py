"""The command line of a helper process that runs this same vftune (the API process, history
page workers): a fresh interpreter, not a fork of the agent with its threads and locks."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])  # the directory holding vftune/

# glibc gives threads that allocate at once arenas of their own, up to 8 per core, and freed
# memory stays in them: the API process (event loop, link and page-wait threads) held 7 MB more
# at 20 clients than with two (docs/footprint.md, Round 7). An operator's own value wins.
MALLOC_ARENAS = "2"


def python_command(code: str, *args: str) -> list[str]:
    """`python -I -c code PACKAGE_ROOT args...`. -I keeps the working directory and PYTHON*
    variables off the path; this vftune's own directory goes first unless already there, so the
    child runs the agent's own code; -B when the agent itself writes no bytecode (a package's
    tree stays as installed), which -I would otherwise undo."""
    flags = ["-I", "-B"] if sys.dont_write_bytecode else ["-I"]
    prelude = "import sys; r = sys.argv[1]; r in sys.path or sys.path.insert(0, r); "
    return [sys.executable, *flags, "-c", prelude + code, PACKAGE_ROOT, *args]


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a helper process, with glibc's arenas capped unless `env` sets them."""
    return {"MALLOC_ARENA_MAX": MALLOC_ARENAS, **env}
