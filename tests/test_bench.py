"""`vftune bench` on short runs: the JSON contract and what a user reads from it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from vftune.bench import POLICIES, QUICK_SCENARIOS, run, settle
from vftune.bench.oracle import geomean, oracle_plan, vf_merit
from vftune.cli import cli
from vftune.itr import quantize_itr
from vftune.sim.engine import HostSim
from vftune.sim.layout import vf_pci
from vftune.sim.scenarios import build
from vftune.sim.sweep import tunable_vfs

SHORT_S = "300"  # simulated seconds: enough for vftune's cold search to settle on paper-3vm


def bench_json(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["bench", "--json", "--jobs", "1", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_json_lists_every_policy_with_the_documented_scores_and_the_targets():
    body = bench_json("--scenario", "paper-3vm", "--duration", SHORT_S, "--seed", "3")
    results = body["results"]
    assert [r["policy"] for r in results] == list(POLICIES)
    for r in results:
        assert {"scenario", "policy", "throughput_ratio", "vf_geomean", "vf_min", "cpu", "cpu_per_gbps_vs_default",
                "latency_us_mean", "latency_us_p99", "converge_s", "reconverge_s", "changes_per_min"} <= set(r)
        assert r["scenario"] == "paper-3vm" and r["seeds"] == [3]
        assert 0 < r["cpu"] < 1 and r["vf_min"] <= r["vf_geomean"]
    by = {r["policy"]: r for r in results}
    assert by["oracle"]["vf_geomean"] == by["oracle"]["throughput_ratio"] == 1.0
    assert by["default"]["cpu_per_gbps_vs_default"] == 1.0 and by["default"]["vf_cpu_per_bit_vs_default"] == 1.0
    # Each VF's own CPU per bit, from the simulator's per-VF CPU: a fixed 100000/s costs more.
    assert by["fixed-100000"]["vf_cpu_per_bit_vs_default"] > 1.0
    assert by["fixed-20000"]["converge_s"] <= 1 and by["fixed-20000"]["changes_per_min"] == 0
    assert by["vftune"]["unasked_changes"] == 0
    assert body["oracle_warnings"] == []
    # The frontier targets, per family: judged only where the frontier meets the floors.
    names = [t["target"] for t in body["targets"]]
    assert any(n.startswith("built-in: per-VF geomean >= 0.97") for n in names), names
    assert any(n.startswith("built-in: CPU per Gb <= 1.1x the frontier's") for n in names), names
    assert any(n.startswith("built-in: dominates default, fixed-20000, net_dim, bayesopt") for n in names), names
    assert all(run["duration_s"] == 300.0 and run["seed"] == 3 for run in body["runs"])


def test_several_seeds_give_a_mean_and_a_95_percent_interval():
    body = bench_json("--scenario", "rr-mix", "--policy", "fixed-20000", "--duration", "120", "--seeds", "0-2")
    row = next(r for r in body["results"] if r["policy"] == "fixed-20000")
    assert row["seeds"] == [0, 1, 2]
    runs = [r["vf_geomean"] for r in body["runs"] if r["policy"] == "fixed-20000"]
    assert len(runs) == 3 and abs(row["vf_geomean"] - sum(runs) / 3) < 1e-3
    low, high = row["ci95"]["vf_geomean"]
    assert low <= min(runs) <= max(runs) <= high  # t(2) = 4.3: wider than the values themselves


def test_quick_runs_the_small_subset_for_300_simulated_seconds():
    body = bench_json("--quick", "--policy", "fixed-20000")
    assert {r["scenario"] for r in body["results"]} <= set(QUICK_SCENARIOS)
    assert {r["policy"] for r in body["results"]} == {"fixed-20000"}
    assert {r["duration_s"] for r in body["runs"]} == {300.0}


def test_fixed_policies_rank_as_the_steady_state_says():
    rates = (8000, 20000, 100000)
    results = run(["rr-mix"], [f"fixed-{r}" for r in rates], seeds=[0], duration=120, jobs=1)
    measured = [r.vf_geomean for r in results]  # in the order asked: 8000, 20000, 100000
    spec = build("rr-mix", 0)
    sim = HostSim(spec, 0, noise=False)
    best = oracle_plan("rr-mix", 0).phases[0].vfs
    steady = []
    for rate in rates:
        itrs = [quantize_itr(rate)] * len(sim.vfs)
        at = sim.steady_state(0.0, itrs).vfs
        steady.append(geomean([vf_merit(at[i], best[vf_pci(vf.pf, vf.index)].kind) / best[vf_pci(vf.pf, vf.index)].merit
                               for i, vf in enumerate(spec.vfs) if i in tunable_vfs(spec)]))
    assert sorted(range(3), key=measured.__getitem__) == sorted(range(3), key=steady.__getitem__)
    assert all(abs(m - s) < 0.05 for m, s in zip(measured, steady))  # noise moves a run a little


def test_a_phase_change_is_reported_as_reconvergence():
    body = bench_json("--scenario", "phase-change", "--policy", "vftune", "--duration", "420")
    ours = next(r for r in body["results"] if r["policy"] == "vftune")
    # Bulk for 300 s, then request/response: vftune searches again, within the 20-probe target,
    # and its setting then holds to the end of the run.
    assert ours["search_probes_phase"] is not None and ours["search_probes_phase"] <= 20
    assert ours["restarts_load"] >= 1
    assert ours["reconverge_s"] is not None and 0 < ours["reconverge_s"] < 60


def test_an_efficiency_margin_runs_beside_the_named_policies():
    # What a config rule's margin would buy on a host, before an operator sets it:
    # on mixed-host a 25% margin spends less CPU per Gb than the objective's own 10%, and gives
    # up no more than the 25% it allows.
    body = bench_json("--scenario", "mixed-host", "--policy", "vftune-efficiency", "--policy",
                      "vftune-efficiency:0.25", "--duration", "120")
    rows = {r["policy"]: r for r in body["results"]}
    assert list(rows) == ["vftune-efficiency", "vftune-efficiency:0.25"]
    own, wide = rows["vftune-efficiency"], rows["vftune-efficiency:0.25"]
    assert wide["cpu_per_gbps_vs_default"] < own["cpu_per_gbps_vs_default"]
    assert wide["vf_geomean"] >= 0.75 * own["vf_geomean"]


def test_settling_is_the_last_change_before_a_quiet_minute():
    assert settle([], 0.0, 600.0).at == 0.0
    s = settle([5.0, 10.0, 14.0, 300.0], 0.0, 600.0)
    assert (s.at, s.changes, s.steady_changes) == (14.0, 3, 1)
    assert settle([float(t) for t in range(0, 600, 30)], 0.0, 600.0).at is None  # never quiet a minute


def test_a_phase_shorter_than_two_holds_settles_on_a_quiet_half():
    # A 10-s phase: a last change 3 s in, quiet for the remaining 7 s, has settled ...
    assert settle([12.0, 13.0], 10.0, 20.0).at == 3.0
    # ... one searching from 2 s to 8 s, quiet for at most 4 s, has not.
    assert settle([12.0, 14.0, 16.0, 18.0], 10.0, 20.0).at is None
    # A periodic restart late in a 25-s phase, after a recall held half of it, is a steady change ...
    s = settle([601.0, 624.5], 600.0, 625.0)
    assert (s.at, s.steady_changes) == (1.0, 1)
    # ... but quiet before the first change is a policy that has not acted yet, not a hold.
    assert settle([603.5, 604.5], 600.0, 605.0).at is None
    assert settle([], 600.0, 605.0).at == 0.0
    # Quiet 55 s is half of a 100-s phase, but not a full hold in a 150-s one.
    assert settle([40.0, 45.0], 0.0, 100.0).at == 45.0
    assert settle([40.0, 95.0], 0.0, 150.0).at is None


def test_the_guests_own_adaptive_itr_moves_the_rate_but_not_the_setting():
    # Untuned, every VF runs its adaptive ITR: the rate it delivers moves, the host's setting
    # never does, so the default has settled from the start and changes nothing after.
    body = bench_json("--scenario", "phase-change", "--policy", "default", "--duration", "60")
    default = next(r for r in body["results"] if r["policy"] == "default")
    assert default["converge_s"] == 0 and default["changes_per_min"] == 0
    assert default["itr_moves_per_min"] > 0


def test_usage_errors_name_the_value_and_exit_2():
    runner = CliRunner()
    for args, needle in ((["--scenario", "paper-99vm"], "paper-99vm"), (["--policy", "magic"], "magic"),
                         (["--duration", "5"], "'--duration': 5 is out"), (["--jobs", "0"], "'--jobs': 0 is out"),
                         (["--seeds", "4-1"], "4-1"), (["--seeds", "x"], "'x'"), (["--seed", "1", "--seeds", "0-2"], "--seeds"),
                         (["--policy", "vftune-efficiency:0.9"], "0..0.5"), (["--policy", "vftune-latency:0.05"], "latency:0.05"),
                         (["--policy", "vftune-efficiency:lots"], "lots"), (["--policy", "frontier:9999"], "9999")):
        result = runner.invoke(cli, ["bench", *args])
        assert result.exit_code == 2, (args, result.output)
        assert needle in result.output


def test_vftune_tunes_an_overloaded_udp_receiver_on_what_its_application_gets(tmp_path):
    """udp-small's 64-byte receiver takes everything off its ring at every rate, but its
    application gets almost nothing unless the NIC drops the excess first (the lowest rate).
    With the guests' agents reporting socket drops vftune finds that; on a host without them
    it sees flat counters and cannot."""
    from importlib import resources

    from vftune.bench.harness import run_pair
    from vftune.sim.scenarios import register_file

    text = (resources.files("vftune.sim") / "builtin" / "udp-small.toml").read_text(encoding="utf-8")
    text = text.replace('name = "udp-small"', 'name = "udp-small-blind"').replace("[host]\n", "[host]\nguest_agent = false\n")
    (tmp_path / "blind.toml").write_text(text, encoding="utf-8")
    blind_name = register_file(tmp_path / "blind.toml")
    pci = "0000:03:10.0"
    seeing = run_pair("udp-small", "vftune", seed=6, duration=120.0)
    blind = run_pair(blind_name, "vftune", seed=6, duration=120.0)
    default = run_pair("udp-small", "default", seed=6, duration=120.0)
    got = {name: r.cells[(pci, 0)].merit for name, r in
           (("seeing", seeing), ("blind", blind), ("default", default))}
    assert got["seeing"] > 1.5 * got["blind"] and got["seeing"] > 1.5 * got["default"]


LATE_START = """
name = "late-start"
description = "two tenants whose loads begin 20 s in; no cycle, so that phase holds to the end"
duration_s = 120
[host]
ports = 1
[[guest]]
name = "a"
[[guest]]
name = "b"
[[vf]]
guest = "a"
[[vf.phase]]
at_s = 20
kind = "tcp"
[[vf]]
guest = "b"
[[vf.phase]]
at_s = 20
kind = "rr"
"""

ALL_IDLE = """
name = "all-idle"
description = "a guest that never sends"
duration_s = 60
[host]
ports = 1
[[guest]]
name = "a"
[[vf]]
guest = "a"
[[vf.phase]]
kind = "idle"
"""


def test_a_load_that_starts_late_without_a_cycle_is_scored_against_its_own_phase(tmp_path):
    """Without cycle_s a file's later phases occur once and hold: each is a segment of its own,
    scored against that phase's oracle, and the first search counts as settling after a change."""
    path = tmp_path / "late.toml"
    path.write_text(LATE_START, encoding="utf-8")
    body = bench_json("--scenario-file", str(path), "--policy", "vftune", "--policy", "fixed-20000")
    rows = {r["policy"]: r for r in body["results"]}
    # Before this was fixed the whole run was scored against the idle first phase: no score.
    assert rows["vftune"]["vf_geomean"] is not None and rows["vftune"]["vf_geomean"] > 0.9
    assert rows["fixed-20000"]["vf_geomean"] is not None
    assert rows["vftune"]["converge_s"] == 0.0  # nothing was busy at the start
    assert rows["vftune"]["reconverge_s"] is not None and 0 < rows["vftune"]["reconverge_s"] < 60
    names = [t["target"] for t in body["targets"]]
    assert any(n.startswith("cold convergence") for n in names)


