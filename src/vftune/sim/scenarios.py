"""Named scenarios for the simulated host: the built-in TOML files and any the user gives.

The built-ins live in vftune/sim/builtin/*.toml (format: docs/scenarios.md). `register_file`
adds a user's file under the name it declares (a file wins over a built-in of the same name),
so everything that takes a scenario name (run --sim, sim sweep, bench) takes files too.

The built-ins: Wu & Wang's experiment (`paper-Nvm`, N = 1..15, with `paper-3vm-512` for N = 3,
is ONE experiment, 512-byte streams, at 15 sizes; `paper-3vm` is their 15000-byte case), and
hosts a real fleet has: request/response mixes, a busy two-port host, loads that change every
5, 10, 30, 60 and 300 s, bulk TCP with autotuned windows, small request/response tenants on a
saturated port, 44 VFs over two ports, noisy offered loads, small-packet UDP, posted interrupts
and a kernel without IRQ_TIME_ACCOUNTING.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from vftune.sim.scenario_file import ScenarioError, ScenarioFile, load, parse
from vftune.sim.workload import HostSpec

__all__ = ["SCENARIOS", "Scenario", "ScenarioError", "build", "get_scenario", "register_file"]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    build: Callable[[int], HostSpec]
    source: str = "built-in"  # or the file it came from


def _from_file(scenario: ScenarioFile, source: str) -> Scenario:
    return Scenario(scenario.name, scenario.description, scenario.build, source)


def _sort_key(name: str) -> tuple[int, int, str]:
    if name.startswith("paper-") and name.endswith("vm") and name[6:-2].isdigit():
        return (0, int(name[6:-2]), name)
    if name == "paper-3vm-512":
        return (0, 3, "z")
    return (1, 0, name)


def _builtins() -> dict[str, Scenario]:
    found: dict[str, Scenario] = {}
    for entry in resources.files("vftune.sim").joinpath("builtin").iterdir():
        if entry.name.endswith(".toml"):
            scenario = parse(entry.read_text(encoding="utf-8"), f"builtin/{entry.name}")
            found[scenario.name] = _from_file(scenario, "built-in")
    return dict(sorted(found.items(), key=lambda kv: _sort_key(kv[0])))


SCENARIOS: dict[str, Scenario] = _builtins()


def register_file(path: str | Path) -> str:
    """Load a scenario file (ScenarioError when it is unusable) and make its name known."""
    scenario = load(path)
    SCENARIOS[scenario.name] = _from_file(scenario, str(path))
    return scenario.name


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; valid: {', '.join(SCENARIOS)}") from None


def build(name: str, seed: int = 0) -> HostSpec:
    return get_scenario(name).build(seed)
