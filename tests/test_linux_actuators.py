"""Writes of the Linux backend on the fixture tree: read back, journaled, restored, and failing cleanly."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from linux_host import make_host

from vftune.hostdriver.linux.sysfs_io import describe_oserror

PF0_DEV = "sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0"
VF0 = hosttree.vf_bdf(hosttree.PF0[0], 0)


def tree_contents(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if not p.is_symlink():
                out[str(p.relative_to(root))] = p.read_text(errors="replace")
    return out


def read(root: Path, rel: str) -> str:
    return (root / rel).read_text().strip()


def test_vf_itr_is_written_in_usecs_and_read_back(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        host.inventory()
        a = host.set_vf_itr(VF0, 20000)
        # 48 us is 24 EITR steps of 2.048 us: the 82599 delivers 20345/s, and that is what is said.
        assert (a.ok, a.old, a.applied) == (True, 0, 20345)
        assert read(tmp_path, f"{PF0_DEV}/sriov/0/itr_usecs") == "48"
        a = host.set_vf_itr(VF0, 0)  # hand back to the VF's adaptive ITR
        assert (a.ok, a.old, a.applied) == (True, 20345, 0)
        assert read(tmp_path, f"{PF0_DEV}/sriov/0/itr_usecs") == "1"
        a = host.set_vf_itr(VF0, 1_000_000)  # above the 82599's fastest: clamped to 2 us
        assert read(tmp_path, f"{PF0_DEV}/sriov/0/itr_usecs") == "2" and a.applied == 488281
    finally:
        host.close()


def test_vf_itr_refused_where_the_host_cannot_set_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        host.inventory()
        before = tree_contents(tmp_path)
        stock_vf = hosttree.vf_bdf(hosttree.PF1[0], 0)
        with caplog.at_level(logging.WARNING, logger="vftune.linux"):
            a = host.set_vf_itr(stock_vf, 20000)
        assert not a.ok and "0000:03:00.1/sriov: absent, enp3s0f1 runs stock ixgbe" in (a.error or "")
        # The agent logs a refusal once (then backs off); the driver does not log it again.
        assert not any(stock_vf in r.getMessage() for r in caplog.records)
        unbound = hosttree.vf_bdf(hosttree.PF0[0], 40)
        a = host.set_vf_itr(unbound, 20000)
        assert not a.ok and a.error.endswith("sriov/40/itr_capable is 0: the VF driver has not negotiated per-VF ITR")
        a = host.set_vf_itr("0000:99:00.0", 20000)
        assert not a.ok and a.error == "0000:99:00.0: not a VF of a managed 82599 PF"
        assert tree_contents(tmp_path) == before
    finally:
        host.close()


def test_pf_rx_mode_patched_and_stock(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        host.inventory()
        a = host.set_pf_rx_mode("enp3s0f0", "hybrid", napi_budget=2)
        assert (a.ok, a.old, a.applied) == (True, "napi", "hybrid")
        assert read(tmp_path, f"{PF0_DEV}/rxmode/mode") == "hybrid"
        assert read(tmp_path, f"{PF0_DEV}/rxmode/poll_limit") == "2"
        a = host.set_pf_rx_mode("enp3s0f0", "de", napi_budget=100)
        assert not a.ok and a.error == "enp3s0f0: napi budget 100 out of range 1..64"
        assert read(tmp_path, f"{PF0_DEV}/rxmode/mode") == "hybrid"
        a = host.set_pf_rx_mode("enp3s0f0", "turbo")
        assert not a.ok and a.error == "enp3s0f0: unknown rx mode 'turbo' (napi, de, hybrid)"
        a = host.set_pf_rx_mode("enp3s0f1", "hybrid")
        assert not a.ok and "rxmode: absent, hybrid needs the patched ixgbe" in (a.error or "")
        a = host.set_pf_rx_mode("enp3s0f1", "napi", napi_budget=600)
        assert (a.ok, a.old, a.applied) == (True, "de", "napi")
        assert read(tmp_path, "sys/class/net/enp3s0f1/napi_defer_hard_irqs") == "2"
        assert read(tmp_path, "sys/class/net/enp3s0f1/gro_flush_timeout") == "200000"
        assert read(tmp_path, "proc/sys/net/core/netdev_budget") == "600"
    finally:
        host.close()


def test_restore_puts_back_every_value_written(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        host.inventory()
        before = tree_contents(tmp_path)
        for n, itr in ((0, 20000), (1, 8000), (0, 12000), (2, 0)):
            assert host.set_vf_itr(hosttree.vf_bdf(hosttree.PF0[0], n), itr).ok
        assert host.set_pf_rx_mode("enp3s0f0", "de", 8).ok
        assert host.set_pf_rx_mode("enp3s0f0", "hybrid", 2).ok
        assert host.set_pf_rx_mode("enp3s0f1", "napi", 500).ok
        assert tree_contents(tmp_path) != before
        restored = host.restore()
        assert tree_contents(tmp_path) == before
        assert all(a.ok for a in restored)
        # Each file once, with the value from before the first write; newest first.
        assert len(restored) == 8 == len({a.target for a in restored})
        assert restored[0].target.endswith("enp3s0f1/napi_defer_hard_irqs")
        itr0 = next(a for a in restored if a.target.endswith("sriov/0/itr_usecs"))
        assert (itr0.old, itr0.requested, itr0.applied) == ("82", "0", "0")  # 12000/s -> 83 us, even
        assert host.restore() == []
    finally:
        host.close()


def test_write_to_a_vanished_vf_directory_fails_with_enoent(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        host.inventory()
        shutil.rmtree(tmp_path / PF0_DEV / "sriov" / "3")  # VFs disabled behind our back
        a = host.set_vf_itr(hosttree.vf_bdf(hosttree.PF0[0], 3), 20000)
        assert not a.ok
        assert a.error == f"{tmp_path / PF0_DEV}/sriov/3/itr_capable: No such file or directory (errno 2)"
        assert host.restore() == []
    finally:
        host.close()


@pytest.mark.skipif(shutil.which("chattr") is None, reason="chattr not installed")
def test_write_refused_with_eperm_is_reported_and_restore_goes_on(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    mode_file = tmp_path / PF0_DEV / "rxmode" / "mode"
    try:
        host.inventory()
        assert host.set_vf_itr(VF0, 20000).ok
        # An immutable file refuses writes even to root: EPERM, as a missing CAP_NET_ADMIN would.
        if subprocess.run(["chattr", "+i", str(mode_file)], capture_output=True).returncode != 0:
            pytest.skip(f"{tmp_path} does not support immutable files")
        a = host.set_pf_rx_mode("enp3s0f0", "de")
        assert not a.ok and a.error == f"{mode_file}: Operation not permitted (errno 1)"
        restored = host.restore()
        assert [r.ok for r in restored] == [True]
        assert read(tmp_path, f"{PF0_DEV}/sriov/0/itr_usecs") == "0"
    finally:
        subprocess.run(["chattr", "-i", str(mode_file)], capture_output=True)
        host.close()


def test_capabilities_say_what_an_unpatched_pf_lacks(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        caps = host.capabilities()
        assert caps.vf_itr and caps.rx_modes == ("napi", "de") and caps.counter_refresh_s == 2.0
        assert any(m.startswith("enp3s0f1: no per-VF ITR") and m.endswith("its VFs are observed only")
                   for m in caps.missing)
        assert any(m.startswith("enp3s0f1: no ") and "hybrid needs the patched driver" in m for m in caps.missing)
    finally:
        host.close()


def test_fully_stock_host_observes_only(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    shutil.rmtree(tmp_path / PF0_DEV / "sriov")
    shutil.rmtree(tmp_path / PF0_DEV / "rxmode")
    try:
        caps = host.capabilities()
        assert not caps.vf_itr and "hybrid" not in caps.rx_modes
        assert len(host.snapshot().vfs) == 126
    finally:
        host.close()


def test_errno_lines_name_the_path_and_the_number() -> None:
    assert describe_oserror("/sys/x/itr_usecs", OSError(errno.EINVAL, "x")) == \
        "/sys/x/itr_usecs: Invalid argument (errno 22)"
    assert describe_oserror("enp3s0f0", OSError(errno.EOPNOTSUPP, "x")) == \
        "enp3s0f0: Operation not supported (errno 95)"


def test_restore_asks_the_vf_for_what_it_ran_before_withdrawing_the_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vftune.hostdriver.linux import host as host_module

    writes: list[tuple[str, str]] = []
    real_write = host_module.write_text

    def recording_write(path: Path, value: str) -> None:
        writes.append((str(path.relative_to(tmp_path)), value))
        real_write(path, value)

    monkeypatch.setattr(host_module, "write_text", recording_write)
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        host.inventory()
        # VF 1's guest had set 100 us with ethtool; VF 0 had reported nothing yet (ixgbevf default).
        (tmp_path / PF0_DEV / "sriov/1/itr_applied_usecs").write_text("100\n")
        vf1 = hosttree.vf_bdf(hosttree.PF0[0], 1)
        assert host.set_vf_itr(VF0, 20000).ok and host.set_vf_itr(vf1, 8000).ok
        assert host.set_vf_itr(VF0, 12000).ok
        writes.clear()
        host.restore()
        # Writing "0" back only withdraws a request, so every VF is asked for its own value first,
        # and the requests are withdrawn once the VFs had the time to take it.
        assert writes == [
            (f"{PF0_DEV}/sriov/1/itr_usecs", "100"), (f"{PF0_DEV}/sriov/0/itr_usecs", "1"),
            (f"{PF0_DEV}/sriov/1/itr_usecs", "0"), (f"{PF0_DEV}/sriov/0/itr_usecs", "0"),
        ]
    finally:
        host.close()


def test_hybrid_thresholds_go_to_the_driver_before_the_mode_and_come_back(tmp_path: Path) -> None:
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        host.inventory()
        before = tree_contents(tmp_path)
        a = host.set_pf_rx_mode("enp3s0f0", "hybrid", 2, cliff_pps=123456.4, epsilon=0.2)
        assert a.ok and a.applied == "hybrid"
        assert read(tmp_path, f"{PF0_DEV}/rxmode/cliff_pps") == "123456"
        assert read(tmp_path, f"{PF0_DEV}/rxmode/epsilon_pct") == "20"
        bad = host.set_pf_rx_mode("enp3s0f0", "hybrid", cliff_pps=0)
        assert not bad.ok and bad.error == "enp3s0f0: cliff 0 packets/s out of range 1..100000000"
        host.restore()
        assert tree_contents(tmp_path) == before
    finally:
        host.close()


def test_itr_bounds_never_cross_on_the_way_and_restore_clears_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture files get the driver's ERANGE rule: a min above a non-zero max (or a max
    below a non-zero min) is refused, so only a write order that never crosses passes."""
    from vftune.hostdriver.base import HostError
    from vftune.hostdriver.linux import host as host_module

    real_write = host_module.write_text
    writes: list[tuple[str, str]] = []

    def checked(path: Path, value: str) -> None:
        if path.name in ("itr_min_usecs", "itr_max_usecs"):
            other = path.with_name("itr_max_usecs" if path.name == "itr_min_usecs" else "itr_min_usecs")
            v, o = int(value), int(other.read_text())
            if v == 1 or (v and not 2 <= v <= 1022):
                raise HostError(f"{path}: EINVAL")
            if v and o and (v > o if path.name == "itr_min_usecs" else v < o):
                raise HostError(f"{path}: {value}: Numerical result out of range (ERANGE)")
            writes.append((path.name, value))
        real_write(path, value)

    monkeypatch.setattr(host_module, "write_text", checked)
    host, _ = make_host(tmp_path, libvirt=False)
    try:
        host.inventory()
        before = tree_contents(tmp_path)
        a = host.set_vf_itr_bounds(VF0, 10_000, 20_000)  # interrupts/s -> 48..98 us
        assert a.ok and a.old == "0..0" and a.applied == "9965..20345"
        assert (read(tmp_path, f"{PF0_DEV}/sriov/0/itr_min_usecs"), read(tmp_path, f"{PF0_DEV}/sriov/0/itr_max_usecs")) \
            == ("48", "98")
        # Moving both bounds past each other: longer intervals need max first, shorter ones min first.
        assert host.set_vf_itr_bounds(VF0, 1_000, 2_000).ok  # 488..976 us: above the old max
        assert writes[-2:] == [("itr_max_usecs", "976"), ("itr_min_usecs", "488")]
        assert host.set_vf_itr_bounds(VF0, 40_000, 100_000).ok  # 10..24 us: below the old min
        assert writes[-2:] == [("itr_min_usecs", "10"), ("itr_max_usecs", "24")]
        refused = host.set_vf_itr_bounds(VF0, 30_000, 20_000)
        assert not refused.ok and "above max" in (refused.error or "")
        stock = host.set_vf_itr_bounds(hosttree.vf_bdf(hosttree.PF1[0], 0), 10_000, 0)
        assert not stock.ok and "stock ixgbe" in (stock.error or "")
        restored = [r for r in host.restore() if r.setting == "itr_bounds"]
        assert restored and all(r.ok for r in restored)
        assert tree_contents(tmp_path) == before
    finally:
        host.close()


