"""A guest's own CPU accounting (guest-get-cpustats): the reply's parser, the reader that asks for
it beside the socket drops (a wire-protocol fake, and a real qemu-ga reading this machine's
/proc/stat), and the simulated host answering it."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from fake_qga import FakeQga
from qga_process import QGA, qga_argv, start_qga_process, stop_qga_process
from waiting import wait_for

from vftune.agent.loop import Agent, AgentConfig
from vftune.agent.policies import pf_controller, vf_policy
from vftune.api.metrics import build_registry
from vftune.hostdriver.linux.guest_agent import socket_connector
from vftune.hostdriver.linux.guest_agent.cpustats import CpuStatsError, parse_cpustats
from vftune.hostdriver.linux.guest_agent.socket_drops import DropsLimits, DropsReading, GuestDropsReader
from vftune.model import GUEST_CLOCK_TICK_S, GuestCpuTimes
from vftune.sim.host import SimHost
from vftune.store.db import Store

REAL_REPLY = json.loads((Path(__file__).parent / "fixtures" / "guest_cpu" / "qemu-ga-7.2.22.json").read_text())
FAST = DropsLimits(interval_s=0.5, max_age_s=2.0, call_timeout_s=5.0, read_deadline_s=10.0,
                   backoff_initial_s=5.0, backoff_max_s=60.0)


# -- the parser ----------------------------------------------------------------------------------


def test_a_real_qemu_ga_reply_sums_its_vcpus_in_seconds() -> None:
    """qemu-ga 7.2.22's reply on this two-CPU machine, captured verbatim (milliseconds per vCPU)."""
    times = parse_cpustats(REAL_REPLY)
    a, b = REAL_REPLY
    assert times.user == pytest.approx((a["user"] + a["nice"] + b["user"] + b["nice"]) / 1000)
    assert times.interrupts == pytest.approx((a["irq"] + a["softirq"] + b["irq"] + b["softirq"]) / 1000)
    assert times.idle == pytest.approx((a["idle"] + a["iowait"] + b["idle"] + b["iowait"]) / 1000)
    assert times.system == pytest.approx((a["system"] + b["system"]) / 1000)
    assert times.steal == pytest.approx((a["steal"] + b["steal"]) / 1000)
    # Whole clock ticks of the guest's kernel (USER_HZ), in milliseconds: what the simulated host's
    # guests report too.
    tick_ms = round(GUEST_CLOCK_TICK_S * 1000)
    assert all(v % tick_ms == 0 for cpu in REAL_REPLY for k, v in cpu.items() if k not in ("type", "cpu"))


def test_a_kernel_without_the_later_columns_counts_them_zero() -> None:
    """qemu-ga sends iowait, irq, softirq and steal only when the guest's /proc/stat has them."""
    reply = [{"type": "linux", "cpu": 0, "user": 1500, "nice": 500, "system": 250, "idle": 7000}]
    assert parse_cpustats(reply) == GuestCpuTimes(user=2.0, system=0.25, interrupts=0.0, idle=7.0, steal=0.0)


ENTRY = {"type": "linux", "cpu": 0, "user": 1, "nice": 0, "system": 0, "idle": 0}


@pytest.mark.parametrize(("reply", "message"), [
    ({"cpu": 0}, "guest-get-cpustats: the reply is {'cpu': 0}, not a list of vCPUs"),
    ([], "guest-get-cpustats: the reply lists no vCPU"),
    (["cpu0 1 2 3"], "guest-get-cpustats: vCPU entry 0 is 'cpu0 1 2 3', not an object"),
    ([{**ENTRY, "type": "windows"}], "guest-get-cpustats: vCPU entry 0: type 'windows', only 'linux' is read"),
    ([{**ENTRY, "cpu": -1}], "guest-get-cpustats: vCPU entry 0: cpu is -1, not a CPU number"),
    ([ENTRY, ENTRY], "guest-get-cpustats: vCPU entry 1: cpu 0 is listed twice"),
    ([{k: v for k, v in ENTRY.items() if k != "idle"}], "guest-get-cpustats: vCPU entry 0: no idle"),
    ([{**ENTRY, "user": 1.5}], "guest-get-cpustats: vCPU entry 0: user is 1.5, not a count of milliseconds"),
    ([{**ENTRY, "softirq": "12"}], "guest-get-cpustats: vCPU entry 0: softirq is '12', not a count of milliseconds"),
    ([{**ENTRY, "steal": True}], "guest-get-cpustats: vCPU entry 0: steal is True, not a count of milliseconds"),
])
def test_a_reply_that_is_not_qemu_gas_is_one_line_naming_the_value(reply: Any, message: str) -> None:
    with pytest.raises(CpuStatsError) as err:
        parse_cpustats(reply)
    assert str(err.value) == message


MILLIS = st.integers(0, 2**64 - 1)
OPTIONAL = ("iowait", "irq", "softirq", "steal", "guest", "guestnice")


