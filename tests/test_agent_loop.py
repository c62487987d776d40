"""The agent's tick on the simulated host, in simulated time: tuning, records, failures, restore."""

from __future__ import annotations

import pytest

from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import PolicyError, pf_controller, vf_policy
from vftune.control.policy import VfPolicy
from vftune.itr import quantize_itr
from vftune.model import ItrDecision, VfSample
from vftune.sim.host import SimHost
from vftune.sim.model import platform_for
from vftune.sim.scenarios import build
from vftune.store.db import Store


def _run(agent: Agent, ticks: int) -> None:
    agent.start("test")
    for _ in range(ticks):
        agent.host.sleep(agent.config.interval)
        agent.tick()


def _searched_mixed_host(db) -> Agent:
    """150 simulated seconds of the search policy and the hybrid controller on the mixed host.
    (Seed 0: on seed 3 the last cost fit of the five minutes is unusable, beta < 0, with
    writes in force at once or at the VF's fetch alike; the earlier fit it kept is gone now
    that the probes are timed by the fetch.)"""
    host = SimHost("mixed-host", seed=0, speed=float("inf"))
    agent = Agent(host, Store(db), vf_policy("search"), pf_controller("hybrid"), AgentConfig(fit_every_s=15.0))
    _run(agent, 600)
    return agent


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> Agent:
    return _searched_mixed_host(tmp_path_factory.mktemp("searched") / "h.db")


def _busy(agent: Agent) -> list[str]:
    return [pci for pci, st in agent.vfs.items() if st.sample and st.sample.rx_bps > 1e6]


def test_every_vf_with_traffic_is_searched_and_tuned(searched):
    busy = _busy(searched)
    assert busy and [pci for pci in busy if searched.vfs[pci].itr != 0]
    done = {pci for pci in busy if searched.vfs[pci].policy_state.get("searches", 0) >= 1}
    assert done == set(busy), "every VF with traffic has been searched after 150 s"


def test_decisions_are_counted_by_the_tuners_own_cause(searched):
    causes = {cause for _setting, cause in searched.view().decisions}
    assert "other" not in causes, causes
    assert {"probe", "converged", "confirmed"} <= causes


def test_what_the_agent_shows_is_what_the_host_runs(searched):
    tuned = [pci for pci in _busy(searched) if searched.vfs[pci].itr != 0]
    assert tuned and all(searched.host.vf_itr(pci) == searched.vfs[pci].itr for pci in tuned)


def test_every_second_and_decision_is_recorded(searched):
    assert searched.store is not None
    tuned = next(pci for pci in _busy(searched) if searched.vfs[pci].itr != 0)
    probes = searched.store.decisions(tuned, 0, 1e12, 1000)
    assert probes and all(d["ok"] and d["reason"] for d in probes)
    # One history row per VF a second (four ticks merged), not one per tick.
    assert searched.store.count("samples") == 150 * len(searched.inventory.vfs())


def test_the_cost_model_is_fitted_and_sets_the_pfs_cliffs(searched):
    report = searched.costs.report()
    fit = report["fit"]
    assert fit is not None and fit["rms_relative"] < 0.3
    # Each guest's packet sizes are its own, so the bytes' cost sits in its per-packet cost (alpha 0).
    assert fit["alpha"] >= 0 and fit["beta"] > 0 and fit["gamma"] > 0
    # The guests' CPU is what the fit sees: an interrupt costs a guest its handler and VM exits
    # (the host's forwarding is the host's). mixed-host's request/response guests serve more
    # transactions at higher rates, work that is theirs and not the interrupts' (a pooled fit
    # found 2.7 times the cost); GRO makes the marginal cost of a bulk guest's interrupt a little
    # more than the handler's.
    plat = platform_for(build("mixed-host"))
    guest_interrupt_cost = plat.per_interrupt_s * 1e3
    assert 0.85 * guest_interrupt_cost < report["cpu_per_1000_interrupts_s"] < 1.25 * guest_interrupt_cost
    modes = {name: st.controller_state for name, st in searched.pfs.items()}
    assert all(m["cliff_source"] == "cost model" for m in modes.values()), "the PFs' cliff comes from the fit"


