"""The command line of a helper process that runs this same vftune (the API process, history
page workers): a fresh interpreter, not a fork of the agent with its threads and locks."""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])  # the directory holding vftune/


def python_command(code: str, *args: str) -> list[str]:
    """`python -I -c code PACKAGE_ROOT args...`. -I keeps the working directory and PYTHON*
    variables off the path; this vftune's own directory goes first unless already there, so the
    child runs the agent's own code; -B when the agent itself writes no bytecode (a package's
    tree stays as installed), which -I would otherwise undo."""
    flags = ["-I", "-B"] if sys.dont_write_bytecode else ["-I"]
    prelude = "import sys; r = sys.argv[1]; r in sys.path or sys.path.insert(0, r); "
    return [sys.executable, *flags, "-c", prelude + code, PACKAGE_ROOT, *args]
