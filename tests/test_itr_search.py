"""ItrSearch on known curves: direction, probe count, noise, plateau, do-no-harm, brackets."""

from __future__ import annotations

import math
import random

import pytest

from vftune.bench.peers.paper import PaperSearch
from vftune.control.itr_search import ItrSearch, SearchConfig
from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE, quantize_itr


def peak_curve(peak: float, width: float = 1.0):
    """Unimodal in log rate, maximum 1.0 at ``peak``."""
    return lambda r: math.exp(-((math.log(r / peak) / width) ** 2))


def run(search: ItrSearch, f, noise: float = 0.0, seed: int = 0, incumbent_value: float = 0.5,
        phases: list[str] | None = None) -> ItrSearch:
    """Drive a search to the end; `phases` collects the search's phase at every probe."""
    rng = random.Random(seed)
    while (itr := search.ask()) is not None:
        if phases is not None:
            phases.append(search.phase)
        true = incumbent_value if itr == 0 else f(itr)
        search.tell(itr, true * (1.0 + rng.gauss(0.0, noise)))
    return search


@pytest.mark.parametrize("peak", [2_000, 12_000, 48_000, 150_000])
def test_finds_the_maximum_from_either_side_in_few_probes(peak):
    s = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000), peak_curve(peak))
    assert s.converged
    # Within the final 20% bracket of the true peak, in well under the 15-probe budget.
    assert abs(math.log(s.best / peak)) < math.log(1.25)
    assert s.probes <= 12
    # One new measurement per step: on a noise-free curve a rate is measured again only as the
    # confirmation of the answer or because it measured within the noise margin of another.
    first: dict[int, float] = {}
    for p in s.history:
        first.setdefault(p.itr, p.throughput)
    rates = [p.itr for p in s.history]
    for rate in {r for r in rates if rates.count(r) > 1}:
        assert rates.count(rate) == 2
        close = [o for o in first if o != rate and abs(first[o] / first[rate] - 1.0) <= s.margin]
        assert rate == s.best or close, f"{rate}/s measured twice with no neighbour within the margin"


def test_log_space_beats_the_linear_papers_step_count():
    # The paper's search as printed (two fresh probes per step, linear bracket) on the same curve.
    f = peak_curve(3_000)
    paper = PaperSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000)
    while (itr := paper.ask()) is not None:
        paper.tell(itr, f(itr))
    ours = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000), f)
    assert ours.probes * 2 <= paper.probes


def test_monotone_curves_end_at_the_right_edge():
    rising = run(ItrSearch(1000, 100_000, 100), lambda r: r / 100_000)
    falling = run(ItrSearch(1000, 100_000, 100), lambda r: 1000 / r)
    assert rising.best > 80_000
    assert falling.best < 1_300


def test_noise_does_not_send_it_away_from_the_peak():
    f = peak_curve(48_000, width=1.5)
    results = []
    for seed in range(40):
        s = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(quantize=quantize_itr)), f, noise=0.02, seed=seed)
        results.append((f(s.best), s.probes))
    assert sum(v for v, _ in results) / len(results) > 0.98
    assert min(v for v, _ in results) > 0.90
    assert max(p for _, p in results) <= 15


def test_differences_inside_the_margin_are_measured_again():
    # Both first interior points measure within 1%: the search re-measures before cutting.
    values = {}

    def f(r):
        return values.setdefault(r, 1.0 + 0.005 * (len(values) % 2))

    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(margin=0.02, max_repeats=3))
    first, second = s.ask(), None
    s.tell(first, f(first))
    second = s.ask()
    s.tell(second, f(second))
    third = s.ask()
    assert third in (first, second)  # a repeat, not a new point