def test_shutdown_restores_every_write(tmp_path):
    agent = _searched_mixed_host(tmp_path / "h.db")
    assert agent.store is not None
    tuned = [pci for pci in _busy(agent) if agent.vfs[pci].itr != 0]
    before = agent.store.decisions(None, 0, 1e12, 10_000)
    written = {d["target"] for d in before if d["setting"] == "itr" and d["ok"]}
    restored = agent.shutdown()
    assert set(tuned) <= written
    assert {a.target for a in restored if a.setting == "itr"} == written
    assert all(a.ok and a.applied == 0 for a in restored if a.setting == "itr"), \
        "every VF is back on its own adaptive ITR"
    assert {a.target for a in restored if a.setting == "rx_mode"} <= set(agent.pfs)
    after = agent.store.decisions(None, 0, 1e12, 10_000)
    assert len(after) == len(before) + len(restored), "every restore is recorded"


class _OutOfRange(VfPolicy):
    name = "bad"

    def step(self, sample: VfSample) -> ItrDecision | None:
        return ItrDecision(100, "asks for a rate the 82599 cannot do")


def test_a_refused_write_is_recorded_as_failed_and_the_loop_goes_on(tmp_path):
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    store = Store(tmp_path / "h.db")
    agent = Agent(host, store, lambda pci, caps: _OutOfRange(), pf_controller("stock"))
    _run(agent, 3)
    assert agent.ticks == 4
    failed = store.decisions(None, 0, 1e12, 100)
    assert failed and not any(d["ok"] for d in failed)
    assert all("100" in d["error"] for d in failed)
    assert all(st.itr == 0 for st in agent.vfs.values()), "nothing is believed set that was refused"


class _Plan(VfPolicy):
    """Asks for a rate at given ticks (its own step count), nothing otherwise."""

    name = "plan"

    def __init__(self, plan: dict[int, int]) -> None:
        self.plan, self.steps = plan, 0

    def step(self, sample: VfSample) -> ItrDecision | None:
        self.steps += 1
        itr = self.plan.get(self.steps)
        return None if itr is None else ItrDecision(itr, f"plan: {itr}/s", "probe")


def _lags(config: AgentConfig) -> tuple[list[float], Agent]:
    """Seconds from each of a VF's planned changes to the VF running it; the first change
    comes after a quiet minute, the others 20-40 s after the one before."""
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    pci = host.inventory().vfs()[0].pci
    rates = {120: 30_000, 181: 50_000, 242: 20_000, 323: 40_000}  # 0.5-s ticks: 60.5, 30.5, 30.5 and 40.5 s apart
    plan = _Plan(rates)
    agent = Agent(host, None, lambda vf, caps: plan if vf == pci else _Plan({}), pf_controller("stock"), config)
    agent.start("test")
    lags, asked = [], None
    while plan.steps < 460:  # the last warm spell ends 60 s after the last change
        host.sleep(config.interval)
        agent.tick()
        if plan.steps in rates:
            asked = (host.now(), quantize_itr(rates[plan.steps]))
        if asked is not None and host.vf_itr(pci) == asked[1]:
            lags.append(host.now() - asked[0])
            asked = None
    return lags, agent


def test_a_vf_changed_lately_takes_its_next_change_at_a_fast_fetch() -> None:
    # After a change the agent writes the rate in force again every 8 s for 60 s, so the patched
    # VF keeps fetching every 250 ms: a change 30-40 s later is in force by the next tick,
    # not at the VF's next 2-s fetch.
    warm, agent = _lags(AgentConfig(interval=0.5))  # the plan counts 0.5-s ticks
    cold, _ = _lags(AgentConfig(interval=0.5, keep_warm_s=0))
    assert len(warm) == len(cold) == 4
    assert max(warm[1:]) <= 0.5 < max(cold[1:]), (warm, cold)
    assert warm[0] == cold[0]  # the first change after a quiet minute waits for the slow fetch either way
    # A write every 8 s while warm (fewer where a change was written anyway), none after.
    assert 12 <= agent.keep_warm_writes <= 20, agent.keep_warm_writes
    assert agent.view().decisions[("itr", "keep_warm")] == agent.keep_warm_writes  # in the metrics
    done = agent.keep_warm_writes
    for _ in range(40):
        agent.host.sleep(agent.config.interval)
        agent.tick()
    assert agent.keep_warm_writes == done


def test_fixed_policy_outside_the_host_range_is_refused():
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    agent = Agent(host, None, vf_policy("fixed:500"), pf_controller("stock"))
    with pytest.raises(PolicyError, match="fixed:500: outside this host's range 956..488281"):
        agent.start()


