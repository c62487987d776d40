"""Guests from libvirt's test driver: hostdev ownership, lifecycle events, reconnects, faults."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from linux_host import make_host, make_tree

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.libvirt_guests import (
    MISSING_LIBVIRT,
    Backoff,
    DomainRecord,
    GuestDirectory,
    GuestView,
    guests_from_domains,
    hostdev_addresses,
)
from vftune.model import VfActuator

libvirt = pytest.importorskip("libvirt")
WAIT_S = 10.0  # upper bound for a libvirt event to arrive; a pass takes milliseconds


def vfs_of(inv, guest: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {vf.pci for vf in inv.vfs() if vf.guest and vf.guest.name == guest}


def test_lifecycle_events_refresh_the_inventory(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path)
    changed = threading.Event()
    host.add_inventory_listener(changed.set)
    try:
        inv = host.inventory()
        db_vfs = vfs_of(inv, "vm-db0")
        assert db_vfs == {hosttree.vf_bdf(pf, n) for (pf, n), g in hosttree.VF_OWNERS.items() if g == "vm-db0"}
        changed.clear()
        host.libvirt_connection().lookupByName("vm-db0").destroy()
        assert changed.wait(WAIT_S), "no lifecycle event after destroy"
        inv = host.inventory()
        assert vfs_of(inv, "vm-db0") == set()
        assert all(inv.vf(pci).guest is None for pci in db_vfs)
        assert "vm-db0" not in host.snapshot().guest_cpu
        changed.clear()
        host.libvirt_connection().lookupByName("vm-stopped").create()
        assert changed.wait(WAIT_S), "no lifecycle event after start"
        guest = host.inventory().vf(hosttree.vf_bdf(*hosttree.STOPPED_GUEST_VF)).guest
        assert guest is not None and guest.name == "vm-stopped" and guest.pid is None  # no QEMU in procfs
    finally:
        host.close()


def test_node_devices_list_the_same_vfs_as_sysfs(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path)
    try:
        inv = host.inventory()
        conn = host.libvirt_connection()
        for pf in inv.pfs[:2]:
            dev = conn.nodeDeviceLookupByName("pci_" + pf.pci.replace(":", "_").replace(".", "_"))
            caps = ET.fromstring(dev.XMLDesc(0)).findall(
                "./capability[@type='pci']/capability[@type='virt_functions']/address")
            addrs = [f"{int(a.get('domain'), 0):04x}:{int(a.get('bus'), 0):02x}:{int(a.get('slot'), 0):02x}."
                     f"{int(a.get('function'), 0):x}" for a in caps]
            assert addrs == [vf.pci for vf in pf.vfs]
    finally:
        host.close()


def test_malformed_domain_xml_is_reported_and_other_guests_kept() -> None:
    good = hosttree.libvirt_node_xml().split("<domain", 2)[1]
    good_xml = "<domain" + good.split("</domain>")[0] + "</domain>"
    by_pci, errors = guests_from_domains(
        [DomainRecord("broken", "u-1", "<domain><devices><hostdev"), DomainRecord("vm-web0", "u-2", good_xml)],
        lambda name, uuid: 42,
    )
    assert errors == ["domain broken: malformed domain XML: unclosed token: line 1, column 17"]
    assert {g.name for g in by_pci.values()} == {"vm-web0"} and len(by_pci) == 3
    with pytest.raises(HostError, match="bad PCI address"):
        hostdev_addresses("<domain><devices><hostdev mode='subsystem' type='pci'><source>"
                          "<address domain='0x0000' bus='zz' slot='0x10' function='0x0'/></source></hostdev>"
                          "</devices></domain>")


def test_reconnects_with_backoff_until_libvirt_answers(tmp_path: Path) -> None:
    _, procfs, uri = make_tree(tmp_path)
    attempts: list[str] = []
    views: list[GuestView] = []
    connected = threading.Event()

    def opener(u: str):  # type: ignore[no-untyped-def]
        attempts.append(u)
        if len(attempts) < 3:
            raise libvirt.libvirtError("Failed to connect socket: Connection refused")
        return libvirt.open(u)

    def on_change(view: GuestView) -> None:
        views.append(view)
        if view.connected:
            connected.set()

    backoff = Backoff(initial=0.001, ceiling=0.004)
    directory = GuestDirectory(uri, procfs, on_change=on_change, backoff=backoff, open_connection=opener)
    try:
        directory.start(wait_s=WAIT_S)
        assert connected.wait(WAIT_S)
        assert len(attempts) == 3 and directory.connects == 1
        assert "Connection refused; retrying in 0.001 s" in views[0].errors[0]
        assert "retrying in 0.002 s" in views[1].errors[0]
        assert len(directory.view().by_pci) == len(hosttree.VF_OWNERS)
    finally:
        directory.stop()


def test_backoff_doubles_up_to_its_ceiling():
    b = Backoff(1, 8)
    assert [b.next_delay() for _ in range(5)] == [1, 2, 4, 8, 8]


def test_connection_lost_mid_query_reconnects(tmp_path: Path) -> None:
    _, procfs, uri = make_tree(tmp_path)

    class DyingConnection:
        """Answers like a libvirtd that just went away."""

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            def fail(*_a: object, **_k: object) -> None:
                raise libvirt.libvirtError("Cannot recv data: Connection reset by peer")
            return fail

    conns = iter([DyingConnection()])
    connected = threading.Event()
    directory = GuestDirectory(
        uri, procfs, backoff=Backoff(0.001, 0.001),
        on_change=lambda v: connected.set() if v.connected else None,
        open_connection=lambda u: next(conns, None) or libvirt.open(u),
    )
    try:
        directory.start(wait_s=0)
        assert connected.wait(WAIT_S)
        assert directory.connects == 2 and len(directory.view().by_pci) == len(hosttree.VF_OWNERS)
    finally:
        directory.stop()


def test_guest_agent_through_libvirt_reports_an_agentless_guest_and_writes_nothing(tmp_path: Path) -> None:
    """--guest-agent auto on libvirt's test driver: stock-PF VFs go to the guest agent, whose
    qemuAgentCommand the test driver does not serve: "none" with libvirt's own reason, and a
    write is a clear failure, never a silent success."""
    stock_vf = hosttree.vf_bdf(hosttree.PF1[0], 0)
    patched_vf = hosttree.vf_bdf(hosttree.PF0[0], 0)
    host, _ = make_host(tmp_path, guest_agent="auto")
    try:
        host.inventory()
        host.snapshot()  # the VFs' MACs come with the netlink VF info
        assert host.vf_actuator(patched_vf) == VfActuator("patched", "patched ixgbe: the PF's sriov/0/itr_usecs")
        unheld = host.vf_actuator(hosttree.vf_bdf(hosttree.PF1[0], 6))
        assert unheld is not None and unheld.actuator == "none" and "bound to ixgbevf on the host" in unheld.reason
        # The agent check runs in the background from attach: a write is either queued and then
        # fails, or refused at once while the VF backs off; never a silent success.
        submitted = host.set_vf_itr(stock_vf, 20000)
        assert submitted.pending or "virDomainQemuAgentCommand" in (submitted.error or "")
        deadline = time.monotonic() + WAIT_S
        status = host.vf_actuator(stock_vf)
        while time.monotonic() < deadline and (status is None or "virDomainQemuAgentCommand" not in status.reason):
            time.sleep(0.01)
            status = host.vf_actuator(stock_vf)
        assert status is not None and status.actuator == "none" and "vm-web0" in status.reason
        refused = host.set_vf_itr(stock_vf, 20000)  # backing off: refused at once, with the reason
        assert not refused.ok and "backing off" in (refused.error or "")
        assert all(not a.ok for a in host.collect_applied())  # whatever finished, nothing succeeded
        assert host.restore() == []  # nothing was journaled: the guest's ethtool never ran
    finally:
        host.close()


def test_without_libvirt_python_the_backend_still_inventories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "libvirt", None)  # import libvirt now raises ImportError
    host, _ = make_host(tmp_path)
    try:
        inv = host.inventory()
        assert len(inv.vfs()) == 126 and all(vf.guest is None for vf in inv.vfs())
        assert host.inventory_errors == (MISSING_LIBVIRT,)
        assert MISSING_LIBVIRT in host.capabilities().missing
    finally:
        host.close()


def test_without_libvirt_python_the_agent_reads_the_inventory_on_its_period(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The missing module is said once: it does not ask for a new inventory at every tick (a full
    sysfs scan each time, five times the agent's CPU)."""
    from linux_host import ManualClock

    from vftune.agent.loop import Agent, AgentConfig
    from vftune.control.policy import Observe, StockMode
    from vftune.store.db import Store

    monkeypatch.setitem(sys.modules, "libvirt", None)
    clock = ManualClock()
    host, _ = make_host(tmp_path, clock=clock, sleeper=clock.sleep)
    scans = []
    inventory = host.inventory
    monkeypatch.setattr(host, "inventory", lambda: scans.append(clock()) or inventory())
    store = Store(tmp_path / "vftune.db")
    agent = Agent(host, store, lambda pci, caps: Observe(), lambda pf, caps: StockMode(),
                  AgentConfig(interval=1.0, inventory_every_s=30.0))
    try:
        agent.start("no libvirt-python")
        for _ in range(65):
            clock.sleep(1.0)
            agent.tick()
        assert len(agent.inventory.vfs()) == 126
        assert len(scans) <= 4, f"{len(scans)} inventories in 65 ticks"  # the start, its echo, 2 periods
    finally:
        agent.shutdown()
        store.close()
        host.close()


def test_importing_the_backend_does_not_import_libvirt() -> None:
    code = ("import sys, vftune.hostdriver.linux, vftune.cli.inventory; "
            "from vftune.hostdriver.linux import LinuxHost; LinuxHost(libvirt_uri=None); "
            "print('libvirt' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
