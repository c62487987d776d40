"""The competing-application testbed's pure parts with fixed inputs: the objective that values
the job's progress and the server's goodput, the search on it, the side-by-side trade-off and
its statistics, the CPU group on a fake cgroup tree; and the job's counter through the load
client on loopback (any user)."""

from __future__ import annotations

import json
import math
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from vftune.cli import cli
from vftune.testbed.adapter import KnobSearch, mode_variants, run_search
from vftune.testbed.appjob import AppCounter, AppSpec, CounterReader
from vftune.testbed.cpugroup import CpuGroup
from vftune.testbed.knob import NO_DEFERRAL, Knob, sweep_grid
from vftune.testbed.measure import Measurement, parse_client_output
from vftune.testbed.netns import TestbedError
from vftune.testbed.objective import GOODPUT_MARGIN, Constrained, PointValues, best_point, make_objective
from vftune.testbed.run import Point, _judge, summarise_trade_off, trade_off_targets
from vftune.testbed.stats import paired_ratio, sign_test_p

# ---- the objective ------------------------------------------------------------------------


_POINTS: list[PointValues] = [
    ("none", 500.0, 0.30, 10_000.0, 60_000.0),
    ("mid", 900.0, 0.40, 10_000.0, 75_000.0),
    ("slow", 1500.0, 0.20, 10_000.0, 90_000.0),  # the most job work at the goodput, p99 1.5 ms
    ("drops", 600.0, 0.20, 9_000.0, 95_000.0)]  # more job work still, goodput given up


def test_competing_app_objective_holds_goodput_and_maximises_the_job() -> None:
    obj = make_objective("efficiency", baseline_p99_us=500.0, baseline_cpu=0.3, baseline_rate=10_000.0)
    assert obj.app and obj.p99_bound_us is None and obj.min_rate == pytest.approx(10_000.0 * (1 - GOODPUT_MARGIN))
    assert obj.constraint == "goodput >= 9800/s"
    assert best_point(obj, _POINTS) == "slow"  # the testbed's CPU does not count here, p99 is not bounded
    bounded = make_objective("efficiency", 500.0, 0.3, baseline_rate=10_000.0, latency_bound_us=1000.0)
    assert bounded.constraint == "p99 <= 1000 us, goodput >= 9800/s"
    assert best_point(bounded, _POINTS) == "mid"  # an operator's bound is kept
    assert obj.ratio(obj.value(900.0, 0.4, 75_000.0), obj.value(500.0, 0.3, 60_000.0)) == pytest.approx(0.8)
    assert obj.value(500.0, 0.3, None) == math.inf and math.isnan(obj.search_cost(0.3, 0.0))
    assert obj.throughput(600.0, 0.2, 9_000.0) < 10.0  # the search sees given-up goodput as infeasible


def test_without_a_job_efficiency_is_unchanged() -> None:
    obj = make_objective("efficiency", baseline_p99_us=500.0, baseline_cpu=0.3)
    assert not obj.app and obj.min_rate is None and obj.constraint == "p99 <= 1000 us"
    assert obj.search_cost(0.25, 99.0) == 0.25 and obj.value(400.0, 0.25, 99.0) == 0.25


def test_the_job_is_efficiencys_measure_only() -> None:
    with pytest.raises(ValueError, match="efficiency"):
        Constrained(make_objective("latency", 500.0, 0.3).objective, cpu_budget=0.3, app=True)
    with pytest.raises(ValueError, match="efficiency"):
        KnobSearch("latency", competing_app=True)


# ---- the search on it -----------------------------------------------------------------------