def test_one_fixed_rate_still_gives_the_interrupt_cost():
    # 512-byte streams at one fixed rate: bytes and packets move together (no bytes' cost apart
    # from the packets'), but the load's own noise moves the packets under a fixed interrupt
    # rate, and with them the interrupts per packet, which is what the interrupt cost needs.
    host = SimHost("paper-8vm", seed=3, speed=float("inf"))
    agent = Agent(host, None, vf_policy("fixed:20000"), pf_controller("stock"), AgentConfig(fit_every_s=15.0))
    _run(agent, 120)
    report = agent.costs.report()
    assert report["fit"] is not None and report["fit"]["alpha"] == 0.0
    guest_interrupt_cost = platform_for(build("paper-8vm", 3)).per_interrupt_s * 1e3
    assert report["cpu_per_1000_interrupts_s"] == pytest.approx(guest_interrupt_cost, rel=0.15)


def test_a_guest_that_takes_no_interrupts_gives_no_cost_fit_and_says_why():
    # One guest at line rate, its CPU full, at one rate: under NAPI its interrupts per packet
    # never move, so their cost cannot be told. (A search moves them: its probe at the range's
    # low end does.)
    host = SimHost("paper-1vm", seed=3, speed=float("inf"))
    agent = Agent(host, None, vf_policy("fixed:20000"), pf_controller("stock"), AgentConfig(fit_every_s=15.0))
    _run(agent, 480)
    report = agent.costs.report()
    assert report["fit"] is None and report["saved_cpu_s_per_s"] is None
    assert "interrupts per packet moved" in report["note"]


class _GuestLeaves(SimHost):
    """The simulated host, after which one guest's VF has no owner any more (guest shut down)."""

    gone: str | None = None

    def inventory(self):
        inv = super().inventory()
        if self.gone is None:
            return inv
        from dataclasses import replace

        pfs = tuple(replace(pf, vfs=tuple(replace(vf, guest=None) if vf.pci == self.gone else vf
                                          for vf in pf.vfs)) for pf in inv.pfs)
        return replace(inv, pfs=pfs)


def test_a_vf_whose_guest_left_is_handed_back_to_adaptive(tmp_path):
    host = _GuestLeaves("paper-3vm", seed=1, speed=float("inf"))
    store = Store(tmp_path / "h.db")
    agent = Agent(host, store, vf_policy("fixed:20000"), pf_controller("stock"))
    _run(agent, 3)
    pci = agent.inventory.vfs()[0].pci
    assert agent.vfs[pci].itr == quantize_itr(20000)
    host.gone = pci
    agent.request_refresh("test: guest stopped")
    agent.tick()
    first, *_, last = [d for d in store.decisions(pci, 0, 1e12, 100) if d["setting"] == "itr"]
    assert first["requested"] == "20000" and len(_) == 0, "a fixed ITR is set once, not every tick"
    assert last["requested"] == "0" and last["reason"].startswith("owner changed (was ")
    # The VF takes the hand-back at its next fetch: until then the agent shows the rate in force.
    assert agent.inventory.vf(pci).guest is None and agent.vfs[pci].pending_itr == 0
    assert agent.vfs[pci].itr == quantize_itr(20000)


def test_a_max_interval_rule_bounds_every_vfs_adaptive_itr_and_is_recorded(tmp_path) -> None:
    host = SimHost("mixed-host", seed=2, speed=float("inf"))
    store = Store(tmp_path / "bounds.db")
    agent = Agent(host, store, vf_policy("observe"), pf_controller("stock"), AgentConfig(max_interval_us={"*": 62}))
    _run(agent, 30)
    bulk = host.inventory().vfs()[4].pci  # batch-1's stream: 12K/s class on its own
    assert host.vf_itr(bulk) == quantize_itr(15_753)  # 62 rx-usecs: at most 63.5 us between interrupts
    rows = [d for d in store.decisions(bulk, 0, float("inf"), 10) if d["setting"] == "itr_bounds"]
    assert rows and rows[0]["ok"] and rows[0]["reason"] == "rule: max_interval_us 62"
    view = agent.view().vf(bulk)
    assert view is not None and view.actuator == "patched" and view.actuator_reason.startswith("simulated patched")
    restored = [a for a in agent.shutdown() if a.setting == "itr_bounds"]
    assert len(restored) == len(host.inventory().vfs()) and all(a.applied == "0..0" for a in restored)
    host.sleep(10)
    assert host.vf_itr(bulk) == quantize_itr(12_000)
    store.close()