def test_plateau_answers_the_lowest_rate_within_margin_above_the_latency_floor():
    # Flat from 5000/s up, falling below: the lowest rate keeping throughput is ~5000/s.
    def f(r):
        return 1.0 if r >= 5000 else (r / 5000) ** 0.5

    s = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 500), f)
    assert 4000 <= s.best <= 8000
    # A latency floor of 100 us (10000/s) wins over the plateau's low end.
    floored = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 500, SearchConfig(max_interval_us=100.0)), f)
    assert floored.best >= 10_000
    assert f(floored.best) >= 0.99


def test_do_no_harm_keeps_a_better_incumbent():
    # The incumbent (adaptive, 0) measures better than anything the curve offers.
    s = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=0), peak_curve(40_000), incumbent_value=1.2)
    assert s.history[0].itr == 0  # measured first
    assert s.best == 0
    assert s.outcome.startswith("kept incumbent adaptive")


def test_do_no_harm_adopts_a_better_result_and_reports_the_gain():
    s = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=0), peak_curve(40_000), incumbent_value=0.8)
    assert s.best != 0
    assert "vs incumbent" in s.outcome and "+" in s.outcome


def test_a_lucky_sample_is_confirmed_before_it_is_adopted():
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=20_000, incumbent_throughput=1.0)
    f = peak_curve(30_000)
    lucky = None
    while (itr := s.ask()) is not None:
        value = f(itr)
        if lucky is None and s.phase == "search" and s.probes >= 3:
            lucky, value = itr, 5.0  # one wild measurement
        s.tell(itr, value)
    # The wild point was measured again, and its worse second measurement kept it from winning.
    assert lucky is not None
    assert sum(1 for p in s.history if p.itr == lucky) == 2
    assert s.best != lucky and f(s.best) > 0.99


def test_tell_must_match_ask_and_bad_input_is_named():
    s = ItrSearch(1000, 100_000, 1000)
    with pytest.raises(ValueError, match="does not match"):
        s.tell(s.ask() + 1, 1.0)
    with pytest.raises(ValueError, match="throughput"):
        s.tell(s.ask(), float("nan"))
    with pytest.raises(ValueError, match="high must be above low"):
        ItrSearch(5000, 1000, 100)
    with pytest.raises(ValueError, match="tolerance"):
        ItrSearch(1000, 5000, 0)


def test_quantized_probes_are_rates_the_hardware_delivers():
    s = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(quantize=quantize_itr)), peak_curve(300_000))
    assert all(quantize_itr(p.itr) == p.itr for p in s.history)
    # 300000/s is not a step; the best steps around it are 244141 (2) and 488281 (1) or 162760 (3).
    assert s.best in (162_760, 244_141)


def test_a_probe_budget_bounds_every_search_even_under_noise():
    f = peak_curve(40_000)
    rng = random.Random(1)
    for budget in (6, 10, 15):
        s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(max_probes=budget, quantize=quantize_itr))
        while (itr := s.ask()) is not None:
            s.tell(itr, f(itr) * (1.0 + rng.gauss(0.0, 0.03)))
        assert s.converged and s.probes <= budget
        assert f(s.best) > 0.95  # a short budget still lands near the top
    with pytest.raises(ValueError, match="max_probes"):
        ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(max_probes=2))


def test_edge_probes_walk_a_wide_plateau_down_towards_its_low_edge():
    # Flat from 5000/s up; a coarse stop rule leaves the answer well above the edge.
    def f(r):
        return 1.0 if r >= 5000 else (r / 5000) ** 0.5

    plain = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 500, SearchConfig(rel_tolerance=0.9, max_edge_probes=0)), f)
    edge_phases: list[str] = []
    edged = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 500, SearchConfig(rel_tolerance=0.9, max_edge_probes=2)), f,
                phases=edge_phases)
    assert edged.best < plain.best  # fewer interrupts ...
    assert f(edged.best) >= 0.99  # ... for the same throughput
    assert 1 <= edge_phases.count("edge") <= 2
    assert edged.probes - plain.probes <= 2


def test_on_a_peak_the_edge_walk_does_not_start():
    # A peak's top is no wider than the final bracket: nothing to walk down.
    phases: list[str] = []
    peaked = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000), peak_curve(48_000), phases=phases)
    assert "edge" not in phases
    assert peaked.converged


