"""Scenario files (docs/scenarios.md): the contract, the built-ins, and bad files as a user meets them."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import VFTUNE
from vftune.cli import cli
from vftune.sim.host import SimHost
from vftune.sim.scenario_file import ScenarioError, load, parse
from vftune.sim.scenarios import SCENARIOS, build, register_file
from vftune.sim.workload import Idle, RequestResponse, Stream

# The example, every key of the contract.
CONTRACT = """
name = "onoff"
description = "a bulk tenant and a key-value tenant that sleeps half the time"
duration_s = 1200
cycle_s = 20
[host]
cores = 12
cpu_ghz = 2.6
nic = "82599"
ports = 1
irq_time_accounting = true
posted_interrupts = false
counters = "stock"
[noise]
sigma = 0.05
burst = 1.5
[[guest]]
name = "vm1"
vcpus = 2
[[guest]]
name = "vm2"
vcpus = 2
[[vf]]
guest = "vm1"
port = 0
[[vf.phase]]
at_s = 0
kind = "tcp"
packet_bytes = 1500
offered_bps = 3e9
window_bytes = 65536
rtt_us = 60
[[vf]]
guest = "vm2"
port = 0
[[vf.phase]]
at_s = 0
kind = "rr"
request_bytes = 100
response_bytes = 100
in_flight = 2
service_us = 4
rtt_us = 30
[[vf.phase]]
at_s = 10
kind = "idle"
[[vf]]
port = 0
[[vf.phase]]
kind = "udp"
packet_bytes = 256
offered_bps = 1e8
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_contract_example_builds_the_host_it_describes(tmp_path) -> None:
    spec = load(write(tmp_path, CONTRACT)).build(seed=0)
    assert spec.name == "onoff" and spec.duration_s == 1200 and spec.cycle_s == 20
    assert spec.host_cpus == 12 and spec.cpu_ghz == 2.6 and spec.nic == "82599" and spec.num_pfs == 1
    assert spec.noise_sigma == 0.05 and spec.burst_gain == 1.5 and not spec.patched_counters
    assert [p.start_s for p in spec.phases] == [0.0, 10.0]
    bulk, kv, orphan = spec.vfs
    assert bulk.guest == "vm1" and kv.guest == "vm2" and orphan.guest is None
    w = spec.workload(bulk, 1)
    assert isinstance(w, Stream) and w.acked and w.window_bytes is not None
    assert abs(w.window_bytes / 65536 - 1) <= 0.04 and abs(w.rtt_s / 60e-6 - 1) <= 0.04  # seeded jitter
    assert isinstance(spec.workload(kv, 0), RequestResponse) and isinstance(spec.workload(kv, 1), Idle)
    u = spec.workload(orphan, 0)
    assert isinstance(u, Stream) and not u.acked and u.packet_bytes == 256
    # The phases repeat with the cycle.
    assert spec.phase_index(25.0) == 0 and spec.phase_index(35.0) == 1


def test_the_seed_picks_one_host_of_the_family(tmp_path) -> None:
    scenario = load(write(tmp_path, CONTRACT))
    a, b, c = scenario.build(1), scenario.build(1), scenario.build(2)
    assert a == b and a != c


def test_every_builtin_is_a_file_that_builds() -> None:
    assert len(SCENARIOS) >= 30
    for name in SCENARIOS:
        spec = build(name, seed=3)
        assert spec.name == name and spec.vfs and SCENARIOS[name].description
    # Wu & Wang's one experiment at 15 sizes (paper-3vm is their 15000-byte case, paper-3vm-512 size 3).
    assert all(f"paper-{n}vm" in SCENARIOS for n in range(1, 16)) and "paper-3vm-512" in SCENARIOS
    assert {"steps-5s", "steps-10s", "steps-30s", "steps-60s", "bulk-autotuned", "saturated-rr-bulk",
            "dense-44vf", "noisy-offered", "udp-small", "posted-interrupts", "no-irq-accounting"} <= set(SCENARIOS)
    assert len(build("dense-44vf").vfs) == 44 and build("dense-44vf").num_pfs == 2
    # Autotuned windows in the bulk scenario: nothing pinned.
    assert all(w.window_bytes is None for vf in build("bulk-autotuned").vfs for w in vf.workloads
               if isinstance(w, Stream))


