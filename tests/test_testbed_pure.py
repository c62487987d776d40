"""The testbed's pure parts: percentiles, /proc/stat, objectives with constraints, the search adapter."""

from __future__ import annotations

import contextlib
import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vftune.control.objective import Goal, Objective
from vftune.testbed.adapter import (
    NO_DEFERRAL_CODE,
    KnobSearch,
    KnobSearchConfig,
    knob_for,
    mode_variants,
    run_search,
)
from vftune.testbed.bulk import parse_iperf3
from vftune.testbed.knob import NO_DEFERRAL, Knob, sweep_grid
from vftune.testbed.measure import Measurement, parse_client_output
from vftune.testbed.netns import TestbedError
from vftune.testbed.objective import INFEASIBLE_SCALE, Constrained, best_point, cpu_per_bit, make_objective
from vftune.testbed.procstat import CpuTicks, ProcStatError, cpu_use, parse_proc_stat
from vftune.testbed.run import _judge, _settle
from vftune.testbed.stats import cv, percentile, rel_spread

# ---- percentiles ------------------------------------------------------------------------


def test_percentile_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile(values, 101)


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=300),
       st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_a_seen_value_and_monotone(values: list[float], q1: float, q2: float) -> None:
    values.sort()
    lo, hi = sorted((q1, q2))
    assert percentile(values, lo) in values
    assert percentile(values, lo) <= percentile(values, hi)
    assert percentile(values, 100) == values[-1]


def test_spread_and_cv() -> None:
    assert rel_spread([1.0]) == 0.0
    assert rel_spread([1.0, 1.2, 0.8]) == pytest.approx(0.4)
    assert cv([2.0, 2.0, 2.0]) == 0.0
    assert cv([1.0, 3.0]) == pytest.approx(math.sqrt(2.0) / 2.0)


# ---- /proc/stat -------------------------------------------------------------------------

_TICKS = st.integers(0, 2**40)


def _stat_text(fields: list[int], cpus: int) -> str:
    lines = ["cpu  " + " ".join(map(str, fields))]
    lines += [f"cpu{i} " + " ".join("0" for _ in fields) for i in range(cpus)]
    lines += ["intr 12345 0 0", "ctxt 99", "btime 1700000000", "softirq 1 2 3"]
    return "\n".join(lines) + "\n"


@given(st.lists(_TICKS, min_size=4, max_size=11), st.integers(1, 64))
def test_proc_stat_round_trip(fields: list[int], cpus: int) -> None:
    t = parse_proc_stat(_stat_text(fields, cpus))
    padded = fields + [0] * 8
    assert (t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal) == tuple(padded[:8])
    assert t.cpus == cpus
    assert t.total == t.busy + t.idle + t.iowait + t.steal


@given(st.lists(_TICKS, min_size=8, max_size=8), st.lists(st.integers(0, 10**6), min_size=8, max_size=8),
       st.integers(1, 16))
def test_cpu_use_is_bounded_by_the_cpus(before: list[int], delta: list[int], cpus: int) -> None:
    a = CpuTicks(*before, cpus=cpus)
    b = CpuTicks(*[x + d for x, d in zip(before, delta)], cpus=cpus)
    use = cpu_use(a, b)
    assert 0.0 <= use.softirq <= use.busy <= cpus + 1e-9
    assert 0.0 <= use.steal <= cpus + 1e-9


def test_cpu_use_of_a_known_window() -> None:
    a = parse_proc_stat(_stat_text([100, 0, 50, 800, 0, 0, 10, 0], 2))
    b = parse_proc_stat(_stat_text([200, 0, 100, 1000, 0, 0, 60, 0], 2))
    # 400 ticks elapsed over 2 CPUs: 200 busy ticks = 1 core, 50 softirq ticks = 0.25 core.
    use = cpu_use(a, b)
    assert use.busy == pytest.approx(1.0)
    assert use.softirq == pytest.approx(0.25)


@settings(max_examples=200)
@given(st.text(max_size=200))
def test_proc_stat_garbage_is_one_clear_error(text: str) -> None:
    with contextlib.suppress(ProcStatError):  # anything else escaping fails the test
        parse_proc_stat(text)