def test_a_host_that_carries_nothing_has_no_per_vf_or_cpu_target_to_fail(tmp_path):
    path = tmp_path / "idle.toml"
    path.write_text(ALL_IDLE, encoding="utf-8")
    body = bench_json("--scenario-file", str(path), "--policy", "vftune")
    ours = next(r for r in body["results"] if r["policy"] == "vftune")
    assert ours["vf_geomean"] is None and ours["cpu_per_gbps_vs_default"] is None
    names = [t["target"] for t in body["targets"]]
    assert not any(n.startswith(("per-VF geomean", "never below", "CPU per Gb")) for n in names)
    assert all("None" not in t["detail"] for t in body["targets"])


def test_ablate_list_names_every_mechanism_and_an_unknown_one_is_refused_in_one_line():
    from vftune.bench.ablation import MECHANISMS

    listed = CliRunner().invoke(cli, ["bench", "--ablate", "list"])
    assert listed.exit_code == 0
    rows = listed.output.strip().splitlines()
    assert [r.split()[0] for r in rows] == [m.name for m in MECHANISMS]
    assert all(m.what in r for m, r in zip(MECHANISMS, rows))
    unknown = CliRunner().invoke(cli, ["bench", "--ablate", "nope"])
    assert unknown.exit_code == 2
    assert unknown.output.strip().splitlines() == [
        "vftune: --ablate: unknown mechanism 'nope'; known: " + ", ".join(m.name for m in MECHANISMS)
        + " (--ablate list)"]