BAD = [
    ('kind = "rr"', 'kind = "warp"', "vf[1].phase[0].kind", "'warp'"),
    ("cores = 12", "cores = 0", "host.cores", "0"),
    ('nic = "82599"', 'nic = "e1000"', "host.nic", "'e1000'"),
    ('counters = "stock"', 'counters = "fresh"', "host.counters", "'fresh'"),
    ("sigma = 0.05", "sigma = -1", "noise.sigma", "-1"),
    ('guest = "vm2"', 'guest = "vm9"', "vf[1].guest", "'vm9'"),
    ("at_s = 10", "at_s = 30", "vf[1].phase[1].at_s", "30"),
    ("in_flight = 2", "in_flight = 0", "vf[1].phase[0].in_flight", "0"),
    ("rtt_us = 60", "rtt_us = \"fast\"", "vf[0].phase[0].rtt_us", "'fast'"),
    ("service_us = 4", "service_ms = 4", "vf[1].phase[0].service_ms", "4"),
    ('name = "onoff"', "", "name", "None"),
    ("port = 0\n[[vf.phase]]\nkind", "port = 3\n[[vf.phase]]\nkind", "vf[2].port", "3"),
    ("[host]", "[host", "not valid TOML", ""),
]


@pytest.mark.parametrize("old, new, key, value", BAD)
def test_a_bad_file_is_one_line_naming_file_key_and_value(tmp_path, old, new, key, value) -> None:
    assert old in CONTRACT
    path = write(tmp_path, CONTRACT.replace(old, new, 1))
    with pytest.raises(ScenarioError) as err:
        load(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(path) and key in message and value in message


def test_missing_file_names_it(tmp_path) -> None:
    with pytest.raises(ScenarioError, match="no such file"):
        load(tmp_path / "nope.toml")


@pytest.mark.parametrize("command", [["sim", "sweep"], ["bench", "--duration", "60"]])
def test_cli_rejects_a_bad_file_with_exit_2_and_one_line(tmp_path, command) -> None:
    path = write(tmp_path, CONTRACT.replace('kind = "rr"', 'kind = "warp"'))
    out = subprocess.run([*VFTUNE, *command, "--scenario-file", path, "--json"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and "kind" in lines[0] and "warp" in lines[0]


def _hostile(tmp_path: Path, kind: str) -> str:
    if kind == "device":
        return "/dev/zero"
    if kind == "fifo":
        path = tmp_path / "scenario.fifo"
        os.mkfifo(path)  # no writer ever comes: an unbounded read would block for good
        return str(path)
    path = tmp_path / "huge.toml"
    with path.open("wb") as fh:
        fh.truncate(64 * 1024 * 1024)  # sparse: a 64 MiB "scenario"
    return str(path)


@pytest.mark.parametrize("kind, why", [("device", "not a regular file"), ("fifo", "not a regular file"),
                                       ("huge", "larger than")])
@pytest.mark.parametrize("command", [["sim", "sweep"], ["bench", "--duration", "60"], ["run", "--for", "1"]])
def test_a_device_fifo_or_huge_file_is_refused_in_one_line_without_reading_it(tmp_path, kind, why, command) -> None:
    path = _hostile(tmp_path, kind)
    extra = ["--db", str(tmp_path / "h.db")] if command[0] == "run" else []
    # The timeout only turns a hang into a failure: the refusal needs no reading at all.
    out = subprocess.run([*VFTUNE, *command, *extra, "--scenario-file", path], capture_output=True, text=True,
                         timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert path in lines[0] and why in lines[0] and "Traceback" not in out.stderr


def test_run_rejects_a_bad_file_before_writing_anything(tmp_path) -> None:
    path = write(tmp_path, CONTRACT.replace("cores = 12", "cores = -2"))
    out = subprocess.run([*VFTUNE, "run", "--scenario-file", path, "--db", str(tmp_path / "h.db"), "--for", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "host.cores" in out.stderr
    assert not (tmp_path / "h.db").exists()


def test_run_serves_the_host_a_file_describes(tmp_path) -> None:
    path = write(tmp_path, CONTRACT)
    proc = subprocess.Popen([*VFTUNE, "run", "--scenario-file", path, "--db", str(tmp_path / "h.db"),
                             "--listen", "127.0.0.1:0", "--speed", "20", "--for", "4", "--log-level", "info"],
                            stderr=subprocess.PIPE, text=True)
    port = None
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening on http://" in line:
            port = int(line.split("listening on http://")[1].split()[0].rsplit(":", 1)[1].rstrip(","))
            assert "scenario=onoff" in line
            break
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/vfs", timeout=10) as resp:
        vfs = json.load(resp)
    assert len(vfs["vfs"] if isinstance(vfs, dict) else vfs) == 3
    proc.stderr.read()
    assert proc.wait(timeout=30) == 0


def test_sweep_and_bench_take_files(tmp_path) -> None:
    path = write(tmp_path, CONTRACT)
    result = CliRunner().invoke(cli, ["sim", "sweep", "--scenario-file", path, "--json", "--time", "2"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["scenario"] == "onoff"
    point = body["points"][0]
    assert {"itr", "interval_us", "throughput_bps", "cpu", "interrupts_per_s", "latency_us_mean",
            "latency_us_p99", "vfs"} <= set(point)
    kv = next(v for v in point["vfs"] if v["kind"] == "rr")
    assert kv["latency_us_p99"] >= kv["latency_us_mean"] > 30
    result = CliRunner().invoke(cli, ["bench", "--scenario-file", path, "--policy", "fixed-20000", "--duration", "60",
                                      "--jobs", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert {r["scenario"] for r in json.loads(result.output)["results"]} == {"onoff"}


def test_a_file_may_replace_a_builtin_of_the_same_name(tmp_path) -> None:
    original = SCENARIOS["rr-mix"]
    try:
        path = write(tmp_path, CONTRACT.replace('name = "onoff"', 'name = "rr-mix"'))
        assert register_file(path) == "rr-mix"
        assert len(build("rr-mix").vfs) == 3
    finally:
        SCENARIOS["rr-mix"] = original


def test_host_profiles_show_in_what_the_agent_reads() -> None:
    posted = SimHost("posted-interrupts", speed=float("inf"))
    posted.sleep(10)
    snap = posted.snapshot()
    assert all(c.interrupts == 0 and c.interrupts_frozen for c in snap.vfs.values())
    assert any("posted interrupts" in m for m in posted.capabilities().missing)
    blind, seeing = SimHost("no-irq-accounting", speed=float("inf")), SimHost("posted-interrupts", speed=float("inf"))
    blind.sleep(10)
    assert blind.snapshot().host_irq_cpu == 0.0 < blind.sim.host_irq_cpu  # the work happened, unseen
    assert any("IRQ_TIME_ACCOUNTING" in m for m in blind.capabilities().missing)
    assert not any("IRQ_TIME_ACCOUNTING" in m for m in seeing.capabilities().missing)


def test_builtin_text_is_what_the_parser_reads() -> None:
    # Parsing is pure: the same text gives the same scenario, so a copied built-in is a starting point.
    from importlib import resources

    text = resources.files("vftune.sim").joinpath("builtin/rr-mix.toml").read_text()
    assert parse(text, "a.toml").build(0) == build("rr-mix", 0)


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == float("inf") else "-inf" if v == float("-inf") else repr(v))
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string
    return str(v)


def _pairs(table: dict) -> list[str]:
    return [f"{k} = {_value(v)}" for k, v in table.items() if v is not None]


# Any document a user could write is either a scenario or one ScenarioError line: never a traceback.
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**7), st.floats(allow_nan=True),
                     st.text(max_size=8), st.sampled_from(["tcp", "udp", "rr", "idle", "tcp_tx", "poll", "82599",
                                                          "pro1000", "stock", "patched", "vm1"]))
_keys = st.sampled_from(["name", "kind", "at_s", "cores", "ports", "nic", "guest", "port", "vcpus", "in_flight",
                         "packet_bytes", "offered_bps", "window_bytes", "rtt_us", "sigma", "burst", "cycle_s",
                         "duration_s", "pps", "counters", "service_us", "bogus", "ramp_to_bps", "mtu", "queues",
                         "incast_group", "guest_agent", "app_cpu", "microburst_ms", "microburst_gain",
                         "overcommit"])
_tables = st.dictionaries(_keys, _scalars, max_size=6)


@given(top=st.dictionaries(_keys, _scalars, max_size=5), host=_tables, guests=st.lists(_tables, max_size=2),
       vfs=st.lists(st.fixed_dictionaries({"phase": st.lists(_tables, max_size=3)}, optional={"guest": _scalars,
                                                                                            "port": _scalars}),
                    max_size=3))
@settings(max_examples=150, deadline=None)
def test_any_document_is_a_scenario_or_one_error_line(top, host, guests, vfs) -> None:
    text = "\n".join([*_pairs(top), "[host]", *_pairs(host)]
                     + [line for g in guests for line in ("[[guest]]", *_pairs(g))]
                     + [line for vf in vfs for line in ("[[vf]]", *_pairs({k: v for k, v in vf.items() if k != "phase"}),
                                                         *(x for ph in vf["phase"] for x in ("[[vf.phase]]", *_pairs(ph))))])
    try:
        scenario = parse(text, "x.toml")
    except ScenarioError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("x.toml")
        return
    spec = scenario.build(0)
    assert spec.name == scenario.name and len(spec.vfs) == len(vfs)


def test_every_held_out_host_is_a_file_that_builds() -> None:
    # README.md quotes bench scores on these files; a format change must not strand them.
    files = sorted((Path(__file__).parent.parent / "bench" / "heldout").glob("*.toml"))
    assert len(files) >= 5
    for path in files:
        scenario = load(path)
        assert scenario.name == path.stem and scenario.description
        spec = scenario.build(21)
        assert any(vf.guest is not None for vf in spec.vfs)