def _shared_cpu(knob: Knob, rng: random.Random, noise: float = 0.05) -> tuple[float, float, float, float]:
    """A receiver CPU shared with a job: every wakeup no deferral costs is the job's, so the job
    gains with the timeout and flattens; p99 grows with it; threads run off the shared CPU but
    queue behind other work."""
    us = knob.gro_ns / 1000.0 * (knob.defer > 0 or knob.threaded)
    ops = 60_000.0 + 25_000.0 * (1.0 - math.exp(-us / 80.0)) + 3_000.0 * knob.threaded
    p99 = 1000.0 + 4.0 * knob.gro_ns / 1000.0 + 800.0 * knob.threaded
    return (p99 * rng.uniform(1 - 2 * noise, 1 + 2 * noise), 0.4 * rng.uniform(0.9, 1.1),
            10_000.0 * rng.uniform(0.999, 1.001), ops * rng.uniform(1 - noise, 1 + noise))


def _ops(knob: Knob) -> float:
    return _shared_cpu(knob, random.Random(0), noise=0.0)[3]


@pytest.mark.parametrize("seed", range(5))
def test_the_search_finds_the_jobs_progress(seed: int) -> None:
    rng = random.Random(seed)
    search = KnobSearch("efficiency", competing_app=True)
    choice = run_search(search, lambda k: _shared_cpu(k, rng))
    assert search.probes <= 12 and choice != NO_DEFERRAL
    assert _ops(choice) / max(_ops(k) for k in sweep_grid() if not k.threaded) >= 0.9
    assert all("app_ops_per_s" in t for t in search.trace)
    assert not any("threaded" in str(t["knob"]) for t in search.trace)  # off the shared CPU: not this case


@pytest.mark.parametrize("seed", range(3))
def test_an_operators_p99_bound_holds_the_search_back(seed: int) -> None:
    rng = random.Random(seed)
    search = KnobSearch("efficiency", latency_bound_us=1600.0, competing_app=True)
    choice = run_search(search, lambda k: _shared_cpu(k, rng))
    assert choice.gro_ns <= 150_000  # 1000 + 4/us stays under 1600 us with the guard


def test_where_deferral_buys_the_job_nothing_no_deferral_stays() -> None:
    """The job's count is flat (within 5% noise) whatever the knob: the search must not carry a
    deferral on noise (the CPU rule's margin is the job's noise margin here)."""
    def flat(rng: random.Random):
        return lambda k: (1000.0 + 2.0 * k.gro_ns / 1000.0, 0.4, 10_000.0, 80_000.0 * rng.gauss(1.0, 0.03))

    moved = sum(run_search(KnobSearch("efficiency", competing_app=True), flat(random.Random(s))) != NO_DEFERRAL
                for s in range(50))
    assert moved <= 2


def test_a_competing_apps_modes_leave_threads_out() -> None:
    assert mode_variants(Knob(1, 200_000), threaded=False) == [Knob(0, 200_000)]
    assert mode_variants(NO_DEFERRAL, threaded=False) == []


def test_a_search_for_the_job_needs_its_count() -> None:
    search = KnobSearch("efficiency", competing_app=True)
    with pytest.raises(ValueError, match="missing"):
        search.tell(NO_DEFERRAL, 500.0, 0.3, 10_000.0)


# ---- the sweep's points, the judge and the trade-off --------------------------------------


def _m(knob: Knob, ops: float, p99: float = 800.0, rate: float = 10_000.0) -> Measurement:
    return Measurement(knob, p50_us=p99 / 4, p99_us=p99, rate=rate, cpu=0.4, busy=1.5, softirq=0.02, steal=0.0,
                       sent=100, received=100, app_ops_per_s=ops)


def test_points_carry_the_jobs_progress() -> None:
    point = Point(Knob(1, 200_000), [_m(Knob(1, 200_000), v) for v in (70_000.0, 80_000.0, 90_000.0)])
    d = point.as_dict()
    assert d["app_ops_per_s"] == 80_000.0 and d["app_spread"] == pytest.approx(0.25)
    assert point.values(True) == (Knob(1, 200_000), 800.0, 0.4, 10_000.0, 80_000.0)
    assert "app_ops_per_s" not in Point(NO_DEFERRAL, [Measurement(NO_DEFERRAL, 1, 2, 3, 0.1, 1, 0, 0, 5, 5)]).as_dict()