@pytest.mark.parametrize("text", ["", "intr 1\n", "cpu  1 2\n", "cpu  1 2 x 4\n", "cpu  1 2 -3 4\n"])
def test_proc_stat_bad_inputs(text: str) -> None:
    with pytest.raises(ProcStatError):
        parse_proc_stat(text)


# ---- knobs and objectives ---------------------------------------------------------------


def test_grid_holds_each_setting_once_with_no_deferral_in_both_modes() -> None:
    grid = sweep_grid((10, 100))
    assert len(grid) == len(set(grid)) == 2 * (1 + 2 * 2)
    assert NO_DEFERRAL in grid and Knob(0, 0, True) in grid
    assert Knob(1, 100_000, True).sysfs() == {"napi_defer_hard_irqs": "1", "gro_flush_timeout": "100000",
                                              "threaded": "1"}


def test_efficiency_objective_prefers_low_cpu_inside_the_bound() -> None:
    obj = make_objective("efficiency", baseline_p99_us=200.0, baseline_cpu=0.3)
    assert obj.objective is Objective.EFFICIENCY and obj.p99_bound_us == 400.0
    points = [("a", 200.0, 0.30), ("b", 390.0, 0.20), ("c", 900.0, 0.10)]
    assert best_point(obj, points) == "b"  # c is cheaper but breaks the bound
    assert obj.ratio(0.20, 0.25) == pytest.approx(0.8)


def test_latency_objective_keeps_cpu_in_budget() -> None:
    obj = make_objective("latency", baseline_p99_us=200.0, baseline_cpu=0.3, cpu_noise=0.1)
    assert obj.cpu_budget == pytest.approx(0.33)
    points = [("none", 200.0, 0.30), ("fast", 150.0, 0.50), ("slow", 400.0, 0.20)]
    assert best_point(obj, points) == "none"  # 'fast' spends more CPU than the budget
    assert best_point(obj, [("fast", 150.0, 0.50)]) is None


def test_the_objectives_are_the_agents_and_throughput_has_no_meaning_at_a_fixed_rate() -> None:
    assert make_objective(Objective.LATENCY, 200.0, 0.3).objective is Objective.LATENCY
    with pytest.raises(ValueError, match="fixed offered rate"):
        make_objective("throughput", 200.0, 0.3)
    with pytest.raises(ValueError, match="choose from"):
        make_objective("fastest", 200.0, 0.3)


@given(st.floats(1, 1e5), st.floats(1e-3, 4), st.floats(1, 1e5), st.floats(1e-3, 4), st.floats(100, 1e5))
def test_any_feasible_throughput_beats_any_infeasible(p1: float, c1: float, p2: float, c2: float,
                                                      rate: float) -> None:
    for obj in (Constrained(Objective.EFFICIENCY, p99_bound_us=500.0), Constrained(Objective.LATENCY, cpu_budget=0.5)):
        s1, s2 = obj.throughput(p1, c1, rate), obj.throughput(p2, c2, rate)
        f1, f2 = obj.feasible(p1, c1), obj.feasible(p2, c2)
        # Feasible throughputs are at least 1e6/1e5 = 10/s here; infeasible ones at most 1e-3 of theirs.
        if f1 and not f2 and (obj.objective is Objective.EFFICIENCY or p1 <= p2 * 100):
            assert s1 > s2
        if not f1 and not f2 and obj.objective is Objective.EFFICIENCY and obj.violation(p1, c1) < obj.violation(p2, c2):
            assert s1 > s2  # graded: less violation scores higher
        assert min(s1, s2) >= 0


def test_throughput_as_the_agent_reads_it() -> None:
    eff = Constrained(Objective.EFFICIENCY, p99_bound_us=500.0)
    assert eff.throughput(400.0, 0.2, 5000.0) == 5000.0  # every setting that keeps up delivers the rate
    assert eff.throughput(1000.0, 0.2, 5000.0) == pytest.approx(5000.0 * INFEASIBLE_SCALE / 2.0)
    lat = Constrained(Objective.LATENCY, cpu_budget=0.3)
    assert lat.throughput(250.0, 0.2, 5000.0) == pytest.approx(4000.0)  # 1e6 / p99
    assert lat.throughput(250.0, 0.6, 5000.0) == pytest.approx(4000.0 * INFEASIBLE_SCALE / 2.0)
    assert lat.throughput(float("nan"), 0.2, 5000.0) == 0.0
    assert cpu_per_bit(0.2, 5000.0, 64) == pytest.approx(0.2 / (5000.0 * 512))
    assert cpu_per_bit(0.0, 5000.0, 64) is None