def test_a_fixed_itr_is_confirmed_by_the_vfs_own_report_or_reported_unconfirmed(tmp_path: Path) -> None:
    from linux_host import ManualClock

    clock = ManualClock()
    host, _ = make_host(tmp_path, libvirt=False, clock=clock, sleeper=clock.sleep)
    vf1 = hosttree.vf_bdf(hosttree.PF0[0], 1)
    try:
        host.inventory()
        first, second = host.set_vf_itr(VF0, 20000), host.set_vf_itr(vf1, 20000)
        assert first.ok and first.pending and second.ok and second.pending  # stored, not yet in force
        assert host.collect_applied() == []  # the VFs fetch within 2 s: nothing to say yet
        (tmp_path / PF0_DEV / "sriov/0/itr_applied_usecs").write_text("48\n")  # VF 0 reports, VF 1 does not
        clock.sleep(1.0)
        got = host.collect_applied()
        assert [(a.target, a.setting, a.ok, a.applied) for a in got] == [(VF0, "itr_confirmed", True, 20345)]
        clock.sleep(3.0)
        late = host.collect_applied()
        assert [(a.target, a.ok) for a in late] == [(vf1, False)]
        assert "itr_applied_usecs reads '0', not the 48 requested 4 s ago" in (late[0].error or "")
        assert host.collect_applied() == []  # said once
        # The adaptive ITR is in force once the VF reports 1 (rx-usecs 1), not when asked.
        assert host.set_vf_itr(VF0, 0).pending
        clock.sleep(1.5)
        assert host.collect_applied() == []  # still reports 48
        (tmp_path / PF0_DEV / "sriov/0/itr_applied_usecs").write_text("1\n")
        assert [(a.target, a.setting, a.ok, a.applied) for a in host.collect_applied()] == [
            (VF0, "itr_confirmed", True, 0)]
    finally:
        host.close()


