"""The config file: its format, `vftune config check`, precedence, rules in the agent, SIGHUP."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import click
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import VFTUNE, start_agent
from vftune.agent.loop import Agent
from vftune.agent.policies import pf_controller, vf_policy
from vftune.cli import run as run_cli
from vftune.itr import quantize_itr
from vftune.rules import RUN_OPTIONS, VfTarget, parse
from vftune.sim.host import SimHost
from vftune.store.db import Store

CONTRACT = """
[run]                      # any `vftune run` option by its long name
interval = 1.0
[[rule]]                   # first matching rule wins
match = { guest = "web-*" }
objective = "latency"
max_interval_us = 100
[[rule]]
match = { vf = "0000:03:10.4" }
exclude = true
[[rule]]
match = { pf = "enp3s0f1", guest = "db-*" }
objective = "efficiency"
[[rule]]
match = { guest = "*" }
pin_itr = 20000
"""


def _target(vf: str, guest: str | None, pf: str = "enp3s0f0", pf_pci: str = "0000:03:00.0") -> VfTarget:
    return VfTarget(vf=vf, pf=pf, pf_pci=pf_pci, guest=guest)


def test_the_contract_example_parses_and_the_first_matching_rule_wins():
    config, problems = parse(CONTRACT, "vftune.toml")
    assert problems == []
    assert config.run == {"interval": 1.0}
    web = config.rule_for(_target("0000:03:10.0", "web-1"))
    assert (web.objective, web.max_interval_us, web.state) == ("latency", 100.0, None)
    assert config.rule_for(_target("0000:03:10.4", "db-1")).state == "excluded"
    # Both keys of a match must hold: db-1 on the second PF, by name; on the first PF the pin.
    assert config.rule_for(_target("0000:03:10.5", "db-1", "enp3s0f1", "0000:03:00.1")).objective == "efficiency"
    pinned = config.rule_for(_target("0000:03:10.6", "db-1"))
    assert (pinned.state, pinned.pin_itr, pinned.source) == ("pinned", 20000, "rule 4 (guest=*)")
    # A VF with no guest matches no guest glob, not even "*".
    assert config.rule_for(_target("0000:03:12.1", None)).source is None


def test_pf_matches_by_pci_address_too():
    config, _ = parse('[[rule]]\nmatch = { pf = "0000:03:00.1" }\nexclude = true\n')
    assert config.rule_for(_target("0000:03:10.1", None, "enp3s0f1", "0000:03:00.1")).exclude
    assert not config.rule_for(_target("0000:03:10.0", None)).exclude


def test_every_run_option_can_be_set_in_the_file():
    long_names = {opt.lstrip("-") for p in run_cli.command.params for opt in p.opts if opt.startswith("--")}
    long_names -= {"config"}
    assert long_names == set(RUN_OPTIONS)
    dests = {p.name for p in run_cli.command.params} - {"config"}
    assert {attr for attr, _ in RUN_OPTIONS.values()} == dests


def _check(tmp_path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "vftune.toml"
    path.write_text(text)
    return subprocess.run([*VFTUNE, "config", "check", str(path)], capture_output=True, text=True, timeout=60)


def test_config_check_accepts_the_contract_and_the_shipped_default(tmp_path):
    good = _check(tmp_path, CONTRACT)
    assert good.returncode == 0 and "ok (1 run option(s), 4 rule(s))" in good.stdout
    shipped = subprocess.run([*VFTUNE, "config", "check", "docs/vftune.toml"], capture_output=True, text=True,
                             timeout=60)
    assert shipped.returncode == 0, shipped.stderr


def test_config_check_names_file_key_and_value_once_per_problem(tmp_path):
    bad = _check(tmp_path, '[run]\ninterval = "fast"\nlisten = "nowhere"\n[[rule]]\nmatch = { guest = "a*" }\n'
                           'objective = "speed"\npin_itr = 5\n[[rule]]\nmatch = { gust = "x" }\n')
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    lines = bad.stderr.strip().splitlines()
    path = str(tmp_path / "vftune.toml")
    assert all(line.startswith(f"vftune: {path}: ") for line in lines)
    # Every problem, in TOML's spelling: the bad interval does not hide the bad listen address.
    assert any('run.interval = "fast": expected a number' in line for line in lines)
    assert any('run.listen = "nowhere": expected HOST:PORT' in line for line in lines)
    assert any('rule[1].objective = "speed"' in line for line in lines)
    assert any("rule[1].pin_itr = 5" in line for line in lines)
    assert any('rule[2].match.gust = "x"' in line for line in lines)


@pytest.mark.parametrize("text, says", [
    ("[run\n", "not valid TOML"),
    ('[run]\nlisten = "127.0.0.1:99999"\n', "outside 0..65535"),
    ('[run]\npolicy = "magic"\n', 'run.policy = "magic"'),
    ("[run]\nfrobnicate = 1\n", "run.frobnicate = 1: not a `vftune run` option"),
    ("[[rule]]\nexclude = true\n", "rule[1].match: missing"),
    ("[run]\nkeep-warm = -1\n", "run.keep-warm = -1.0: must be >= 0"),
    ('[[rule]]\nmatch = { guest = "*" }\nobjective = "efficiency"\nmargin = 5\n',
     "rule[1].margin = 5: expected a share of the VF's best merit in 0..0.5 (0.05 = 5%)"),
    ('[[rule]]\nmatch = { guest = "*" }\nobjective = "latency"\nmargin = 0.05\n',
     "rule[1].margin = 0.05: only objective = 'balanced' or 'throughput' or 'efficiency' give up a margin"),
    ('[[rule]]\nmatch = { guest = "*" }\nmargin = 0.05\nthroughput_margin = 0.05\n',
     "rule[1].throughput_margin = 0.05: the old spelling of margin"),
    ('[tuner]\nobjective = "fastest"\n', 'tuner.objective = "fastest": choose from balanced, throughput'),
    ('[tuner]\nrestart_s = 1\n', "tuner.restart_s = 1: expected a number in 10..86400"),
    ('[tuner]\nrestart_interrupts = 2.5\n', "tuner.restart_interrupts = 2.5: expected a whole number"),
    ('[tuner]\nwindow_s = 2\n', "tuner.window_s = 2: unknown tuner key; known: objective, margin"),
    ('[tuner]\nobjective = "latency"\nmargin = 0.1\n', "tuner.margin = 0.1: the latency objective takes no margin"),
    ('[[rule]]\nmatch = { guest = "*" }\npin_itr = 20000\nobjective = "efficiency"\nmargin = 0.1\n',
     "rule[1].pin_itr = 20000: a pinned VF is not tuned"),
])
def test_config_check_one_line_for_each_kind_of_mistake(tmp_path, text, says):
    out = _check(tmp_path, text)
    assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_an_efficiency_rules_margin_reaches_the_search_and_the_status(tmp_path):
    config, problems = parse('[[rule]]\nmatch = { guest = "*" }\nobjective = "efficiency"\n'
                             'margin = 0.05\n', "t.toml")
    assert not problems
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    agent = Agent(host, Store(tmp_path / "h.db"), vf_policy("search"), pf_controller("stock"), rules=config)
    agent.start("test")
    agent.host.sleep(agent.config.interval)
    agent.tick()
    pci = host.inventory().vfs()[0].pci
    status = agent.view().vf(pci)
    assert (status.objective, status.margin) == ("efficiency", 0.05)
    # The operator's 5% is given up against the best rate and against the guest's adaptive ITR.
    search = agent._policies[pci].search_config
    assert (search.plateau_margin, search.harm_margin) == (0.05, 0.05)


@pytest.mark.parametrize("text", ['[[rule]]\nmatch = { guest = "*" }\nthroughput_margin = 0.05\n',
                                  '[[rule]]\nmatch = { guest = "*" }\nmargin = 0.05\n'])
def test_the_old_spelling_of_margin_still_reads(text):
    config, problems = parse(text, "t.toml")
    assert not problems and config.rules[0].margin == 0.05


def test_tuner_section_sets_the_goal_of_vfs_no_rule_names_and_the_periodic_re_search(tmp_path):
    from vftune.cli.run import with_tuner_settings

    config, problems = parse('[tuner]\nobjective = "efficiency"\nmargin = 0.2\nrestart_s = 120\n'
                             'restart_interrupts = 1000000\n'
                             '[[rule]]\nmatch = { guest = "vm2" }\nobjective = "latency"\n', "t.toml")
    assert not problems
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    factory = with_tuner_settings(vf_policy("search"), config.tuner)
    agent = Agent(host, Store(tmp_path / "h.db"), factory, pf_controller("stock"), rules=config)
    agent.start("test")
    agent.host.sleep(agent.config.interval)
    agent.tick()
    by_guest = {v.guest: v for v in agent.view().vfs}
    # No rule names vm1: [tuner]'s objective and margin; vm2's rule names its own objective.
    assert (by_guest["vm1"].objective, by_guest["vm1"].margin) == ("efficiency", 0.2)
    assert (by_guest["vm2"].objective, by_guest["vm2"].margin) == ("latency", None)
    tuner = agent._policies[by_guest["vm1"].pci]
    assert (tuner.options.restart_s, tuner.options.restart_interrupts) == (120.0, 1_000_000)
    assert tuner.search_config.plateau_margin == 0.2


def test_precedence_flags_then_environment_then_file_then_defaults(tmp_path, monkeypatch):
    path = tmp_path / "vftune.toml"
    path.write_text('[run]\ninterval = 0.5\nseed = 7\nlog-level = "debug"\nkeep-warm = 0\n')

    def resolved(args: list[str]) -> dict:
        ctx = run_cli.command.make_context("run", ["--config", str(path), *args], auto_envvar_prefix="VFTUNE_RUN")
        return ctx.params

    monkeypatch.setenv("VFTUNE_RUN_SEED", "9")
    params = resolved(["--log-level", "warning"])
    assert params["interval"] == 0.5  # file over default
    assert params["keep_warm_s"] == 0  # keep-warm off from the file
    assert params["seed"] == 9  # environment over file
    assert params["log_level"] == "warning"  # flag over file
    assert params["db"] is None  # default: resolved to the state directory later
    assert resolved(["--seed", "3"])["seed"] == 3  # flag over environment


def test_rules_in_the_agent_pin_exclude_and_carry_the_objective(tmp_path):
    config, problems = parse("""