def test_judge_scores_the_jobs_progress_side_by_side() -> None:
    obj = make_objective("efficiency", 500.0, 0.3, baseline_rate=10_000.0)
    best, mine = Knob(1, 200_000), Knob(1, 100_000)
    ops = {best: iter([80_000.0, 60_000.0, 82_000.0]), mine: iter([72_000.0, 54_000.0, 77_000.0])}
    run = _judge(obj, 1000.0, mine, best, KnobSearch("efficiency", competing_app=True), 1.0,
                 lambda k: _m(k, next(ops[k])), 3)
    assert run.ratio_to_best == pytest.approx(0.9)  # 72/80, 54/60, 77/82: the median pair
    starved = _judge(obj, 1000.0, mine, best, KnobSearch("efficiency", competing_app=True), 1.0,
                     lambda k: _m(k, 80_000.0, rate=9_000.0 if k == mine else 10_000.0), 2)
    assert not starved.feasible and starved.ratio_to_best == 0.0  # goodput given up


def test_sign_test_and_paired_ratio_with_fixed_inputs() -> None:
    assert sign_test_p(12, 12) == pytest.approx(1 / 4096)
    assert sign_test_p(0, 0) == 1.0 and sign_test_p(6, 12) == pytest.approx(0.6128, abs=1e-4)
    with pytest.raises(ValueError):
        sign_test_p(3, 2)
    got = paired_ratio([110.0, 120.0, 90.0, 130.0], [100.0, 100.0, 100.0, 100.0], seed=1)
    assert got["median_ratio"] == pytest.approx(1.15) and got["wins"] == 3 and got["rounds"] == 4
    assert got["sign_test_p"] == pytest.approx(5 / 16)
    lo, hi = got["ci95"]  # type: ignore[misc]
    assert 0.9 <= lo <= 1.15 <= hi <= 1.3
    assert paired_ratio([110.0, 120.0, 90.0, 130.0], [100.0] * 4, seed=1) == got  # seeded


def test_trade_off_is_measured_only_when_the_rounds_say_so() -> None:
    best = Knob(1, 500_000)
    clear = summarise_trade_off(best, [_m(best, 80_000.0 + 500 * i, 3000.0) for i in range(12)],
                                [_m(NO_DEFERRAL, 63_000.0 + 700 * i) for i in range(12)])
    assert clear["measurably_above"] is True
    assert clear["at_best"]["latency_us_p99"] == 3000.0  # type: ignore[index]
    assert trade_off_targets(clear)[0]["ok"] is True
    coin = [1.05, 0.95] * 6
    noisy = summarise_trade_off(best, [_m(best, 70_000.0 * r) for r in coin], [_m(NO_DEFERRAL, 70_000.0)] * 12)
    assert noisy["measurably_above"] is False and "6 of 12" in str(noisy["why"])
    none = summarise_trade_off(NO_DEFERRAL, [_m(NO_DEFERRAL, 1.0)], [_m(NO_DEFERRAL, 1.0)])
    assert none["measurably_above"] is False


def test_client_output_with_the_jobs_count() -> None:
    doc = {"latency_us_p50": 80.0, "latency_us_p99": 300.0, "rate": 10_000.0, "sent": 100, "received": 100,
           "cpu": {"busy": 1.2, "softirq": 0.05, "steal": 0.0, "tasks": 0.25}, "app_ops_per_s": 81234.5}
    assert parse_client_output(NO_DEFERRAL, json.dumps(doc)).app_ops_per_s == 81234.5
    del doc["app_ops_per_s"]
    assert parse_client_output(NO_DEFERRAL, json.dumps(doc)).app_ops_per_s is None


# ---- the CPU group on fake cgroup trees -----------------------------------------------------


