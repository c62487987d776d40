"""Evidence v2's workloads: every new scenario key builds, runs and does what docs/scenarios.md says."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import VFTUNE
from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import pf_controller, vf_policy
from vftune.sim.engine import HostSim
from vftune.sim.host import SimHost
from vftune.sim.model import VfInput, vf_rates
from vftune.sim.scenario_file import ScenarioError, parse
from vftune.sim.scenarios import register_file
from vftune.sim.workload import Poll, Stream, Transmit

EVERY_KEY = """
name = "every-key"
description = "every Evidence v2 key at once"
duration_s = 240
[host]
cores = 8
ports = 1
overcommit = true
[noise]
sigma = 0.05
microburst_ms = 2
microburst_gain = 6
[[guest]]
name = "dpdk"
vcpus = 2
[[guest]]
name = "cdn"
vcpus = 2
[[guest]]
name = "app"
vcpus = 1
app_cpu = 0.8
[[guest]]
name = "kv"
vcpus = 4
[[vf]]
guest = "dpdk"
[[vf.phase]]
kind = "poll"
packet_bytes = 512
offered_bps = 2e9
[[vf]]
guest = "cdn"
[[vf.phase]]
kind = "tcp_tx"
packet_bytes = 1500
rtt_us = 80
[[vf]]
guest = "app"
guest_agent = false
incast_group = 1
[[vf.phase]]
kind = "udp"
packet_bytes = 600
offered_bps = 1e8
ramp_to_bps = 8e8
[[vf]]
guest = "kv"
queues = 4
incast_group = 1
[[vf.phase]]
kind = "rr"
request_bytes = 200
response_bytes = 16000
mtu = 9000
in_flight = 8
rtt_us = 40
service_us = 10
"""


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "k.toml"
    path.write_text(text)
    return str(path)


def test_a_file_with_every_new_key_sweeps_and_the_poll_mode_vf_raises_no_interrupts(tmp_path) -> None:
    path = _write(tmp_path, EVERY_KEY)
    out = subprocess.run([*VFTUNE, "sim", "sweep", "--scenario-file", path, "--json"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    points = json.loads(out.stdout)["points"]
    poll = [p["vfs"][0] for p in points]
    assert {v["kind"] for v in poll} == {"poll"}
    assert max(v["interrupts_per_s"] for v in poll) < 100
    assert len({v["goodput_bps"] for v in poll}) == 1, "its ITR changes nothing"
    kinds = [v["kind"] for v in points[0]["vfs"]]
    assert kinds == ["poll", "tcp_tx", "udp", "rr"]


def test_the_ramp_moves_the_offered_load_over_the_phase(tmp_path) -> None:
    spec = parse(EVERY_KEY, "k.toml").build(0)
    sim = HostSim(spec, 0, noise=False)
    itrs = [20_000] * len(spec.vfs)
    start = sim.steady_state(0.0, itrs).vfs[2].delivered_bps
    end = sim.steady_state(239.0, itrs).vfs[2].delivered_bps
    assert 0.09e9 < start < 0.11e9 and 0.75e9 < end < 0.85e9


def test_a_transmit_heavy_guest_sends_and_receives_only_acks() -> None:
    r = vf_rates(VfInput(Transmit(rtt_s=80e-6), 20_000, 1.0))
    assert r.tx_Bps > 20 * r.rx_Bps and r.delivered_bps > 1e9
    # Transmit completions are cleaned at interrupts: TCP Small Queues caps a long interval.
    slow = vf_rates(VfInput(Transmit(rtt_s=80e-6), 956, 1.0))
    assert slow.delivered_bps < r.delivered_bps


def test_microbursts_overflow_the_ring_at_long_intervals_where_a_smooth_load_does_not() -> None:
    udp = Stream(packet_bytes=1500, acked=False, offered_bps=2e9)
    smooth = vf_rates(VfInput(udp, 956, 1.0))
    bursty = vf_rates(VfInput(udp, 956, 1.0, microburst_gain=6.0, microburst_s=0.002))
    fast = vf_rates(VfInput(udp, 100_000, 1.0, microburst_gain=6.0, microburst_s=0.002))
    assert smooth.rx_pps == pytest.approx(2e9 / 8 / 1500, rel=1e-3)
    assert bursty.rx_pps < 0.8 * smooth.rx_pps and fast.rx_pps > bursty.rx_pps


INCAST = """
name = "incast"
[host]
ports = 1
[noise]
microburst_ms = 2
microburst_gain = 4
[[guest]]
name = "a"
vcpus = 4
[[guest]]
name = "b"
vcpus = 4
[[vf]]
guest = "a"
incast_group = 1
queues = 4
[[vf.phase]]
kind = "udp"
offered_bps = 2e9
[[vf]]
guest = "b"
incast_group = GROUP
queues = 4
[[vf.phase]]
kind = "udp"
offered_bps = 2e9
"""


def test_an_incast_group_shares_the_line_while_it_bursts() -> None:
    def delivered(group: str) -> float:
        spec = parse(INCAST.replace("GROUP", group), "i.toml").build(0)
        return HostSim(spec, 0, noise=False).steady_state(0.0, [100_000, 100_000]).vfs[0].delivered_bps

    together, apart = delivered("1"), delivered("2")
    assert apart > 1.9e9 and together < 0.7 * apart


def test_interrupts_cost_the_guests_own_application() -> None:
    spec = parse(EVERY_KEY, "k.toml").build(0)
    sim = HostSim(spec, 0, noise=False)
    slow = sim.steady_state(0.0, [2_000] * 4).vfs[2]
    fast = sim.steady_state(0.0, [200_000] * 4).vfs[2]
    assert 0.0 < fast.app_progress < slow.app_progress <= 1.0


def test_rss_queues_spread_the_work_and_the_interrupts() -> None:
    from vftune.sim.workload import RequestResponse

    rr = RequestResponse(request_bytes=200, response_bytes=4000, concurrency=16, rtt_s=40e-6, service_s=20e-6)
    one = vf_rates(VfInput(rr, 20_000, 1.0))
    four = vf_rates(VfInput(rr, 20_000, 1.0, queues=4))
    assert four.tx_pps > 1.5 * one.tx_pps and four.guest_cpu > one.guest_cpu
    assert four.latency_mean_s is not None and one.latency_mean_s is not None
    assert four.latency_mean_s < one.latency_mean_s


def test_overcommit_adds_run_queue_delay_to_response_times() -> None:
    text = EVERY_KEY.replace("cores = 8", "cores = 2")
    with_delay = HostSim(parse(text, "k.toml").build(0), 0, noise=False).steady_state(0.0, [20_000] * 4).vfs[3]
    without = HostSim(parse(text.replace("overcommit = true", "overcommit = false"), "k.toml").build(0), 0,
                      noise=False).steady_state(0.0, [20_000] * 4).vfs[3]
    assert with_delay.latency_mean_s is not None and without.latency_mean_s is not None
    assert with_delay.latency_mean_s > without.latency_mean_s + 100e-6


def test_the_vfs_own_guest_agent_setting_decides_its_drops(tmp_path) -> None:
    host = SimHost(register_file(_write(tmp_path, EVERY_KEY)), speed=float("inf"))
    app = next(vf for vf in host.inventory().vfs() if vf.guest and vf.guest.name == "app")
    kv = next(vf for vf in host.inventory().vfs() if vf.guest and vf.guest.name == "kv")
    assert host.vf_drops(app.pci).source == "unavailable"
    assert "[[vf]] guest_agent = false" in host.vf_drops(app.pci).reason
    assert host.vf_drops(kv.pci).source == "guest-agent"


BAD = [
    ('kind = "poll"', 'kind = "dpdk"', "vf[0].phase[0].kind", "'dpdk'"),
    ("queues = 4", "queues = 5", "vf[3].queues", "5"),
    ("mtu = 9000", "mtu = 9001", "vf[3].phase[0].mtu", "9001"),
    ("rtt_us = 80", "rtt_us = 80\nmtu = 9000", "vf[1].phase[0].mtu", "applies to kind rr only"),
    ("offered_bps = 1e8\n", "", "vf[2].phase[0].ramp_to_bps", "needs offered_bps"),
    ("ramp_to_bps = 8e8", "ramp_to_bps = -1", "vf[2].phase[0].ramp_to_bps", "-1"),
    ("microburst_gain = 6\n", "", "noise.microburst_gain", "required"),
    ("microburst_ms = 2", "microburst_ms = 0", "noise.microburst_ms", "0"),
    ("app_cpu = 0.8", "app_cpu = 1.5", "guest[2].app_cpu", "1.5"),
    ("incast_group = 1\n[[vf.phase]]\nkind = \"udp\"", "incast_group = \"a\"\n[[vf.phase]]\nkind = \"udp\"",
     "vf[2].incast_group", "'a'"),
    ("guest_agent = false", "guest_agent = 0", "vf[2].guest_agent", "0"),
    ("overcommit = true", "overcommit = \"yes\"", "host.overcommit", "'yes'"),
]


@pytest.mark.parametrize("old, new, key, value", BAD)
def test_a_bad_new_key_is_one_line_naming_key_and_value(old, new, key, value) -> None:
    assert old in EVERY_KEY
    with pytest.raises(ScenarioError) as err:
        parse(EVERY_KEY.replace(old, new, 1), "k.toml")
    message = str(err.value)
    assert "\n" not in message and message.startswith("k.toml") and key in message and value in message


def test_the_cli_rejects_a_bad_new_key_with_exit_2(tmp_path) -> None:
    path = _write(tmp_path, EVERY_KEY.replace("queues = 4", "queues = 9"))
    out = subprocess.run([*VFTUNE, "sim", "sweep", "--scenario-file", path], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "queues" in out.stderr


def test_the_agent_leaves_a_poll_mode_vf_alone_and_says_why(tmp_path) -> None:
    register_file(_write(tmp_path, EVERY_KEY.replace("duration_s = 240", "duration_s = 600")))
    host = SimHost("every-key", seed=1, speed=float("inf"))
    agent = Agent(host, None, vf_policy("search"), pf_controller("hybrid"), AgentConfig())
    agent.start("test")
    for _ in range(4 * 90):
        host.sleep(agent.config.interval)
        agent.tick()
    views = {v.guest: v for v in agent.view().vfs}
    poll = views["dpdk"]
    assert poll.state == "excluded" and poll.itr == 0 and host.vf_setting(poll.pci)[0] == 0
    assert "poll-mode" in str(poll.policy_state.get("reason"))
    assert views["cdn"].state != "excluded", "VFs whose interrupts move are tuned as before"


def test_every_new_workload_kind_is_typed() -> None:
    spec = parse(EVERY_KEY, "k.toml").build(0)
    assert isinstance(spec.vfs[0].workloads[0], Poll) and isinstance(spec.vfs[1].workloads[0], Transmit)
    assert spec.vfs[3].queues == 4 and spec.vfs[2].incast_group == spec.vfs[3].incast_group == 1
    assert spec.vm_by_name["app"].app_cpu == 0.8 and spec.overcommit and spec.microburst_s == 0.002