def test_more_interrupts_must_gain_more_than_the_noise_margin():
    def bump(height):
        return lambda r: height * math.exp(-((math.log(r / 60_000) / 0.5) ** 2))

    def with_incumbent(f):
        return lambda r: 1.0 if r == 20_000 else f(r)  # the incumbent measures 1.0, re-measured too

    # 60000/s measures 1.5% over the incumbent's 20000/s: inside the 2% margin, keep 20000.
    small = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=20_000, incumbent_throughput=1.0),
                with_incumbent(bump(1.015)))
    assert small.best == 20_000 and "inside the 2% noise margin" in small.outcome
    # A 5% gain is worth the interrupts.
    large = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=20_000, incumbent_throughput=1.0),
                with_incumbent(bump(1.05)))
    assert large.best > 40_000 and "vs incumbent" in large.outcome
    # The adaptive ITR has no rate of its own: its measured interrupt rate stands for it.
    adaptive = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=0, incumbent_throughput=1.0,
                             incumbent_cost=12_000), bump(1.015), incumbent_value=1.0)
    assert adaptive.best == 0


@pytest.mark.parametrize(("peak", "kept"), [(60_000, True), (4_000, False)])
def test_the_adaptive_itrs_told_interrupt_rate_is_its_cost(peak, kept):
    # A cold search is not given the adaptive ITR's cost: it learns it from the interrupt
    # rates told with the incumbent's windows (6000/s here). A rate above it that gains 1.5%
    # (inside the noise margin) is no decision; a cheaper one that holds the throughput is.
    def drive(search):
        while (itr := search.ask()) is not None:
            value = 1.0 if itr == 0 else 1.0 + 0.015 * peak_curve(peak, 0.5)(itr)
            search.tell(itr, value, interrupt_rate=6_000.0 if itr == 0 else min(itr, 30_000.0))
        return search

    s = drive(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=0))
    assert s.incumbent_cost == pytest.approx(6_000.0)
    assert (s.best == 0) is kept
    if kept:
        assert "inside the 2% noise margin" in s.outcome
    # A cost the caller gives is not replaced by the rates told.
    given = drive(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=0, incumbent_cost=100_000))
    assert given.incumbent_cost == 100_000 and given.best != 0


def test_a_lucky_incumbent_measurement_is_checked_before_it_vetoes():
    f = peak_curve(40_000)

    def drive(search, incumbent_values):
        values = iter(incumbent_values)
        while (itr := search.ask()) is not None:
            search.tell(itr, next(values) if itr == 0 else f(itr))
        return search

    checked = drive(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=0), [1.2, 0.6])
    assert [p.itr for p in checked.history].count(0) == 2
    assert checked.best != 0  # the mean of the two (0.9) loses to the search's ~0.99
    unchecked = drive(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(recheck_incumbent=False), incumbent=0), [1.2])
    assert unchecked.best == 0


def test_a_point_is_credited_with_its_lowest_measurement():
    # Two first points within the margin: the search measures one of them again.
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(margin=0.02))
    first = s.ask()
    s.tell(first, 1.0)
    second = s.ask()
    s.tell(second, 1.01)
    again = s.ask()
    assert again in (first, second)
    told = {first: 1.0, second: 1.01}[again]
    s.tell(again, told * 1.3)  # a burst lifted the repeat's window
    assert s.score(again) == told  # the burst does not raise its claim
    assert s.mean(again) == pytest.approx(told * 1.15)


def test_without_pessimism_a_point_is_credited_with_its_mean():
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(margin=0.02, pessimistic=False))
    first = s.ask()
    s.tell(first, 1.0)
    second = s.ask()
    s.tell(second, 1.01)
    again = s.ask()
    told = {first: 1.0, second: 1.01}[again]
    s.tell(again, told * 1.3)
    assert s.score(again) == pytest.approx(told * 1.15)