def test_cpu_group_v1_weight_read_back_and_tasks(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.shares").write_text("1024\n")
    group = CpuGroup.create("vftb-x", root=tmp_path)
    assert not group.v2 and (group.path / "cpu.shares").read_text().strip() == str(1024 * 64)
    group.add(4242)
    assert group.pids() == [4242]


def test_cpu_group_v2_and_missing_controller(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory\n")
    group = CpuGroup.create("vftb-y", root=tmp_path)
    assert group.v2 and (group.path / "cpu.weight").read_text().strip() == "6400"
    (tmp_path / "cgroup.subtree_control").write_text("memory\n")
    with pytest.raises(TestbedError, match="not enabled"):
        CpuGroup.create("vftb-z", root=tmp_path)
    with pytest.raises(TestbedError, match="no cgroup cpu controller"):
        CpuGroup.create("vftb-w", root=tmp_path / "nothing")


def test_app_spec_needs_two_cpus() -> None:
    with pytest.raises(ValueError, match="two CPUs"):
        AppSpec(cpu=0, client_cpu=0)


def test_competing_app_bad_values_are_usage_errors() -> None:
    for args in (["--tick-us", "5"], ["--competing-app", "--rate", "-1"]):
        result = CliRunner().invoke(cli, ["testbed", *args])
        assert result.exit_code == 2, args
        assert "Traceback" not in result.output


# ---- the job's own count through the load client (loopback, any user) ---------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_client_reads_the_jobs_count_over_its_window(tmp_path: Path) -> None:
    from vftune.testbed.loadgen import run_client

    counter = AppCounter.create(str(tmp_path))
    cpu = sorted(os.sched_getaffinity(0))[-1]
    job = subprocess.Popen([sys.executable, "-m", "vftune.testbed.appjob", "--counter", str(counter.path),
                            "--cpu", str(cpu)], stdout=subprocess.PIPE, text=True)
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "vftune.testbed.loadgen", "server", "--bind", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert job.stdout is not None and job.stdout.readline().strip() == "ready"
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        reader = CounterReader(str(counter.path))
        first = reader.read()
        res = run_client("127.0.0.1", port, "open", 500.0, 2, 0.1, 0.5, 64, app_counter=str(counter.path))
        assert reader.read() > first  # the job counts on
        reader.close()
        assert float(res["app_ops_per_s"]) > 0  # type: ignore[arg-type]
        assert all(len(s) == 5 for s in res["series"])  # type: ignore[union-attr]  # slices carry it too
    finally:
        for proc in (job, server):
            proc.kill()
            proc.wait(timeout=5)
        counter.remove()


def test_a_search_without_threads_does_not_try_them() -> None:
    """`--no-threaded` and a competing app sweep no threads; the modes stage keeps to the sweep."""
    search = KnobSearch("latency", threaded=False)
    run_search(search, lambda k: (300.0 + k.gro_ns / 1000.0, 0.2, 5000.0))
    assert not any("threaded" in str(t["knob"]) for t in search.trace)


def test_the_job_dies_with_its_parent(tmp_path: Path) -> None:
    """A testbed killed with -9 must not leave its job spinning on the CPU."""
    counter = AppCounter.create(str(tmp_path))
    parent = subprocess.Popen(["sh", "-c", f"{sys.executable} -m vftune.testbed.appjob --counter {counter.path} "
                               f"--cpu {sorted(os.sched_getaffinity(0))[0]} --parent $$ & echo $!; wait"],
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    job = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "ready"  # counting, its parent's death armed
    parent.kill()
    parent.wait(timeout=5)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:  # gone, or a zombie waiting for init to reap it
        try:
            state = Path(f"/proc/{job}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state in ("Z", "X"):
            break
        time.sleep(0.05)
    else:
        os.kill(job, 9)
        pytest.fail("the job outlived its parent by 10 s")
    # A parent that went before the job armed its death signal: the job does not start.
    late = subprocess.run([sys.executable, "-m", "vftune.testbed.appjob", "--counter", str(counter.path),
                           "--cpu", "0", "--parent", "1"], capture_output=True, text=True, timeout=30)
    assert late.returncode == 1 and "ready" not in late.stdout
    counter.remove()
