"""Inventory from a fixture sysfs tree shaped like a real host, guests from libvirt's test driver."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from linux_host import make_host, make_tree

from vftune.cli import cli
from vftune.hostdriver.linux.sysfs_inventory import scan

EXPECTED = Path(__file__).parent / "fixtures" / "inventory_expected.json"


def run_inventory(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["inventory", *args])  # click >= 8.2 keeps stdout and stderr apart
    return result.exit_code, result.stdout, result.stderr


def test_inventory_json_matches_checked_in_expected_output(tmp_path: Path) -> None:
    sysfs, procfs, uri = make_tree(tmp_path)
    code, out, err = run_inventory("--json", "--sysfs-root", str(sysfs), "--procfs-root", str(procfs),
                                   "--libvirt-uri", uri)
    assert code == 0, err
    assert json.loads(out) == json.loads(EXPECTED.read_text())


def test_every_guest_held_vf_is_listed_with_its_guest(tmp_path: Path) -> None:
    sysfs, procfs, uri = make_tree(tmp_path)
    _, out, _ = run_inventory("--json", "--sysfs-root", str(sysfs), "--procfs-root", str(procfs), "--libvirt-uri", uri)
    doc = json.loads(out)
    by_pci = {vf["pci"]: vf for pf in doc["pfs"] for vf in pf["vfs"]}
    uuids = {g.name: g.uuid for g in hosttree.GUESTS}
    for (pf_bdf, n), guest in hosttree.VF_OWNERS.items():
        vf = by_pci[hosttree.vf_bdf(pf_bdf, n)]
        assert vf["guest"] == {"name": guest, "uuid": uuids[guest]}
        assert vf["driver"] == "vfio-pci"
    # The shut-off guest's VF and the unowned vfio-pci VFs have no guest.
    assert by_pci[hosttree.vf_bdf(*hosttree.STOPPED_GUEST_VF)]["guest"] is None
    assert by_pci[hosttree.vf_bdf(hosttree.PF0[0], 8)]["guest"] is None
    assert sum(1 for vf in by_pci.values() if vf["guest"]) == len(hosttree.VF_OWNERS)


def test_pfs_vfs_and_ignored_devices(tmp_path: Path) -> None:
    sysfs, _, _ = make_tree(tmp_path)
    result = scan(sysfs)
    assert [pf.name for pf in result.pfs] == ["enp3s0f0", "enp3s0f1", "enp5s0f0"]
    pf0 = result.pfs[0]
    assert (pf0.pci, pf0.device_id, pf0.driver, pf0.num_vfs, pf0.total_vfs) == ("0000:03:00.0", 0x10FB, "ixgbe", 63, 63)
    assert [vf.index for vf in pf0.vfs] == list(range(63))
    assert pf0.vfs[1].pci == "0000:03:10.2" and result.pfs[1].vfs[1].pci == "0000:03:10.3"
    assert {vf.driver for vf in pf0.vfs[10:12]} == {"ixgbevf"} and pf0.vfs[12].driver is None
    assert result.pfs[2].num_vfs == 0 and result.pfs[2].vfs == ()
    reasons = {i.name: i.reason for i in result.ignored}
    assert "not an Intel ixgbe-family PF" in reasons["enp6s0f0np0"] and "15b3:1017" in reasons["enp6s0f0np0"]
    assert reasons["eno1"] == "no SR-IOV: 0000:07:00.0 has no sriov_totalvfs"
    assert reasons["enp3s0f0v10"] == "SR-IOV VF 0000:03:12.4 of PF 0000:03:00.0"
    assert "virtual device" in reasons["lo"]
    # The ixgbevf VF's IRQs come from its msi_irqs directory.
    assert len(result.vf_devices["0000:03:12.4"].msi_irqs) == 3
    assert result.vf_devices["0000:03:12.4"].host_ifname == "enp3s0f0v10"
    assert result.pf_devices["enp3s0f0"].patched_itr and not result.pf_devices["enp3s0f1"].patched_itr


def test_unreadable_attribute_moves_the_nic_to_ignored_with_the_path(tmp_path: Path) -> None:
    sysfs, _, _ = make_tree(tmp_path)
    numvfs = Path(os.path.realpath(sysfs / "class/net/enp3s0f1/device")) / "sriov_numvfs"
    numvfs.unlink()
    numvfs.mkdir()  # reading it fails with EISDIR, as an attribute that cannot be read would
    result = scan(sysfs)
    assert "enp3s0f1" not in [pf.name for pf in result.pfs]
    reason = {i.name: i.reason for i in result.ignored}["enp3s0f1"]
    assert reason == f"unreadable: {numvfs}: Is a directory (errno 21)"


def test_libvirt_down_lists_vfs_without_guests_and_says_why(tmp_path: Path) -> None:
    sysfs, procfs, _ = make_tree(tmp_path)
    uri = f"qemu+unix:///system?socket={tmp_path}/no-libvirtd.sock"
    code, out, err = run_inventory("--json", "--sysfs-root", str(sysfs), "--procfs-root", str(procfs),
                                   "--libvirt-uri", uri)
    assert code == 0
    doc = json.loads(out)
    assert all(vf["guest"] is None for pf in doc["pfs"] for vf in pf["vfs"])
    assert len(doc["pfs"][0]["vfs"]) == 63
    assert f"warning: libvirt {uri}:" in err


def test_text_output_and_usage_errors(tmp_path: Path) -> None:
    sysfs, procfs, _ = make_tree(tmp_path)
    code, out, _ = run_inventory("--sysfs-root", str(sysfs), "--procfs-root", str(procfs), "--libvirt-uri", "none")
    assert code == 0
    assert out.splitlines()[0] == "enp3s0f0  0000:03:00.0  8086:10fb  ixgbe  VFs 63/63"
    assert ("  enp6s0f0np0: not an Intel ixgbe-family PF (82599, X540, X550, X552, X553): 0000:06:00.0 is "
            "15b3:1017 driven by mlx5_core") in out
    code, _, err = run_inventory("--sysfs-root", str(tmp_path / "missing"))
    assert code == 2 and "--sysfs-root" in err and "missing" in err


def test_host_inventory_carries_qemu_pids_from_procfs(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path)
    try:
        inv = host.inventory()
        pids = {vf.guest.name: vf.guest.pid for vf in inv.vfs() if vf.guest}
        assert pids == {g.name: g.pid for g in hosttree.GUESTS}
    finally:
        host.close()