def test_an_edge_that_measures_worse_falls_back_to_the_lowest_rate_holding_the_throughput():
    def ramp(r):  # rises to a plateau at 1.0 from 12000/s
        return min(1.0, (r / 12_000) ** 0.3)

    s = run(ItrSearch(5_000, 60_000, 200, incumbent=20_000, incumbent_throughput=1.0), ramp)
    # The plateau's edge (within the 2% noise margin) measures >0.5% below the incumbent, so it
    # is not adopted; the cheapest rate that holds the incumbent's throughput still is.
    assert any(0.98 <= p.throughput < 0.995 for p in s.history)
    assert 11_000 <= s.best < 14_000  # cheaper than the incumbent's 20000/s
    assert ramp(s.best) >= 0.995 and "vs incumbent" in s.outcome


def test_a_caller_can_ask_more_of_a_costlier_rate_than_the_noise_margin():
    def bump(r):  # 5% over the incumbent (1.0 at 20000/s, re-measured too) around 60000/s
        return 1.0 if r == 20_000 else 1.05 * math.exp(-((math.log(r / 60_000) / 0.5) ** 2))

    default = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=20_000, incumbent_throughput=1.0), bump)
    assert default.best > 40_000
    strict = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=20_000, incumbent_throughput=1.0, cost_margin=0.1), bump)
    assert strict.best == 20_000 and "more interrupts must gain 10%" in strict.outcome
    with pytest.raises(ValueError, match="cost_margin"):
        ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, cost_margin=-0.1)


@pytest.mark.parametrize("slope", [0.002, 0.01, 0.03])
def test_plateau_rule_keeps_exact_throughput_within_one_percent(slope):
    # A slowly rising plateau: the lowest rate within 1% of the best, never 2% (the noise margin).
    def f(r):
        return 1.0 + slope * math.log(r / ITR_MIN_RATE)

    s = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000), f)
    top = max(f(p.itr) for p in s.history)
    assert f(s.best) >= top * 0.99


def test_cpu_rule_keeps_adaptive_when_the_gain_does_not_pay_for_the_cpu():
    # +3% throughput at 40K/s for +20% CPU per bit against the adaptive incumbent.
    def drive(worth):
        s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(cpu_worth=worth), incumbent=0)
        while (itr := s.ask()) is not None:
            value = 1.0 if itr == 0 else 1.0 + 0.03 * peak_curve(40_000)(itr)
            cpb = 1.0 if itr == 0 else 1.0 + 0.2 * itr / 40_000
            s.tell(itr, value, cpu_per_bit=cpb)
        return s

    assert drive(None).best != 0  # no rule: the search takes the 3%
    kept = drive(1.0)
    assert kept.best == 0 or kept.cpu_per_bit(kept.best) <= 1.0
    assert "CPU per bit" in kept.outcome


def test_a_lucky_adaptive_window_does_not_veto_a_rate_that_pays_for_its_cpu():
    # The adaptive incumbent measures 1.10 in its first window (a good moment of its own
    # state) and 1.00 after that; 40K/s holds 1.12 for +5% CPU per bit. On the first window
    # the CPU rule would keep the adaptive ITR (+1.8% for +5%): the incumbent is measured once
    # more before it vetoes, and the rate that pays for its CPU wins.
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(cpu_worth=1.0), incumbent=0)
    adaptive_windows = iter([1.10, 1.00, 1.00])
    while (itr := s.ask()) is not None:
        if itr == 0:
            s.tell(0, next(adaptive_windows), cpu_per_bit=1.0)
        else:
            s.tell(itr, 1.0 + 0.12 * peak_curve(40_000)(itr), cpu_per_bit=1.0 + 0.05 * peak_curve(40_000)(itr))
    assert [p.itr for p in s.history].count(0) == 2
    assert s.best != 0 and abs(math.log(s.best / 40_000)) < math.log(1.5)


