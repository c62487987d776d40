"""Issue 14 end to end: `vftune run --policy fixed:20000` on the fixture host sets a VF's
rx-usecs inside its "guest" (a network namespace with a real qemu-ga) through the guest agent,
`vftune status` shows the guest-agent actuator, and SIGTERM puts the guest's value back.

The VF sits on the patched PF but its guest runs a stock ixgbevf (itr_capable 0), so
--guest-agent auto picks the agent; the guest's ethtool is the stand-in on qemu-ga's PATH."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from linux_host import make_tree

from conftest import VFTUNE, RunningAgent
from test_guest_agent_qga import GUEST, VF_MAC, VF_PCI, Agent, guest_ns, start_qga, wait_for  # noqa: F401 (fixture)
from vftune.hostdriver.linux.guest_agent import Limits, socket_connector
from vftune.hostdriver.linux.guest_wiring import GuestAgentWiring, JournalOfGuests
from vftune.model import Applied, Guest, VfInfo
from vftune.store.journal import Journal

pytest.importorskip("libvirt")
pytestmark = pytest.mark.root
RUNNER = Path(__file__).parent / "fixtures" / "agent_on_tree.py"
PF0_DEV = "sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0"


def start_run(tmp_path: Path, root: Path, sockets: Path, *extra: str) -> RunningAgent:
    """`vftune run --policy fixed:20000` on the fixture tree (fixtures/agent_on_tree.py), agents on sockets."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db, log = tmp_path / "vftune.db", tmp_path / f"run-{len(list(tmp_path.glob('run-*.log')))}.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(RUNNER), str(root), str(db), str(port), "policy=fixed:20000", "pf_mode=stock",
             f"guest_agent_sockets={sockets}", *extra],
            stderr=err, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, log.read_text()
        try:
            return httpx.get(f"{url}/healthz", timeout=1.0).json()["ticks"] >= 1
        except httpx.HTTPError:
            return False
    wait_for(up, "the agent to serve its API", 60)
    return RunningAgent(proc, url, db, log)