def test_objective_rejects_bad_constraints() -> None:
    with pytest.raises(ValueError):
        Constrained(Objective.EFFICIENCY)
    with pytest.raises(ValueError):
        Constrained(Objective.THROUGHPUT, p99_bound_us=1.0)


# ---- the adapter against a synthetic system --------------------------------------------


def _synthetic(knob: Knob, rng: random.Random, noise: float = 0.05) -> tuple[float, float, float]:
    """A veth-like trade-off: p99 grows with the timeout, CPU falls and flattens; threads and
    GRO holding alone (defer 0) cost a little more."""
    us = knob.gro_ns / 1000.0
    p99 = 250.0 + 1.6 * us + 30.0 * knob.threaded
    cpu = 0.30 - 0.10 * (1.0 - math.exp(-us / 80.0)) + 0.02 * knob.threaded + 0.01 * (us > 0 and knob.defer == 0)
    return (p99 * rng.uniform(1 - noise, 1 + noise), cpu * rng.uniform(1 - noise / 3, 1 + noise / 3),
            5000.0 * rng.uniform(0.999, 1.001))


def _true_best_efficiency(bound: float) -> float:
    us_max = (bound - 250.0) / 1.6
    return 0.30 - 0.10 * (1.0 - math.exp(-us_max / 80.0))


def test_the_search_is_the_agents_with_the_goals_rules() -> None:
    cfg = KnobSearchConfig()
    for objective in (Objective.EFFICIENCY, Objective.LATENCY):
        search = KnobSearch(objective.value)
        # Built as SearchTuner builds it: the goal's rules over the operator's options.
        expected = Goal(objective).search_config(cfg.tuner_options(objective).search_config())
        assert search.search_config.plateau_margin == expected.plateau_margin
        assert search.search_config.cpu_worth == expected.cpu_worth
        assert search.search_config.max_interval_us == expected.max_interval_us
        assert search.search_config.margin == cfg.margin(objective)
    assert cfg.bracket(Objective.LATENCY)[0] == pytest.approx(Goal(Objective.LATENCY).floor_rate())  # 100 us
    assert cfg.bracket(Objective.EFFICIENCY)[0] == pytest.approx(1e6 / cfg.max_gro_us)


@pytest.mark.parametrize("seed", range(5))
def test_adapter_efficiency_lands_near_the_constrained_best(seed: int) -> None:
    rng = random.Random(seed)
    search = KnobSearch("efficiency")
    choice = run_search(search, lambda k: _synthetic(k, rng))
    assert search.probes <= 12
    p99, cpu, _ = _synthetic(choice, random.Random(0), noise=0.0)
    assert p99 <= 500.0  # twice the no-deferral p99 of 250 us
    assert _true_best_efficiency(500.0) / cpu >= 0.9
    assert search.trace[0]["knob"] == NO_DEFERRAL.label  # cold start: the incumbent first


@pytest.mark.parametrize("seed", range(5))
def test_adapter_latency_finds_the_edge(seed: int) -> None:
    rng = random.Random(seed)
    search = KnobSearch("latency")
    choice = run_search(search, lambda k: _synthetic(k, rng))
    # Every deferral costs latency here: the best is the edge of the range, no deferral,
    # or a timeout so short that its p99 is within the noise of it.
    assert choice == NO_DEFERRAL or choice.gro_ns <= 20_000
    assert search.probes <= 12


def test_adapter_with_an_explicit_bound_and_infeasible_everywhere_but_the_edge() -> None:
    search = KnobSearch("efficiency", latency_bound_us=260.0)
    choice = run_search(search, lambda k: (250.0 + 50.0 * (k.gro_ns > 0), 0.3 - 0.1 * (k.gro_ns > 0), 5000.0))
    assert choice == NO_DEFERRAL


def test_adapter_reaches_a_mode_off_its_axis() -> None:
    """Threaded NAPI is off the axis; when it is clearly better the modes stage finds it."""
    def threads_win(knob: Knob) -> tuple[float, float, float]:
        return (300.0 if knob.threaded else 400.0) + knob.gro_ns / 1000.0, 0.2, 5000.0

    search = KnobSearch("latency")
    choice = run_search(search, threads_win)
    assert search.axis_choice == NO_DEFERRAL and choice == Knob(0, 0, True)
    assert "beat" in search.outcome and search.probes <= 12