@pytest.mark.parametrize(("saving", "gain", "kept"), [
    (0.01, 0.0, True),    # 1% cheaper per bit, same throughput: inside the 2% noise, not a decision
    (-0.01, 0.05, True),  # 5% more throughput for 1% more CPU per bit: CPU per bit first
    (0.05, 0.0, False),   # 5% cheaper per bit: a measured saving
    (0.0, 0.05, False),   # no more CPU per bit for 5% more throughput
])
def test_cpu_per_bit_first_leaves_the_adaptive_itr_only_for_a_measured_difference(saving, gain, kept):
    # Efficiency's rule (cpu_worth inf): every rate below 40K/s reads `saving` cheaper per bit
    # than the adaptive incumbent and `gain` more throughput, exactly.
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(cpu_worth=math.inf), incumbent=0)
    while (itr := s.ask()) is not None:
        cheap = itr != 0 and itr <= 40_000
        s.tell(itr, 1.0 + (gain if cheap else 0.0), cpu_per_bit=1.0 - saving if cheap else 1.0 + (itr > 0) * 0.3)
    assert (s.best == 0) is kept, s.outcome
    if kept:
        assert "CPU per bit" in s.outcome


def test_cpu_rule_falls_back_to_the_best_rate_it_accepts():
    # The peak (100K/s) gains +20% for +30% CPU per bit: refused. 30K/s gains +10% for +4%:
    # accepted, and better than any rate that is cheaper per bit than the adaptive ITR.
    def value(r: float) -> float:
        return 1.0 + 0.2 * peak_curve(100_000)(r)

    def cpb(r: float) -> float:
        return 0.9 + 0.4 * min(1.0, r / 100_000)

    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(cpu_worth=1.0), incumbent=0)
    while (itr := s.ask()) is not None:
        s.tell(itr, 1.0 if itr == 0 else value(itr), cpu_per_bit=1.0 if itr == 0 else cpb(itr))
    accepted = [r for r in s.scores() if value(r) - 1.0 >= 1.0 * (cpb(r) - 1.0) + s.margin]
    assert s.best == max(accepted, key=value)
    assert cpb(s.best) > 1.0  # more CPU per bit than the adaptive ITR, paid for by its gain


def test_an_overloaded_receiver_has_the_lowest_rate_measured_too():
    """A guest whose sockets drop most of what it takes off the ring (an application that cannot
    keep up) gets the most through at the lowest rate, where the NIC's ring drops the excess
    before the guest spends CPU on it. A golden section never measures its bracket's ends, so
    the search measures the lowest rate as a candidate of its own."""
    low = quantize_itr(ITR_MIN_RATE)
    received = 300e6  # what the guest takes off its ring, at any rate

    def delivered(itr: int) -> float:
        return 40e6 if itr == low else 0.5e6  # its application's share

    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(quantize=quantize_itr), incumbent=0)
    while (itr := s.ask()) is not None:
        s.tell(itr, 1e6 if itr == 0 else delivered(itr), scale=received)
    assert s.best == low
    # Without the scale nothing says the receiver is overloaded: the search stays the paper's.
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(quantize=quantize_itr), incumbent=0)
    while (itr := s.ask()) is not None:
        s.tell(itr, 1e6 if itr == 0 else delivered(itr))
    assert low not in {p.itr for p in s.history}