def test_a_rate_on_its_way_to_the_vf_is_shown_as_pending_until_the_vf_runs_it():
    from vftune.api.models import VfOut

    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    agent = Agent(host, None, vf_policy("fixed:20000"), pf_controller("stock"))
    agent.start("test")  # writes 20000 to every VF; each takes it at its own next fetch
    pcis = [vf.pci for vf in agent.inventory.vfs()]
    shown = {pci: VfOut.model_validate(agent.view().vf(pci)) for pci in pcis}
    assert all(v.itr_pending == 20000 and v.itr == 0 for v in shown.values())  # none has fetched yet
    for _ in range(round(2.5 / agent.config.interval)):  # the patched VF fetches within 2 s
        host.sleep(agent.config.interval)
        agent.tick()
    shown = {pci: VfOut.model_validate(agent.view().vf(pci)) for pci in pcis}
    assert all(v.itr_pending is None and v.itr == quantize_itr(20000) == host.vf_itr(pci) for pci, v in shown.items())


def test_a_stop_records_the_part_of_a_history_row_it_cut_short(tmp_path):
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    store = Store(tmp_path / "h.db")
    agent = Agent(host, store, vf_policy("observe"), pf_controller("stock"))
    _run(agent, 6)  # 1.5 s: one full second, and half of the next
    vfs = len(agent.inventory.vfs())
    assert store.count("samples") == vfs
    agent.shutdown()
    rows = store.samples(agent.inventory.vfs()[0].pci, 0, float("inf"), 10)
    assert store.count("samples") == 2 * vfs and rows[-1]["dt"] == pytest.approx(0.5)


def test_the_policies_states_are_copied_only_for_a_view_that_will_be_read(tmp_path):
    """The API process pushes a view only when read (or every few seconds): the ticks between
    copy no policy state, and the tick before a push copies every VF's."""
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    agent = Agent(host, Store(tmp_path / "h.db"), vf_policy("search"), pf_controller("stock"))
    agent.view_wanted = lambda: False
    _run(agent, 8)
    assert all(st.policy_state == {} for st in agent.vfs.values())
    agent.view_wanted = lambda: True
    host.sleep(agent.config.interval)
    agent.tick()
    view = agent.view()
    assert view.vfs and all(vf.policy_state == agent._policies[vf.pci].state() for vf in view.vfs)
    assert any(vf.phase for vf in view.vfs)


class _CountingObserve(VfPolicy):
    """Observe, counting the samples it is given per VF."""

    name = "observe"
    steps: dict[str, int] = {}

    def __init__(self, pci: str) -> None:
        self.pci = pci

    def step(self, sample: VfSample) -> ItrDecision | None:
        self.steps[self.pci] = self.steps.get(self.pci, 0) + 1
        return None

    def at_rest(self) -> bool:
        return True


def test_a_vf_at_rest_is_not_sampled_yet_keeps_its_history_row_each_second(tmp_path):
    host = SimHost("mixed-host", seed=0, speed=float("inf"))
    store = Store(tmp_path / "h.db")
    _CountingObserve.steps = {}
    agent = Agent(host, store, lambda pci, caps: _CountingObserve(pci), pf_controller("stock"))
    _run(agent, 40)  # 10 s
    vfs = agent.inventory.vfs()
    idle = [vf.pci for vf in vfs if agent.vfs[vf.pci].totals.get("rx_packets", 0.0) == 0.0]
    busy = [vf.pci for vf in vfs if vf.pci not in idle]
    assert idle and busy
    # A VF without traffic or interrupts is sampled until it is seen quiet; then its counts are
    # compared each tick and it is rated (its policy told) once a history row, a second.
    assert all(_CountingObserve.steps[pci] <= 1 + 10 for pci in idle)
    assert all(_CountingObserve.steps[pci] == agent.ticks - 1 for pci in busy)  # the first primes
    # What it shows stays current to the record period, and its history has a row a second.
    last = agent.view()
    shown = {vf.pci: vf for vf in last.vfs}
    assert all(agent.wall_now() - shown[pci].updated <= agent.config.record_every_s + 1e-6 for pci in idle)
    agent.shutdown()
    assert store.count("samples") == 10 * len(vfs)
    for pci in idle:
        rows = store.samples(pci, 0, float("inf"), 100)
        starts = [r["t"] - r["dt"] for r in rows]
        assert [round(s, 6) for s in starts[1:]] == [round(r["t"], 6) for r in rows[:-1]], "rows leave no gap"
        assert all(r["rx_bps"] == 0 for r in rows) and sum(r["dt"] for r in rows) == pytest.approx(10.0)
