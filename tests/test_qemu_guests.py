"""Guests from QEMU processes (no libvirt): command lines as Proxmox VE 8, libvirt 9, KubeVirt's
virt-launcher and a script write them, an X550 port beside an 82599 one, the inventory command of
issue 52's Done-when, a guest whose process exits, and arbitrary bytes that never crash the parser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import qemu_hosts

from conftest import VFTUNE
from vftune.hostdriver.linux.qemu_guests import normalize_bdf, parse_cmdline, scan_processes, split_options


def _raw(argv: list[str]) -> bytes:
    return ("\0".join(argv) + "\0").encode()


def test_each_stack_s_command_line_names_its_guest_vfs_and_agent_socket():
    lines = qemu_hosts.cmdlines()
    found = {pid: parse_cmdline(pid, _raw(argv)) for pid, (_, argv) in lines.items()}
    pve, libvirt9, kubevirt, script, nameless, other = (found[p] for p in sorted(found))
    assert (pve.name, pve.uuid) == ("vm-web0", qemu_hosts.PVE_UUID)  # the uuid from -smbios type=1
    assert pve.vfs == ("0000:03:10.0", "0000:04:10.0")
    assert pve.agent_socket == "/var/run/qemu-server/100.qga"
    assert (libvirt9.name, libvirt9.uuid, libvirt9.vfs) == ("vm-web1", qemu_hosts.LIBVIRT_UUID,
                                                            ("0000:03:10.4", "0000:04:10.2"))
    assert libvirt9.agent_socket is None  # libvirt passes its agent chardev as an fd: reached through libvirt
    assert (kubevirt.name, kubevirt.vfs) == ("default_vmi-sriov", ("0000:03:11.0",))
    assert (script.name, script.uuid, script.vfs) == ("vm-cache0", qemu_hosts.SCRIPT_UUID, ("0000:03:11.4",))
    assert script.agent_socket == "/run/vm-cache0/qga.sock"
    assert nameless is None and other is None


def test_qemu_option_syntax():
    assert split_options("guest=a,,b,debug-threads=on") == [("guest", "a,b"), ("debug-threads", "on")]
    assert parse_cmdline(1, _raw(["kvm", "-name", "web,,1,debug-threads=on"])).name == "web,1"
    assert normalize_bdf("03:10.1") == "0000:03:10.1"
    assert normalize_bdf("10000:e1:00.7") == "10000:e1:00.7"  # a VMD domain's five digits
    assert normalize_bdf("03:10.8") is None and normalize_bdf("nonsense") is None
    # A JSON -device that is not an object, or not JSON at all, is no device.
    assert parse_cmdline(1, _raw(["kvm", "-name", "x", "-device", "[1]", "-device", "{oops"])).vfs == ()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_crash_the_parser(raw):
    guest = parse_cmdline(42, raw)
    assert guest is None or (guest.name and all(normalize_bdf(v) == v for v in guest.vfs))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=20))
def test_arbitrary_qemu_arguments_never_crash_the_parser(args):
    guest = parse_cmdline(7, _raw(["/usr/bin/qemu-system-x86_64", *args]))
    assert guest is None or isinstance(guest.vfs, tuple)


def test_inventory_names_each_vf_s_guest_from_qemu_processes_and_lists_the_x550(tmp_path):
    root = qemu_hosts.build(tmp_path / "host")
    out = subprocess.run([*VFTUNE, "inventory", "--libvirt-uri", "none", "--guest-source", "qemu",
                          "--sysfs-root", str(root / "sys"), "--procfs-root", str(root / "proc"), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    inv = json.loads(out.stdout)
    assert inv["guest_source"] == "qemu"
    owned = {vf["pci"]: (vf["guest"]["name"], vf["guest"]["uuid"]) for pf in inv["pfs"] for vf in pf["vfs"]
             if vf["guest"]}
    assert owned == qemu_hosts.owners()
    x550 = next(pf for pf in inv["pfs"] if pf["pci"] == qemu_hosts.X550[0])
    assert x550["device_id"] == "0x1563" and x550["num_vfs"] == 8 and len(x550["vfs"]) == 8
    assert not any(i["name"] == qemu_hosts.X550[1] for i in inv["ignored"])


def test_a_guest_whose_qemu_exits_gives_its_vfs_back(tmp_path):
    from vftune.hostdriver.linux.host import LinuxHost
    from vftune.hostdriver.linux.netlink_vfstats import ReplaySource

    root = qemu_hosts.build(tmp_path / "host")
    host = LinuxHost(root / "sys", root / "proc", None, netlink=ReplaySource({}), guest_source="auto")
    try:
        before = {vf.pci: vf.guest.name for vf in host.inventory().vfs() if vf.guest}
        assert host.guest_source_in_use == "qemu"  # no libvirt: the processes
        assert before["0000:03:11.4"] == "vm-cache0" and not host.qemu_guests_changed()
        shutil.rmtree(root / "proc" / "5104")  # the script's QEMU exits
        assert host.qemu_guests_changed()
        after = {vf.pci: vf.guest.name for vf in host.inventory().vfs() if vf.guest}
        assert "0000:03:11.4" not in after and after == {k: v for k, v in before.items() if v != "vm-cache0"}
    finally:
        host.close()


def test_a_procfs_root_that_cannot_be_listed_is_an_error_not_a_crash(tmp_path):
    scan = scan_processes(tmp_path / "absent")
    assert scan.guests == () and "cannot list processes" in scan.errors[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="reads another user's fixture files as root")
def test_guest_source_is_an_option_of_run_inventory_and_restore():
    for sub in ("run", "inventory", "restore"):
        out = subprocess.run([*VFTUNE, sub, "--help"], capture_output=True, text=True, timeout=60)
        assert "--guest-source [auto|libvirt|qemu]" in out.stdout, sub
    bad = subprocess.run([*VFTUNE, "inventory", "--guest-source", "xen"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_the_agent_tunes_vfs_of_qemu_process_guests_and_hands_back_those_whose_qemu_exits(tmp_path):
    """The Linux backend on a fixture host (patched 82599 PF, VFs that fetch what the host asks),
    guests only as QEMU processes: their VFs are set, and a guest's VFs go back to their adaptive
    ITR when its process exits."""
    import hosttree
    from linux_host import FetchingVfs, ManualClock, fixture_replies, make_tree

    from vftune.agent.loop import Agent, AgentConfig
    from vftune.control.policy import FixedItr, Observe, StockMode
    from vftune.hostdriver.linux.host import LinuxHost
    from vftune.hostdriver.linux.netlink_vfstats import ReplaySource
    from vftune.store.db import Store

    root = tmp_path / "host"
    sysfs, procfs, _ = make_tree(root)
    for g in hosttree.GUESTS:  # the fixture's guests, started by a script: each with its own VFs
        devices = [a for (pf, n), owner in sorted(hosttree.VF_OWNERS.items()) if owner == g.name
                   for a in ("-device", f"vfio-pci,host={hosttree.vf_bdf(pf, n)}")]
        argv = ["qemu-system-x86_64", "-enable-kvm", "-name", g.name, "-uuid", g.uuid, *devices]
        (procfs / str(g.pid) / "cmdline").write_text("\0".join(argv) + "\0")
    clock = ManualClock()
    vfs = FetchingVfs(root, clock)
    host = LinuxHost(sysfs, procfs, None, ReplaySource(fixture_replies()), clock=clock, sleeper=vfs.sleep,
                     guest_source="qemu")
    store = Store(tmp_path / "vftune.db")
    agent: list[Agent] = []

    def policy(pci, caps):  # set a rate on VFs a guest holds; leave the others alone
        vf = agent[0].inventory.vf(pci)
        return FixedItr(20000) if vf is not None and vf.guest is not None else Observe()

    try:
        agent.append(Agent(host, store, policy, lambda pf, caps: StockMode(), AgentConfig(interval=1.0)))
        agent[0].start("qemu processes")
        for _ in range(4):
            host.sleep(1.0)
            agent[0].tick()
        cache_vf = hosttree.vf_bdf(hosttree.PF0[0], 6)  # vm-cache0's, on the patched PF
        web_vf = hosttree.vf_bdf(hosttree.PF0[0], 0)
        assert agent[0].inventory.vf(cache_vf).guest.name == "vm-cache0"
        assert agent[0].vfs[cache_vf].itr == agent[0].vfs[web_vf].itr == 20345
        cache = next(g for g in hosttree.GUESTS if g.name == "vm-cache0")
        shutil.rmtree(procfs / str(cache.pid))  # vm-cache0's QEMU exits
        for _ in range(4):
            host.sleep(1.0)
            agent[0].tick()
        assert agent[0].inventory.vf(cache_vf).guest is None
        assert agent[0].vfs[cache_vf].itr == 0, "handed back to its adaptive ITR"
        assert agent[0].vfs[web_vf].itr == 20345, "the other guests' VFs keep theirs"
        reasons = [d["reason"] for d in store.decisions(cache_vf, 0, float("inf"), 20)]
        assert f"owner changed (was {cache.uuid}): back to adaptive" in reasons
    finally:
        host.close()
        store.close()