@pytest.mark.parametrize("peak_gain, wins", [(0.03, "lowest"), (0.6, "peak")])
def test_an_overloaded_receiver_keeps_the_fewest_interrupts_among_rates_its_noise_ties(peak_gain, wins):
    """What reaches an overloaded guest's applications is a small remainder of what arrives, and
    carries the noise of all of it: rates whose remainders differ by less than the noise margin
    of what arrived are a tie, and the tie goes to the fewest interrupts, below the plateau's
    250-us bound too (the guest's sockets, not the coalescing delay, hold its packets). A rate
    that beats the others by more than that noise still wins."""
    low = quantize_itr(ITR_MIN_RATE)
    received = 300e6
    peak = 20_000

    def delivered(itr: int) -> float:
        return 40e6 * (1.0 + peak_gain * math.exp(-((math.log(itr / peak) / 1.5) ** 2)))

    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(quantize=quantize_itr), incumbent=0)
    while (itr := s.ask()) is not None:
        s.tell(itr, 20e6 if itr == 0 else delivered(itr), scale=received)
    assert low < 1e6 / s.max_interval_us and low in s.scores()
    if wins == "lowest":
        assert s.best == low
    else:
        assert s.best != low and abs(math.log(s.best / peak)) < 1.0
    # An objective with no plateau margin (latency's) gives up nothing for fewer interrupts.
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(quantize=quantize_itr, plateau_margin=0.0),
                  incumbent=0)
    while (itr := s.ask()) is not None:
        s.tell(itr, 20e6 if itr == 0 else delivered(itr), scale=received)
    assert s.best == max(s.scores(), key=lambda r: (s.scores()[r], -r))


def test_a_remainder_is_compared_with_the_noise_of_what_it_was_taken_from():
    """0.3 against 0.1 Mbit/s is a factor of three, but of 300 Mbit/s received it is noise: told
    with their scale the two are a tie (measured again, then the cheaper side kept), not a step."""
    def told(search: ItrSearch, scale: float | None) -> list[int]:
        values: dict[int, float] = {}
        while (itr := search.ask()) is not None:
            values.setdefault(itr, 0.3e6 if len(values) % 2 else 0.1e6)
            search.tell(itr, values[itr], scale=scale)
        return [p.itr for p in search.history]

    with_scale = told(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000), 300e6)
    without = told(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000), None)
    assert with_scale[:2] == without[:2]
    assert with_scale[2] in with_scale[:2]  # a tie: one of the two is measured again
    assert without[2] not in without[:2]  # a step: the bracket was cut


@pytest.mark.parametrize("scale", [None, 3.0])
def test_one_lucky_window_does_not_displace_a_confirmed_remainder_when_the_budget_is_spent(scale):
    """4167/s is chosen and measured again (1.005, then 0.985); 10349/s was measured once at 1.0.
    With no probe left to measure 10349/s again and values that are what is left of a larger
    count (told with a scale), its 1.5% lead on a single window is noise: the rate measured twice
    stays. Without a scale the plateau rule's choice stands."""
    first = {10349: 1.0, 45105: 0.5, 4167: 1.005}
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(max_probes=4, max_edge_probes=0))
    while (itr := s.ask()) is not None:
        again = any(p.itr == itr for p in s.history)
        s.tell(itr, 0.985 if again else first[itr], scale=scale)
    assert [p.itr for p in s.history] == [10349, 45105, 4167, 4167]
    assert s.best == (10349 if scale is None else 4167)


@pytest.mark.parametrize("scale", [None, 300.0])
def test_a_remainder_is_credited_with_its_mean_a_plain_throughput_with_its_lowest_window(scale):
    """A burst lifts a throughput window, never lowers it: a plain value is judged by its lowest
    window. A remainder (what reached applications, of a much larger count received) swings
    either way with what the sockets dropped, so it is judged by its mean."""
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000)
    first, second = s.ask(), None
    s.tell(first, 10.0, scale=scale)
    second = s.ask()
    s.tell(second, 10.0, scale=scale)
    again = s.ask()  # a tie: one of the two is measured again
    assert again in (first, second)
    s.tell(again, 20.0, scale=scale)
    assert s.score(again) == (10.0 if scale is None else 15.0)


def test_a_lucky_incumbent_is_measured_again_even_when_the_budget_is_spent():
    """The veto of one window is the least reliable number in a search: with the budget spent,
    the incumbent's second measurement is one probe beyond it, not skipped."""
    f = peak_curve(40_000)
    values = iter([1.2, 0.6])
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(max_probes=5), incumbent=0)
    while (itr := s.ask()) is not None:
        s.tell(itr, next(values) if itr == 0 else f(itr))
    assert [p.itr for p in s.history].count(0) == 2 and s.probes == 6
    assert s.best != 0


