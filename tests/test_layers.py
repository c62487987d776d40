"""The package's layers, read from the source: no module imports upward.

The control logic is pure (no clock, file, socket or process), so the tick loop, the simulator
and the bench drive the same code; the simulator does not import the agent it is a host for;
the records that cross layers depend on nothing above them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "vftune"

# What the control logic may import: computation only. Everything else of the standard library
# (os, time, socket, sqlite3, subprocess, logging, pathlib ...) is a clock, a file or a process.
CONTROL_STDLIB = {"__future__", "bisect", "collections", "dataclasses", "enum", "functools", "hashlib",
                  "itertools", "math", "operator", "statistics", "threading", "typing"}
CONTROL_VFTUNE = {"vftune.control", "vftune.model", "vftune.itr"}


def imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth of the file (function-level imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names if node.module == "vftune")
    return found


def package_files(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


def within(module: str, packages: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


@pytest.mark.parametrize("path", package_files("control"), ids=lambda p: p.name)
def test_the_control_logic_imports_no_clock_file_socket_or_layer_above_it(path: Path) -> None:
    bad = sorted(m for m in imports(path)
                 if (m.startswith("vftune") and not within(m, CONTROL_VFTUNE))
                 or (not m.startswith("vftune") and m.split(".")[0] not in CONTROL_STDLIB))
    assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_the_simulator_does_not_import_the_agent_or_anything_that_runs_it() -> None:
    above = {"vftune.agent", "vftune.api", "vftune.cli", "vftune.bench", "vftune.testbed"}
    bad = {str(p.relative_to(SRC)): sorted(m for m in imports(p) if within(m, above))
           for p in package_files("sim")}
    assert not {k: v for k, v in bad.items() if v}


@pytest.mark.parametrize("name", ["model.py", "itr.py"])
def test_the_records_that_cross_layers_depend_on_nothing_above_them(name: str) -> None:
    bad = sorted(m for m in imports(SRC / name) if m.startswith("vftune") and m != "vftune.itr")
    assert not bad


def test_the_store_and_the_host_drivers_do_not_import_the_agent_or_the_control_logic() -> None:
    above = {"vftune.agent", "vftune.control", "vftune.api", "vftune.cli", "vftune.bench"}
    bad = {str(p.relative_to(SRC)): sorted(m for m in imports(p) if within(m, above))
           for p in package_files("store") + package_files("hostdriver")}
    assert not {k: v for k, v in bad.items() if v}


def test_the_standard_library_list_names_real_modules() -> None:
    # A misspelt allowance would pass anything under that name.
    assert not CONTROL_STDLIB - set(sys.stdlib_module_names) - {"__future__"}