def status(url: str) -> dict:
    out = subprocess.run([*VFTUNE, "status", "--json", "--url", url], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture
def guest(tmp_path: Path, guest_ns: str) -> Agent:  # noqa: F811 (the imported fixture)
    agent = start_qga(tmp_path, guest_ns, "standin", standin=True)
    (agent.ethtool_dir / "vft0a.rx_usecs").write_text("1\n")  # ixgbevf's default: adaptive
    yield agent
    agent.stop()


def fixture_host(tmp_path: Path, agent: Agent) -> tuple[Path, Path]:
    root = tmp_path / "host"
    make_tree(root)
    (root / PF0_DEV / "sriov/0/itr_capable").write_text("0\n")  # the guest's ixgbevf is stock
    sockets = tmp_path / "agents"
    sockets.mkdir()
    (sockets / f"{GUEST}.sock").symlink_to(agent.socket)
    return root, sockets


def test_run_tunes_through_the_guest_agent_and_sigterm_puts_the_guest_value_back(tmp_path: Path, guest: Agent) -> None:
    root, sockets = fixture_host(tmp_path, guest)
    rx = guest.ethtool_dir / "vft0a.rx_usecs"
    run = start_run(tmp_path, root, sockets)
    try:
        wait_for(lambda: rx.read_text().strip() == "48", "the guest's rx-usecs to become 48 (20000/s)", 60)
        state = wait_for(lambda: (s := status(run.url)) and next(v for v in s["vfs"] if v["pci"] == VF_PCI)["itr"]
                         and s, "status to show the read-back ITR", 60)
        vf = next(v for v in state["vfs"] if v["pci"] == VF_PCI)
        assert vf["actuator"] == "guest-agent", vf
        assert "vft0a" in vf["actuator_reason"]
        assert vf["itr"] == 20345  # 48 us, read back from the guest's own ethtool -c
        summary = {a["pci"]: a for a in state["host"]["actuators"]}
        assert summary[VF_PCI]["actuator"] == "guest-agent"
        # A VF the patched PF can push stays on it; a stock PF's VF in a guest without an agent is "none".
        assert summary["0000:03:10.2"]["actuator"] == "patched"
        assert summary["0000:03:10.3"]["actuator"] == "none"
    finally:
        run.proc.send_signal(signal.SIGTERM)
        code = run.proc.wait(60)
    assert code == 0, run.log.read_text()
    assert rx.read_text().strip() == "1", run.log.read_text()  # the guest's own adaptive setting is back
    # The socket-drops reader shared vm-web0's agent socket with the actuator (one client at a time).
    assert "guest vm-web0: reading its socket drops through its guest agent" in run.log.read_text()


def test_owner_change_drops_the_old_guests_entry_and_a_restart_keeps_it(tmp_path: Path, guest: Agent) -> None:
    rx = guest.ethtool_dir / "vft0a.rx_usecs"
    sockets = tmp_path / "agents"
    sockets.mkdir()
    for name in ("vm-web0", "vm-web1"):  # both "guests" are the namespace's qemu-ga
        (sockets / f"{name}.sock").symlink_to(guest.socket)
    w = GuestAgentWiring("auto", socket_connector(lambda name: sockets / f"{name}.sock"), JournalOfGuests(Journal.memory()),
                         limits=Limits(guest_min_interval_s=0.0, backoff_initial_s=60.0))
    stock = "stock PF"

    def held_by(name: str, pid: int) -> list[VfInfo]:
        return [VfInfo("enp3s0f1", 0, VF_PCI, "vfio-pci", Guest(name, f"uuid-{name}", pid), VF_MAC)]

    def write(itr: int) -> Applied:
        assert w.submit(VF_PCI, itr).pending
        results: list[Applied] = []
        wait_for(lambda: results.extend(w.collect()) or results, "the write's outcome")
        return results[0]

    try:
        w.sync(held_by("vm-web0", 4101), lambda _vf: stock)
        assert write(20000) == Applied(VF_PCI, "itr", 20345, 0, 20345)
        assert rx.read_text().strip() == "48" and [e.original.rx_usecs for e in w.journal.entries()] == [1]
        status = w.status(VF_PCI)
        assert status is not None and status.actuator == "guest-agent" and "vft0a" in status.reason

        # The guest restarts (a new QEMU pid): checked again, and its original is still owed.
        w.sync(held_by("vm-web0", 5101), lambda _vf: stock)
        assert len(w.journal.entries()) == 1

        # The VF moves to another guest: the old guest's entry can never apply there, it is dropped.
        w.sync(held_by("vm-web1", 4102), lambda _vf: stock)
        assert w.journal.entries() == []
        assert write(10000) == Applied(VF_PCI, "itr", 9965, 20345, 9965)  # journaled afresh for vm-web1
        assert [(e.vf.guest, e.original.rx_usecs) for e in w.journal.entries()] == [("vm-web1", 48)]
        assert [r.ok for r in w.restore()] == [True]
        assert rx.read_text().strip() == "48" and w.journal.entries() == []  # what vm-web1 had
    finally:
        w.close()


@pytest.mark.parametrize("how", ["vftune restore", "restart"])
def test_after_kill_9_the_journal_puts_the_guest_value_back(tmp_path: Path, guest: Agent, guest_ns: str,  # noqa: F811
                                                           how: str) -> None:
    ns = guest_ns
    root, sockets = fixture_host(tmp_path, guest)
    rx = guest.ethtool_dir / "vft0a.rx_usecs"
    run = start_run(tmp_path, root, sockets)
    try:
        wait_for(lambda: rx.read_text().strip() == "48", "the guest's rx-usecs to become 48", 60)
    finally:
        run.proc.kill()
        run.proc.wait(30)
    assert rx.read_text().strip() == "48"  # a crash restores nothing by itself
    # qemu-ga in unix-listen mode can stop listening for many seconds after its client is killed
    # mid-call (seen here: ECONNREFUSED for > 5 s). On a real host the agent's channel belongs to
    # QEMU/libvirt, not to vftune, so its crash leaves the channel up: a fresh qemu-ga on the same
    # "guest" (the same interface state) stands for that.
    guest.stop()
    fresh = start_qga(tmp_path, ns, "after-crash", standin=True)
    (fresh.ethtool_dir / "vft0a.rx_usecs").write_text(rx.read_text())
    rx = fresh.ethtool_dir / "vft0a.rx_usecs"
    (sockets / f"{GUEST}.sock").unlink()
    (sockets / f"{GUEST}.sock").symlink_to(fresh.socket)
    if how == "vftune restore":
        out = subprocess.run([*VFTUNE, "restore", "--db", str(run.db), "--sysfs-root", str(root / "sys"),
                              "--procfs-root", str(root / "proc"), "--libvirt-uri",
                              f"test://{(root / 'libvirt.xml').resolve()}", "--guest-agent-sockets", str(sockets)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"restored {VF_PCI}" in out.stdout
    else:  # the next start restores first; with the guest agent off it does not tune the VF again
        again = start_run(tmp_path, root, sockets, "guest_agent=off")
        try:
            wait_for(lambda: rx.read_text().strip() == "1", "the restart to put rx-usecs 1 back", 60)
            vf = next(v for v in status(again.url)["vfs"] if v["pci"] == VF_PCI)
            assert vf["actuator"] == "none" and "--guest-agent off" in vf["actuator_reason"]
        finally:
            again.proc.send_signal(signal.SIGTERM)
            assert again.proc.wait(60) == 0, again.log.read_text()
    assert rx.read_text().strip() == "1"
    fresh.stop()