def test_a_strict_budget_is_never_exceeded_not_even_for_a_lucky_incumbent():
    f = peak_curve(40_000)
    values = iter([1.2, 0.6])
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(max_probes=5, strict_budget=True), incumbent=0)
    while (itr := s.ask()) is not None:
        s.tell(itr, next(values) if itr == 0 else f(itr))
    assert s.probes == 5 and [p.itr for p in s.history].count(0) == 1


def test_a_tie_goes_to_the_shorter_delay_when_asked():
    # Flat from 5000/s up: throughput cannot tell those rates apart, so by default the cheaper
    # side wins; with ties_up (the latency objective's), the side whose coalescing delay is
    # shorter.
    def f(r):
        return 1.0 if r >= 5000 else (r / 5000) ** 0.5

    low = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 500, SearchConfig(plateau_margin=0.0)), f)
    high = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 500, SearchConfig(plateau_margin=0.0, ties_up=True)), f)
    assert 5000 <= low.best < 10_000 and high.best > 100_000
    assert f(high.best) == f(low.best) == 1.0
    # A difference beyond the margin is followed either way.
    peaked = run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, SearchConfig(ties_up=True)), peak_curve(12_000))
    assert abs(math.log(peaked.best / 12_000)) < math.log(1.3)


def _noisy_run(search: ItrSearch, f, sigma: float, seed: int) -> ItrSearch:
    """Log-normal window noise, the adaptive ITR at 6000 interrupts/s."""
    rng = random.Random(seed)
    while (itr := search.ask()) is not None:
        true = f(6_000.0) if itr == 0 else f(itr)
        search.tell(itr, true * math.exp(rng.gauss(0.0, sigma)), interrupt_rate=6_000.0 if itr == 0 else None)
    return search


def test_the_windows_noise_is_pooled_from_the_rates_measured_more_than_once():
    # The knee's test reads one window's deviation from the search's own repeats: log values
    # pooled over every rate told twice or more, never over rates told once.
    rng = random.Random(3)
    s = ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, 1000, incumbent=0)
    assert s.ask() == 0
    s.tell(0, 1.0)
    assert s.spread() is None  # nothing measured twice yet
    while (itr := s.ask()) is not None:
        s.tell(itr, (1.0 if itr < 20_000 else 1.05) * math.exp(rng.gauss(0.0, 0.05)))
    logs: dict[int, list[float]] = {}
    for probe in s.history:
        logs.setdefault(probe.itr, []).append(math.log(probe.throughput))
    repeated = [v for v in logs.values() if len(v) >= 2]
    assert repeated and any(len(v) == 1 for v in logs.values())
    squares = sum(sum((x - sum(v) / len(v)) ** 2 for x in v) for v in repeated)
    assert s.spread() == pytest.approx(math.sqrt(squares / sum(len(v) - 1 for v in repeated)))


def test_a_rate_is_judged_costlier_by_the_interrupts_it_ran_at_not_by_its_ceiling():
    # Request/response at a 160000/s ceiling takes 50000 interrupts/s: its packets, not the
    # ceiling, set the rate. Rates from 80000/s hold the merit within 3% at fewer interrupts;
    # a ceiling above the incumbent's measured 50000/s is not, by itself, more interrupts.
    def merit(r):
        return 1.0 if r >= 80_000 else 0.9 + 0.1 * (r / 80_000)

    def ran(r):
        return min(float(r), 50_000.0 * min(1.0, r / 160_000) ** 0.2)

    search = ItrSearch(80_000, 320_000, 1000, SearchConfig(plateau_margin=0.03, harm_margin=0.03),
                       incumbent=160_000)
    while (itr := search.ask()) is not None:
        search.tell(itr, merit(itr), interrupt_rate=ran(itr))
    assert search.best is not None and search.best < 160_000
    assert ran(search.best) < ran(160_000) and "kept incumbent" not in search.outcome


