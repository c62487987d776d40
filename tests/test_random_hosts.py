"""bench/random_hosts.py draws hosts nobody wrote a scenario for: every draw must be a valid
scenario file, or the script reports the format's errors instead of the tuner's."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

from vftune.sim.scenario_file import load

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "random_hosts.py"


def _random_host():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("random_hosts", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.random_host


def test_every_drawn_host_is_a_valid_scenario_file(tmp_path: Path) -> None:
    random_host = _random_host()
    for i in range(60):
        path = tmp_path / f"random-{i}.toml"
        path.write_text(random_host(f"random-{i}", random.Random(i)), encoding="utf-8")
        scenario = load(path)
        assert scenario.name == f"random-{i}" and scenario.vfs
        scenario.build(seed=i)  # and makes a host