@st.composite
def replies(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """A reply as qga/commands-posix.c builds it (keys in any order, the optional ones present
    from some column on), and the per-field sums it holds."""
    cpus = draw(st.lists(st.integers(0, 4095), min_size=1, max_size=16, unique=True))
    present = OPTIONAL[:draw(st.integers(0, len(OPTIONAL)))]
    sums: dict[str, int] = {}
    reply = []
    for cpu in cpus:
        entry: dict[str, Any] = {"type": "linux", "cpu": cpu}
        for key in ("user", "nice", "system", "idle", *present):
            entry[key] = value = draw(MILLIS)
            sums[key] = sums.get(key, 0) + value
        reply.append(dict(draw(st.permutations(list(entry.items())))))
    return reply, sums


@given(replies())
def test_any_reply_qemu_ga_can_send_sums_exactly(case: tuple[list[dict[str, Any]], dict[str, int]]) -> None:
    reply, sums = case
    times = parse_cpustats(reply)

    def got(*keys: str) -> float:
        return sum(sums.get(k, 0) for k in keys) / 1000.0

    assert times == GuestCpuTimes(user=got("user", "nice"), system=got("system"), interrupts=got("irq", "softirq"),
                                  idle=got("idle", "iowait"), steal=got("steal"))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
                    max_leaves=20)


@given(JSON)
def test_anything_else_raises_only_the_parsers_error(reply: Any) -> None:
    try:
        times = parse_cpustats(reply)
    except CpuStatsError as exc:
        assert "\n" not in str(exc)
    else:
        assert times.total >= 0


# -- the reader ----------------------------------------------------------------------------------


class ManualClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def files() -> dict[str, bytes]:
    fixtures = Path(__file__).parent / "fixtures" / "guest_net"
    return {"/proc/net/snmp": (fixtures / "snmp").read_bytes(), "/proc/net/snmp6": (fixtures / "snmp6").read_bytes()}


def reader_for(sock: Path, **kwargs: Any) -> GuestDropsReader:
    return GuestDropsReader(socket_connector(lambda _g: sock), limits=FAST, clock=ManualClock(), **kwargs)


def read_once(agent: FakeQga) -> DropsReading:
    r = reader_for(agent.path)
    try:
        r.track(["vm-a"])
        wait_for(lambda: r.latest(), "a reading")
        reading = r.reading("vm-a")
        assert reading is not None
        return reading
    finally:
        r.close()


def test_the_reading_carries_the_guests_cpu_when_its_agent_has_the_command(
        tmp_path: Path, files: dict[str, bytes]) -> None:
    agent = FakeQga(tmp_path / "a.sock", files, cpustats=REAL_REPLY)
    try:
        reading = read_once(agent)
        assert reading.count == 0 and reading.cpu == parse_cpustats(REAL_REPLY)
        assert "fake: guest-get-cpustats" in agent.events
    finally:
        agent.close()


def test_an_agent_without_the_command_is_never_asked_and_its_drops_still_read(
        tmp_path: Path, files: dict[str, bytes]) -> None:
    """qemu-ga before 7.1 does not list guest-get-cpustats in guest-info."""
    agent = FakeQga(tmp_path / "a.sock", files)
    try:
        reading = read_once(agent)
        assert reading.count == 0 and reading.cpu is None
        assert "fake: guest-get-cpustats" not in agent.events
    finally:
        agent.close()


@pytest.mark.parametrize(("answer", "logged"), [
    ({"error": {"class": "GenericError", "desc": "can't open file /proc/stat: Permission denied"}},
     "can't open file /proc/stat: Permission denied; its own CPU accounting is not read"),
    ([{"type": "linux", "cpu": 0, "user": -5, "nice": 0, "system": 0, "idle": 0}],
     "guest vm-a: guest-get-cpustats: vCPU entry 0: user is -5, not a count of milliseconds; "
     "its own CPU accounting is not read"),
])
def test_a_failing_cpu_read_is_logged_once_and_leaves_the_drops(
        tmp_path: Path, files: dict[str, bytes], answer: Any, logged: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "vftune.linux.guest_drops")
    agent = FakeQga(tmp_path / "a.sock", files, cpustats=answer)
    clock = ManualClock()
    r = GuestDropsReader(socket_connector(lambda _g: agent.path), limits=FAST, clock=clock)
    try:
        r.track(["vm-a"])
        wait_for(lambda: r.latest(), "the first reading")
        clock.t += FAST.interval_s
        wait_for(lambda: (s := r.status("vm-a")) is not None and s.reads >= 2, "the second reading")
        reading = r.reading("vm-a")
        assert reading is not None and reading.count == 0 and reading.cpu is None
        lines = [rec.getMessage() for rec in caplog.records if "CPU accounting" in rec.getMessage()]
        assert len(lines) == 1 and lines[0].endswith(logged), lines
    finally:
        r.close()
        agent.close()