[[rule]]
match = { vf = "0000:03:10.0" }
exclude = true
[[rule]]
match = { vf = "0000:03:10.2" }
pin_itr = 20000
[[rule]]
match = { guest = "*" }
objective = "latency"
max_interval_us = 100
""", "t.toml")
    assert not problems
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    pcis = [vf.pci for vf in host.inventory().vfs()]
    excluded, pinned, tuned = pcis[0], pcis[1], pcis[2]
    assert (excluded, pinned) == ("0000:03:10.0", "0000:03:10.2")
    store = Store(tmp_path / "h.db")
    agent = Agent(host, store, vf_policy("search"), pf_controller("stock"), rules=config)
    agent.start("test")
    # The pin is on the VF before the first sample was judged.
    assert host.vf_itr(pinned) == quantize_itr(20000)
    assert store.decisions(pinned, 0, 1e12, 10)[0]["reason"] == "pinned by rule 2 (vf=0000:03:10.2): 20000/s"
    for _ in range(120):
        agent.host.sleep(agent.config.interval)
        agent.tick()
    view = agent.view()
    assert view.vf(excluded).itr == 0 and store.decisions(excluded, 0, 1e12, 10) == [], "never written"
    assert view.vf(excluded).state == "excluded"
    assert view.vf(pinned).state == "pinned"
    tuned_view = view.vf(tuned)
    assert tuned_view.objective == "latency" and tuned_view.state in ("searching", "converged")
    assert agent._policies[tuned].goal.max_interval_us == 100.0  # the rule's bound reaches the search


def test_a_rule_change_hands_an_excluded_vf_back_before_leaving_it_alone(tmp_path):
    host = SimHost("paper-3vm", seed=0, speed=float("inf"))
    store = Store(tmp_path / "h.db")
    agent = Agent(host, store, vf_policy("fixed:20000"), pf_controller("stock"))
    agent.start("test")
    for _ in range(3):  # the VF takes the write at its next fetch (within 2 s)
        agent.host.sleep(1.0)
        agent.tick()
    pci = agent.inventory.vfs()[0].pci
    assert host.vf_itr(pci) == quantize_itr(20000)
    config, _ = parse(f'[[rule]]\nmatch = {{ vf = "{pci}" }}\nexclude = true\n', "t.toml")
    agent.set_rules(config)
    for _ in range(5):
        agent.host.sleep(1.0)
        agent.tick()
    assert agent.view().vf(pci).itr == 0 and agent.view().vf(pci).state == "excluded"
    last = [d for d in store.decisions(pci, 0, 1e12, 10) if d["setting"] == "itr"][-1]
    assert last["requested"] == "0" and last["reason"].startswith("excluded by rule 1")


def _states(url: str) -> dict[str, str]:
    return {vf["pci"]: vf["state"] for vf in httpx.get(f"{url}/v1/vfs").json()}


def _wait_for(predicate, what: str, agent, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        assert agent.proc.poll() is None, agent.log.read_text()
        time.sleep(0.1)
    raise AssertionError(f"{what}: {agent.log.read_text()[-2000:]}")


def test_sighup_reloads_rules_and_refuses_a_bad_file(tmp_path):
    path = tmp_path / "vftune.toml"
    path.write_text('[[rule]]\nmatch = { guest = "*" }\npin_itr = 20000\n')
    agent = start_agent(tmp_path, "--sim", "paper-3vm", "--speed", "50", "--config", str(path))
    try:
        agent.wait_ticks(3)
        assert set(_states(agent.url).values()) == {"pinned"}
        path.write_text('[[rule]]\nmatch = { guest = "*" }\npin_itr = "fast"\n')
        agent.proc.send_signal(signal.SIGHUP)
        _wait_for(lambda: "config reload refused" in agent.log.read_text(), "no refusal logged", agent)
        assert 'rule[1].pin_itr = "fast"' in agent.log.read_text()
        assert set(_states(agent.url).values()) == {"pinned"}, "the rules in force are kept"
        path.write_text('[[rule]]\nmatch = { guest = "*" }\nexclude = true\n')
        agent.proc.send_signal(signal.SIGHUP)
        _wait_for(lambda: set(_states(agent.url).values()) == {"excluded"}, "rules not reloaded", agent)
        # In force once each VF has fetched the hand-back (pending until then).
        _wait_for(lambda: all(vf["itr"] == 0 for vf in httpx.get(f"{agent.url}/v1/vfs").json()),
                  "excluded VFs are not handed back to their adaptive ITR", agent)
    finally:
        assert agent.stop() == 0


def test_run_refuses_a_bad_config_file_with_one_line_per_problem(tmp_path):
    path = tmp_path / "vftune.toml"
    path.write_text('[run]\ninterval = -1\n[[rule]]\nmatch = { guest = "*" }\nobjective = "fast"\n')
    out = subprocess.run([*VFTUNE, "run", "--sim", "--config", str(path), "--db", str(tmp_path / "x.db")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 2 and "run.interval = -1" in out.stderr
    assert not (tmp_path / "x.db").exists()


def test_status_json_carries_state_and_objective(shared_sim_agent):
    out = subprocess.run([*VFTUNE, "status", "--json", "--url", shared_sim_agent.url], capture_output=True,
                         text=True, timeout=60)
    vfs = json.loads(out.stdout)["vfs"]
    assert all(vf["state"] in ("converged", "searching", "adaptive", "excluded", "pinned") for vf in vfs)
    assert {vf["objective"] for vf in vfs} == {"balanced"}
    assert {"searching", "converged"} & {vf["state"] for vf in vfs}


def test_sighup_without_a_config_file_keeps_the_agent_running(tmp_path):
    agent = start_agent(tmp_path, "--sim", "paper-3vm", "--speed", "50")
    try:
        agent.wait_ticks(2)
        agent.proc.send_signal(signal.SIGHUP)
        _wait_for(lambda: "no config file at" in agent.log.read_text(), "no warning logged", agent)
        ticks = httpx.get(f"{agent.url}/healthz").json()["ticks"]
        agent.wait_ticks(ticks + 2)
    finally:
        assert agent.stop() == 0, "stopped cleanly by SIGTERM, not ended by SIGHUP"


_text = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=12)  # TOML allows no control characters
_toml_scalar = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False), _text,
                         st.booleans())
_keys = st.sampled_from(["interval", "policy", "for", "seed", "pf-mode", "match", "objective", "max_interval_us",
                         "margin", "pin_itr", "exclude", "guest", "vf", "pf", "bogus"])
_tables = st.dictionaries(_keys, st.one_of(_toml_scalar, st.dictionaries(_keys, _toml_scalar, max_size=3)), max_size=5)


def _toml(value) -> str:
    """A value as TOML: JSON's strings and numbers are TOML's; tables inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value, ensure_ascii=False)