def test_modes_of_a_choice() -> None:
    assert mode_variants(NO_DEFERRAL) == [Knob(0, 0, True)]
    assert mode_variants(Knob(1, 50_000)) == [Knob(1, 50_000, True), Knob(0, 50_000), Knob(0, 50_000, True)]


def test_adapter_mapping_and_misuse() -> None:
    assert knob_for(NO_DEFERRAL_CODE) == NO_DEFERRAL
    assert knob_for(10_000) == Knob(1, 100_000)
    search = KnobSearch("efficiency", KnobSearchConfig(baseline_probes=1))
    with pytest.raises(ValueError):
        search.tell(Knob(1, 50_000), 100.0, 0.2, 5000.0)  # the baseline must be no deferral
    search.tell(NO_DEFERRAL, 200.0, 0.3, 5000.0)
    asked = search.ask()
    assert asked is not None and asked != NO_DEFERRAL
    with pytest.raises(ValueError):
        search.tell(Knob(1, 1_000), 100.0, 0.2, 5000.0)  # not what was asked


# ---- tool output parsers -----------------------------------------------------------------


def test_client_output_parse_and_error() -> None:
    doc = {"latency_us_p50": 80.0, "latency_us_p99": 300.0, "rate": 4999.0, "sent": 10000, "received": 9998,
           "cpu": {"busy": 1.2, "softirq": 0.05, "steal": 0.0, "tasks": 0.25}, "series": [[80, 300, 500, 0.25]]}
    m = parse_client_output(NO_DEFERRAL, json.dumps(doc))
    assert (m.p99_us, m.cpu, m.lost) == (300.0, 0.25, 2)
    with pytest.raises(TestbedError, match="unreadable"):
        parse_client_output(NO_DEFERRAL, "Traceback (most recent call last):")


def test_iperf3_parse() -> None:
    doc = {"end": {"sum_received": {"bits_per_second": 4.2e9},
                   "cpu_utilization_percent": {"host_total": 12.5, "remote_total": 40.0}}}
    r = parse_iperf3(NO_DEFERRAL, json.dumps(doc))
    assert (r.gbit_s, r.sender_cpu_pct, r.receiver_cpu_pct) == (4.2, 12.5, 40.0)
    with pytest.raises(TestbedError):
        parse_iperf3(NO_DEFERRAL, "{}")


# ---- judging a choice against the sweep's best --------------------------------------------


def _m(knob: Knob, p99: float, cpu: float) -> Measurement:
    return Measurement(knob, p50_us=p99 / 3, p99_us=p99, rate=5000.0, cpu=cpu, busy=1.0, softirq=0.01,
                       steal=0.0, sent=100, received=100)


def test_judge_scores_side_by_side_and_zeroes_a_broken_constraint() -> None:
    obj = Constrained(Objective.EFFICIENCY, p99_bound_us=500.0)
    best, cheap, slow = Knob(1, 50_000), Knob(1, 100_000), Knob(1, 500_000)
    table = {best: (300.0, 0.20), cheap: (350.0, 0.25), slow: (900.0, 0.10)}
    search = KnobSearch("efficiency")
    probe = lambda k: _m(k, *table[k])  # noqa: E731
    run = _judge(obj, 500.0, cheap, best, search, 12.0, probe, 3)
    assert run.ratio_to_best == pytest.approx(0.8) and run.feasible and run.within_bound
    broken = _judge(obj, 500.0, slow, best, search, 12.0, probe, 3)
    assert broken.ratio_measured == pytest.approx(2.0) and broken.ratio_to_best == 0.0 and not broken.within_bound
    same = _judge(obj, 500.0, best, best, search, 12.0, probe, 2)
    assert same.ratio_to_best == 1.0 and (same.ratio_lo, same.ratio_hi) == (1.0, 1.0)