@pytest.fixture
def qga(tmp_path: Path) -> Iterator[Path]:
    if QGA is None:
        pytest.skip("qemu-ga is not installed")
    sock, state = tmp_path / "qga.sock", tmp_path / "state"
    state.mkdir()
    proc = start_qga_process(qga_argv(sock, state, tmp_path / "qga.pid"), sock, tmp_path / "qga.log")
    yield sock
    stop_qga_process(proc)


def test_a_real_qemu_ga_reports_this_machines_cpu(qga: Path) -> None:
    """The real agent reads this machine's /proc/stat: one entry per CPU, and time moves on."""
    r = GuestDropsReader(socket_connector(lambda _g: qga), limits=FAST)
    try:
        r.track(["vm-real"])
        first = wait_for(lambda: (x := r.reading("vm-real")) is not None and x.cpu is not None and x, "a reading")
        second = wait_for(lambda: (x := r.reading("vm-real")) is not None and x.read_at > first.read_at and x,
                          "a second reading")
        assert first.cpu is not None and second.cpu is not None
        assert second.cpu.total > first.cpu.total  # every CPU's clock advances, busy or idle
        elapsed = (second.read_at - first.read_at) * (os.cpu_count() or 1)
        # CPU-seconds over the reads' interval (seconds, not qemu-ga's milliseconds): the bounds
        # leave room for /proc/stat's 10-ms ticks and for how late in each read the call came.
        assert 0.5 * elapsed - 1.0 < second.cpu.total - first.cpu.total < 2.0 * elapsed + 1.0
    finally:
        r.close()


# -- the simulated host --------------------------------------------------------------------------


def test_the_simulated_host_accounts_every_vcpu_second() -> None:
    """Guests with an agent report user, interrupts, idle and steal that add up to their vCPUs'
    seconds; their interrupt time is the network work the guest's CPU figure counts."""
    host = SimHost("busy-guests", seed=5, speed=float("inf"))
    spec = host.spec
    host.sleep(10.0)
    before = host.snapshot()
    host.sleep(20.0)
    after = host.snapshot()
    with_agent = {vm.name for vm in spec.vms if spec.guest_has_agent(vm.name)}
    assert set(after.guest_cpu_times) == with_agent and with_agent
    for vm in spec.vms:
        if vm.name not in with_agent:
            continue
        a, b = after.guest_cpu_times[vm.name], before.guest_cpu_times[vm.name]
        # In the guest kernel's clock ticks, as qemu-ga reports them (its reply captured here is
        # in whole 10-ms ticks too): within a tick per field and reading.
        for reading in (a, b):
            for v in (reading.user, reading.interrupts, reading.idle, reading.steal):
                assert v / GUEST_CLOCK_TICK_S == pytest.approx(round(v / GUEST_CLOCK_TICK_S), abs=1e-6)
        assert a.total - b.total == pytest.approx(20.0 * vm.vcpus, abs=4 * GUEST_CLOCK_TICK_S)
        busy = (a.user - b.user) + (a.system - b.system) + (a.interrupts - b.interrupts)
        assert busy == pytest.approx(after.guest_cpu[vm.name] - before.guest_cpu[vm.name],
                                     abs=3 * GUEST_CLOCK_TICK_S)
        assert a.interrupts > b.interrupts  # every guest here receives


def test_the_agent_shows_each_guests_interrupt_time(tmp_path: Path) -> None:
    """On the simulated host the agent's view and its metrics carry the guest's own interrupt
    and process CPU for VFs whose guest runs an agent, and leave them unknown for the others."""
    host = SimHost("dpdk-neighbours", seed=5, speed=float("inf"))  # two of its five guests run an agent
    agent = Agent(host, Store(tmp_path / "h.db"), vf_policy("observe"), pf_controller("stock"), AgentConfig())
    agent.start("test")
    for _ in range(40):
        host.sleep(agent.config.interval)
        agent.tick()
    view = agent.view()
    with_agent = {vm.name for vm in host.spec.vms if host.spec.guest_has_agent(vm.name)}
    shown = {vf.guest: vf for vf in view.vfs if vf.guest is not None}
    assert shown.keys() >= with_agent
    for guest, vf in shown.items():
        if guest not in with_agent:
            assert vf.guest_irq_cpu is None and vf.guest_user_cpu is None
            continue
        assert vf.guest_irq_cpu is not None and vf.guest_user_cpu is not None and vf.guest_cpu is not None
        # The guest's own split covers what the host sees of it (background and application are user time).
        assert vf.guest_irq_cpu + vf.guest_user_cpu == pytest.approx(vf.guest_cpu, rel=0.05)
        assert vf.guest_irq_cpu > 0
    text = generate_latest(build_registry(lambda: view)).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    series = {s.labels["guest"]: s.value for s in families["vftune_vf_guest_irq_cpu_ratio"].samples}
    assert series.keys() == with_agent & shown.keys()
    agent.shutdown()