def test_the_knee_of_a_noisy_plateau_is_not_lost_in_its_noise():
    # A flat load whose windows swing by 10%: the plateau rule compares each rate's lowest
    # window with the luckiest, so the search ends wherever the bracket closed. Read against
    # the windows' own spread, a rate not measurably short of the margin is on the plateau,
    # and the knee is the lowest of them: fewer interrupts for the same throughput.
    def bests(f, sigma: float, knee_z: float) -> list[int]:
        config = SearchConfig(tolerance=1000, plateau_margin=0.03, knee_z=knee_z)
        found = [_noisy_run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, config=config), f, sigma, seed).best
                 for seed in range(40)]
        assert all(b is not None for b in found)
        return [b for b in found if b is not None]

    def flat(r: float) -> float:
        return 1.0

    def knee(r: float) -> float:  # the merit falls below 8000/s
        return 1.0 if r >= 8_000 else math.sqrt(r / 8_000)

    assert sorted(bests(flat, 0.10, 1.0))[20] < 0.5 * sorted(bests(flat, 0.10, 0.0))[20]
    # Quiet windows: the test adds little to the margin, and no search gives up more than it
    # and the noise allow.
    assert min(knee(b) for b in bests(knee, 0.01, 1.0)) >= 0.95
    assert math.exp(sum(math.log(knee(b)) for b in bests(knee, 0.01, 1.0)) / 40) >= 0.97


def test_knee_z_must_be_a_finite_non_negative_number():
    with pytest.raises(ValueError, match="knee_z must be a finite number >= 0, got nan"):
        SearchConfig(knee_z=math.nan)


def test_a_flat_merits_knee_is_the_ranges_low_end_measured_once():
    # On a flat merit the windows' noise decides which end of the range the first golden-
    # section step drops; when it drops the low end, the walk down the plateau starts from
    # wherever the bracket closed and does not reach it. One window at the range's lowest rate
    # settles where the knee is.
    def flat(r: float) -> float:
        return 1.0

    def knee(r: float) -> float:  # the merit falls below 8000/s
        return 1.0 if r >= 8_000 else math.sqrt(r / 8_000)

    def bests(f, sigma: float, low_edge: bool) -> list[int]:
        config = SearchConfig(tolerance=1000, plateau_margin=0.03, low_edge=low_edge, max_probes=12,
                              max_interval_us=1e6 / ITR_MIN_RATE)
        found = [_noisy_run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, config=config, incumbent=0), f, sigma, seed).best
                 for seed in range(40)]
        assert all(b is not None for b in found)
        return sorted(b for b in found if b is not None)

    with_edge, without = bests(flat, 0.03, True), bests(flat, 0.03, False)
    at_low_end = [sum(0 < b <= 1_000 for b in found) for found in (with_edge, without)]
    assert at_low_end[0] >= at_low_end[1] + 8  # of 40 (0 is the adaptive ITR, kept as the knee)
    assert with_edge[20] < without[20]
    # Where the low end falls short of the margin, the knee above it is kept.
    assert math.exp(sum(math.log(knee(b)) for b in bests(knee, 0.01, True)) / 40) >= 0.97


def test_the_low_end_is_measured_once_and_at_most_one_probe_beyond_the_budget():
    config = SearchConfig(tolerance=1000, plateau_margin=0.03, low_edge=True, max_probes=12,
                          max_interval_us=1e6 / ITR_MIN_RATE)
    s = _noisy_run(ItrSearch(ITR_MIN_RATE, ITR_MAX_RATE, config=config, incumbent=0), lambda r: 1.0, 0.03, 1)
    assert sum(p.itr == ITR_MIN_RATE for p in s.history) <= 1
    assert s.probes <= 12 + 2  # the low end's one beyond, and the incumbent's recheck