def test_a_write_of_the_rate_the_vf_runs_is_in_force_at_once_and_still_undone(tmp_path: Path) -> None:
    # A search writes its first probe even when the VF already runs it (the patched PF then
    # makes the VF fetch sooner): nothing is on its way, so no window has to wait for it.
    from linux_host import ManualClock

    clock = ManualClock()
    host, _ = make_host(tmp_path, libvirt=False, clock=clock, sleeper=clock.sleep)
    sriov0 = tmp_path / PF0_DEV / "sriov/0"
    try:
        host.inventory()
        before = tree_contents(tmp_path)
        (sriov0 / "itr_applied_usecs").write_text("1\n")  # the guest runs its adaptive ITR
        asked = host.set_vf_itr(VF0, 20000)  # on its way ...
        assert asked.pending
        same = host.set_vf_itr(VF0, 0)  # ... and overtaken by what the VF runs
        assert same.ok and not same.pending and same.applied == 0
        assert read(tmp_path, f"{PF0_DEV}/sriov/0/itr_usecs") == "1"
        clock.sleep(5.0)
        assert host.collect_applied() == []  # no confirmation owed, none reported unconfirmed
        (sriov0 / "itr_applied_usecs").write_text("0\n")
        assert all(r.ok for r in host.restore())
        assert tree_contents(tmp_path) == before  # the request is withdrawn again
    finally:
        host.close()