def test_judge_scores_the_rounds_as_pairs_so_one_quiet_window_of_the_best_does_not_halve_it() -> None:
    obj = Constrained(Objective.EFFICIENCY, p99_bound_us=500.0)
    best, choice = Knob(1, 50_000), NO_DEFERRAL
    # Round 2: the machine is busy for the choice's window and quiet again for the best's.
    cpu = {choice: iter([0.20, 0.40, 0.40]), best: iter([0.20, 0.20, 0.40])}
    run = _judge(obj, 500.0, choice, best, KnobSearch("efficiency"), 1.0, lambda k: _m(k, 300.0, next(cpu[k])), 3)
    assert run.ratio_to_best == pytest.approx(1.0)  # a ratio of the medians would say 0.5
    assert (run.ratio_lo, run.ratio_hi) == (0.5, 1.0)


def test_settle_finds_the_first_steady_slice() -> None:
    steady = [[100.0, 300.0, 500, 0.2]] * 20
    assert _settle(steady) == 0.0
    ramp = [[400.0, 900.0, 500, 0.2]] * 5 + steady[:15]
    assert _settle(ramp) == 0.4  # the three-slice median is steady from slice 4 on
    assert _settle([]) is None


def test_no_deferral_meets_the_constraints_it_defines() -> None:
    obj = Constrained(Objective.LATENCY, cpu_budget=0.20)
    table = {NO_DEFERRAL: (300.0, 0.22), Knob(0, 20_000): (280.0, 0.19)}
    run = _judge(obj, 600.0, NO_DEFERRAL, Knob(0, 20_000), KnobSearch("latency"), 1.0,
                 lambda k: _m(k, *table[k]), 2)
    assert run.feasible and run.ratio_to_best == pytest.approx(280.0 / 300.0)
    explicit = _judge(Constrained(Objective.EFFICIENCY, p99_bound_us=250.0), 250.0, NO_DEFERRAL, Knob(0, 20_000),
                      KnobSearch("efficiency"), 1.0, lambda k: _m(k, *table[k]), 2, explicit_bound=True)
    assert not explicit.feasible and explicit.ratio_to_best == 0.0


def test_one_costly_baseline_window_does_not_make_deferral_look_cheaper() -> None:
    calls = []

    def costly_first(knob: Knob) -> tuple[float, float, float]:
        calls.append(knob)
        cpu = 0.40 if len(calls) == 1 else (0.20 if knob == NO_DEFERRAL else 0.22)
        return 250.0 + knob.gro_ns / 2000.0, cpu, 5000.0

    search = KnobSearch("efficiency")
    assert run_search(search, costly_first) == NO_DEFERRAL  # the better baseline window is the incumbent's
    assert calls[:2] == [NO_DEFERRAL, NO_DEFERRAL] and search.probes <= 12
    assert "CPU per bit" in search.outcome  # the agent's CPU rule kept the incumbent


def test_on_a_kernel_where_deferral_only_costs_noise_rarely_carries_it() -> None:
    """veth as the sweeps measured it: every deferral costs 25% more CPU than none (threads
    more), and a window's CPU reads within a 10% spread (the testbed's measured repeat CV).
    The efficiency rule keeps no deferral unless a setting measures cheaper by more than the
    noise margin; before it did, 7 of these 200 cold searches chose a costlier deferral."""
    def veth(rng: random.Random):
        def measure(knob: Knob) -> tuple[float, float, float]:
            cpu = 0.19 if knob == NO_DEFERRAL else 0.19 * (1.25 + 0.3 * knob.threaded)
            p99 = 300.0 + 1.6 * knob.gro_ns / 1000.0 * knob.defer
            return p99 * rng.uniform(0.9, 1.1), cpu * rng.gauss(1.0, 0.10), 5000.0
        return measure

    costlier = sum(run_search(KnobSearch("efficiency"), veth(random.Random(seed))) != NO_DEFERRAL
                   for seed in range(200))
    assert costlier <= 4  # 2% of cold searches


def test_a_mode_that_wins_one_window_only_is_not_taken() -> None:
    seen: dict[Knob, int] = {}

    def lucky_once(knob: Knob) -> tuple[float, float, float]:
        seen[knob] = seen.get(knob, 0) + 1
        lucky = knob == Knob(0, 0, True) and seen[knob] == 1
        return (300.0 if lucky else 400.0) + knob.gro_ns / 1000.0, 0.2, 5000.0

    search = KnobSearch("latency")
    assert run_search(search, lucky_once) == NO_DEFERRAL
    assert seen[Knob(0, 0, True)] == 2 and "none beat" in search.outcome  # confirmed, and it lost
