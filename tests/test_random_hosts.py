"""Random hosts (vftune.bench.random_hosts) are drawn from a table of kinds and keys: every
draw must be a valid scenario file, the same seed must give the same host, and every key the
scenario format has must be drawn (or the bench never puts it in front of a policy)."""

from __future__ import annotations

import random
import tomllib
from pathlib import Path

from vftune.bench import random_hosts
from vftune.sim import scenario_file
from vftune.sim.scenario_file import load


def test_every_drawn_host_is_a_valid_scenario_file(tmp_path: Path) -> None:
    for i in range(60):
        path = tmp_path / f"random-{i}.toml"
        path.write_text(random_hosts.random_host(f"random-{i}", random.Random(i)), encoding="utf-8")
        scenario = load(path)
        assert scenario.name == f"random-{i}" and scenario.vfs
        scenario.build(seed=i)  # and makes a host


def test_the_same_seed_draws_the_same_hosts_and_another_seed_others() -> None:
    first = [random_hosts.draw(7, i) for i in range(5)]
    assert first == [random_hosts.draw(7, i) for i in range(5)]
    assert len(set(first)) == 5
    assert all(a != b for a, b in zip(first, (random_hosts.draw(8, i) for i in range(5))))


def test_every_kind_and_key_of_the_format_is_in_the_table() -> None:
    assert set(scenario_file.KINDS) <= set(random_hosts.KINDS)
    drawn = {k.name for keys in random_hosts.KINDS.values() for k in keys}
    for section in (random_hosts.HOST, random_hosts.NOISE, random_hosts.GUEST, random_hosts.VF):
        drawn |= {k.name for k in section}
    known = (scenario_file.TOP_KEYS | scenario_file.HOST_KEYS | scenario_file.NOISE_KEYS | scenario_file.GUEST_KEYS
             | scenario_file.VF_KEYS | scenario_file.PHASE_KEYS)
    assert known - drawn - random_hosts.NOT_DRAWN == set()


def test_the_draws_cover_every_kind_the_format_has() -> None:
    seen: set[str] = set()
    for i in range(40):
        doc = tomllib.loads(random_hosts.draw(0, i))
        seen |= {p["kind"] for vf in doc["vf"] for p in vf["phase"]}
    assert seen == set(scenario_file.KINDS)
