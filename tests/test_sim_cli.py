"""`vftune sim list` and `vftune sim sweep` through click, as a user runs them."""

from __future__ import annotations

import json

from click.testing import CliRunner

from vftune.cli import cli
from vftune.sim import DEMO_SCENARIO
from vftune.sim.scenarios import SCENARIOS


def test_list_names_every_scenario_with_a_description() -> None:
    result = CliRunner().invoke(cli, ["sim", "list"])
    assert result.exit_code == 0
    lines = result.output.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(SCENARIOS)
    assert all(len(line.split(None, 1)) == 2 for line in lines)
    for n in range(1, 16):
        assert f"paper-{n}vm" in SCENARIOS
    assert {"paper-3vm-512", "rr-mix", "mixed-host", "phase-change"} <= set(SCENARIOS)


def test_run_without_a_scenario_name_runs_a_built_in_one_its_help_names() -> None:
    assert DEMO_SCENARIO in SCENARIOS
    help_text = " ".join(CliRunner().invoke(cli, ["run", "--help"]).output.split())
    assert f"scenario default: {DEMO_SCENARIO};" in help_text


def test_sweep_json_has_the_documented_shape_and_a_flat_bulk_plateau() -> None:
    result = CliRunner().invoke(cli, ["sim", "sweep", "--scenario", "paper-3vm", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert {"scenario", "points", "best_itr"} <= set(body) and body["scenario"] == "paper-3vm"
    need = {"itr", "interval_us", "throughput_bps", "goodput_bps", "cpu", "interrupts_per_s", "vfs"}
    assert all(need <= set(p) for p in body["points"])
    assert all(len(p["vfs"]) == 3 and need - {"vfs"} <= set(p["vfs"][0]) for p in body["points"])
    itrs = [p["itr"] for p in body["points"]]
    assert itrs == sorted(itrs) and itrs[0] == 956 and itrs[-1] == 488281
    assert body["best_itr"] in itrs
    top = max(p["goodput_bps"] for p in body["points"])
    assert sum(p["goodput_bps"] >= 0.99 * top for p in body["points"]) > len(itrs) // 2


def test_sweep_reports_request_response_latency_per_vf() -> None:
    body = json.loads(CliRunner().invoke(cli, ["sim", "sweep", "--scenario", "rr-mix", "--json"]).output)
    slow, fast = body["points"][0], body["points"][-1]
    assert slow["latency_us_mean"] > fast["latency_us_mean"] and slow["latency_us_p99"] >= slow["latency_us_mean"]
    assert all(v["kind"] == "rr" and v["latency_us_p99"] >= v["latency_us_mean"] for v in slow["vfs"])


def test_sweep_seed_changes_the_numbers() -> None:
    runner = CliRunner()
    a = json.loads(runner.invoke(cli, ["sim", "sweep", "--scenario", "rr-mix", "--json", "--seed", "1"]).output)
    b = json.loads(runner.invoke(cli, ["sim", "sweep", "--scenario", "rr-mix", "--json", "--seed", "2"]).output)
    assert a["points"] != b["points"]


def test_sweep_table_marks_the_best() -> None:
    result = CliRunner().invoke(cli, ["sim", "sweep", "--scenario", "paper-1vm"])
    assert result.exit_code == 0
    assert "best ITR" in result.output and "488281" in result.output


def test_unknown_scenario_is_a_usage_error_naming_it() -> None:
    result = CliRunner().invoke(cli, ["sim", "sweep", "--scenario", "paper-99vm"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "paper-99vm" in lines[0] and "paper-3vm" in lines[0]