@settings(max_examples=150, deadline=None)
@given(run=_tables, rule_list=st.lists(_tables, max_size=4))
def test_any_document_gives_a_config_or_named_problems_never_an_exception(run, rule_list):
    text = "[run]\n" + "".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in run.items())
    for table in rule_list:
        text += "[[rule]]\n" + "".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in table.items())
    config, problems = parse(text, "f.toml")
    assert not [p for p in problems if p.key == "toml"], "the generator writes valid TOML"
    assert all(str(p).startswith("f.toml: ") for p in problems)
    if not problems:
        assert len(config.rules) == len(rule_list)
        config.rule_for(_target("0000:03:10.0", "web-1"))  # matching never fails on a clean config


def test_the_run_default_for_keep_warm_is_the_agents():
    """`vftune run --keep-warm` and AgentConfig keep one default between them (60 s)."""
    from vftune.agent.loop import AgentConfig
    from vftune.config import RunConfig

    assert RunConfig().keep_warm_s == AgentConfig().keep_warm_s


def test_every_run_option_reads_the_environment_variable_named_after_it(monkeypatch):
    """README: every `vftune run` option is also VFTUNE_RUN_<OPTION> (its long name, upper case,
    dashes as underscores), whatever its field is called (--for, --retention, --keep-warm)."""
    ctx = run_cli.command.make_context("run", [], auto_envvar_prefix="VFTUNE_RUN")
    for param in run_cli.command.params:
        if not isinstance(param, click.Option) or param.name == "config":
            continue
        long_name = max(param.opts, key=len).lstrip("-")
        expected = "VFTUNE_RUN_" + long_name.upper().replace("-", "_")
        consulted = param.envvar or f"{ctx.auto_envvar_prefix}_{(param.name or '').upper()}"
        assert consulted == expected, (param.name, consulted)
    monkeypatch.setenv("VFTUNE_RUN_KEEP_WARM", "7")
    monkeypatch.setenv("VFTUNE_RUN_FOR", "3")
    params = run_cli.command.make_context("run", [], auto_envvar_prefix="VFTUNE_RUN").params
    assert params["keep_warm_s"] == 7 and params["run_for"] == 3