def test_restore_waits_for_each_vf_to_take_its_own_setting_before_withdrawing_the_request(tmp_path: Path) -> None:
    # The VF applies a request only at its next fetch, and a withdrawn request (0) leaves it at
    # whatever it runs: withdrawing at once would leave it at vftune's rate.
    from linux_host import FetchingVfs, ManualClock

    clock = ManualClock()
    vfs = FetchingVfs(tmp_path, clock, period=1.0)
    host, _ = make_host(tmp_path, libvirt=False, clock=clock, sleeper=vfs.sleep)
    sriov0 = tmp_path / PF0_DEV / "sriov/0"
    (sriov0 / "itr_applied_usecs").write_text("100\n")  # the guest ran rx-usecs 100 before vftune
    try:
        host.inventory()
        assert host.set_vf_itr(VF0, 20000).pending
        vfs.sleep(1.0)
        assert [a.applied for a in host.collect_applied()] == [20345]  # the VF runs 48 us now
        started = clock.t
        restored = host.restore()
        assert all(r.ok for r in restored)
        assert read(tmp_path, f"{PF0_DEV}/sriov/0/itr_usecs") == "0"  # the request is withdrawn ...
        assert read(tmp_path, f"{PF0_DEV}/sriov/0/itr_applied_usecs") == "100"  # ... after the VF took 100
        assert 0 < clock.t - started <= 1.1  # one fetch, not the whole deadline
    finally:
        host.close()


def test_restore_does_not_wait_past_the_deadline_for_a_vf_that_never_fetches(tmp_path: Path) -> None:
    from linux_host import ManualClock

    clock = ManualClock()
    host, _ = make_host(tmp_path, libvirt=False, clock=clock, sleeper=clock.sleep)
    try:
        host.inventory()
        assert host.set_vf_itr(VF0, 20000).ok
        started = clock.t
        assert all(r.ok for r in host.restore())
        assert read(tmp_path, f"{PF0_DEV}/sriov/0/itr_usecs") == "0"
        assert 2.0 <= clock.t - started <= 4.1  # at least a fetch period (adaptive), at most the deadline
    finally:
        host.close()
