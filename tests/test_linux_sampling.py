"""One sampling pass of the Linux backend: fixture procfs/sysfs plus wire-exact netlink replies."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hosttree
from linux_host import PF_NETLINK, ManualClock, make_tree
from netlink_wire import CountingHost

from vftune.hostdriver.linux.counter_health import CounterHealth
from vftune.hostdriver.linux.cpu import CLOCK_TICKS, parse_pid_stat
from vftune.hostdriver.linux.host import LinuxHost
from vftune.hostdriver.linux.netlink_vfstats import ReplaySource
from vftune.hostdriver.linux.proc_interrupts import parse_interrupts

PF0_VF0 = hosttree.vf_bdf(hosttree.PF0[0], 0)  # vfio-pci, vm-web0, patched PF
PF1_VF0 = hosttree.vf_bdf(hosttree.PF1[0], 0)  # vfio-pci, vm-web0, stock PF
PF0_VF10 = hosttree.vf_bdf(hosttree.PF0[0], 10)  # ixgbevf on the host


class StockRefresh:
    """Replies as stock ixgbe gives them: the stock PF's VF counters are re-copied only every 2 s."""

    def __init__(self, counting: CountingHost, clock: ManualClock, stock: set[str]) -> None:
        self.counting, self.clock, self.stock = counting, clock, stock
        self.cache: dict[str, tuple[float, bytes]] = {}

    def __call__(self, ifname: str) -> bytes:
        cached = self.cache.get(ifname)
        if ifname in self.stock and cached and self.clock() - cached[0] < 2.0:
            return cached[1]
        reply = self.counting(ifname)
        self.cache[ifname] = (self.clock(), reply)
        return reply


def host_on(tmp_path: Path, libvirt: bool = True) -> tuple[LinuxHost, CountingHost, ManualClock]:
    sysfs, procfs, uri = make_tree(tmp_path)
    clock = ManualClock()
    counting = CountingHost(dict(PF_NETLINK), seed=11)
    source = ReplaySource(StockRefresh(counting, clock, {hosttree.PF1[1]}))
    host = LinuxHost(sysfs, procfs, uri if libvirt else None, source, clock=clock, sleeper=clock.sleep)
    host.inventory()
    return host, counting, clock


def vfio_rows_total(interrupts_text: str, pci: str) -> int:
    total = 0
    for line in interrupts_text.splitlines():
        if f"({pci})" in line:
            total += sum(int(f) for f in line.split()[1:1 + hosttree.N_CPUS])
    return total


def add_to_cpu0(line: str, n: int) -> str:
    label, rest = line.split(":", 1)
    count = rest.split()[0]
    return f"{label}:{rest.replace(count, str(int(count) + n).rjust(len(count)), 1)}"


def test_snapshot_reads_all_sources_in_one_pass(tmp_path: Path) -> None:
    host, counting, clock = host_on(tmp_path)
    try:
        snap = host.snapshot()
        assert snap.errors == ()
        assert snap.time == clock()
        assert len(snap.vfs) == 126
        pps = counting.rate(hosttree.PF0[1], 0)
        vf = snap.vfs[PF0_VF0]
        assert (vf.rx_packets, vf.rx_bytes, vf.tx_packets, vf.tx_bytes) == (pps, pps * 1400, pps // 2, pps * 80)
        text = (tmp_path / "proc/interrupts").read_text()
        assert vf.interrupts == vfio_rows_total(text, PF0_VF0) > 0
        # The host-bound VF's rows carry netdev names; they are found through msi_irqs.
        irqs = sorted(int(p.name) for p in (tmp_path / "sys/bus/pci/devices" / PF0_VF10 / "msi_irqs").iterdir())
        rows = parse_interrupts(text).by_irq
        assert snap.vfs[PF0_VF10].interrupts == sum(rows[i] for i in irqs) > 0
        assert snap.vfs[hosttree.vf_bdf(hosttree.PF0[0], 40)].interrupts is None  # unbound: no vectors
        # rate_pps is the hybrid's estimate: 0 in napi (vfdriver-patches/README.md).
        assert snap.pfs["enp3s0f0"].current_mode == "napi" and snap.pfs["enp3s0f0"].rate_pps == 0
        assert snap.pfs["enp3s0f0"].rx_packets == sum(counting.rate("enp3s0f0", n) for n in range(63))
        assert snap.pfs["enp3s0f1"].current_mode == "de"  # stock PF, napi_defer_hard_irqs 0
        assert snap.host_cpus == 4
        assert snap.host_irq_cpu == (4 * 300 + 60 + 4 * 700 + 120) / CLOCK_TICKS
        assert snap.guest_cpu == {g.name: (g.utime + g.stime) / CLOCK_TICKS for g in hosttree.GUESTS}
    finally:
        host.close()


def test_stock_pf_counters_marked_stale_between_refreshes(tmp_path: Path) -> None:
    host, _, clock = host_on(tmp_path, libvirt=False)
    try:
        first = host.snapshot()
        clock.sleep(1.0)
        second = host.snapshot()
        # Stock PF: same copy as a second ago -> stale, the refresh time is the old one.
        assert second.vfs[PF1_VF0].stale and second.vfs[PF1_VF0].counters_time == first.time
        assert second.vfs[PF1_VF0].rx_packets == first.vfs[PF1_VF0].rx_packets
        # Patched PF: fresh on every read.
        assert not second.vfs[PF0_VF0].stale and second.vfs[PF0_VF0].counters_time == second.time
        clock.sleep(1.0)
        third = host.snapshot()
        assert not third.vfs[PF1_VF0].stale and third.vfs[PF1_VF0].counters_time == third.time
        assert third.vfs[PF1_VF0].rx_packets > first.vfs[PF1_VF0].rx_packets
    finally:
        host.close()


def test_idle_vf_is_fresh_once_a_refresh_period_passed(tmp_path: Path) -> None:
    host, counting, clock = host_on(tmp_path, libvirt=False)
    counting.frozen.add((hosttree.PF1[1], 40))
    idle = hosttree.vf_bdf(hosttree.PF1[0], 40)
    try:
        host.snapshot()
        clock.sleep(1.0)
        assert host.snapshot().vfs[idle].stale  # cannot tell idle from not-yet-copied
        clock.sleep(1.0)
        later = host.snapshot()
        assert not later.vfs[idle].stale and later.vfs[idle].counters_time == later.time
    finally:
        host.close()


def test_packets_moving_with_still_host_interrupts_are_marked_posted(tmp_path: Path) -> None:
    host, _, clock = host_on(tmp_path, libvirt=False)
    try:
        host.snapshot()
        clock.sleep(1.0)
        snap = host.snapshot()
        # The fixture's /proc/interrupts does not move while the counters do.
        assert snap.vfs[PF0_VF0].interrupts_frozen
        irq_file = tmp_path / "proc/interrupts"
        lines = irq_file.read_text().splitlines()
        irq_file.write_text("\n".join(add_to_cpu0(ln, 1000) if f"vfio-msix[0]({PF0_VF0})" in ln else ln
                                      for ln in lines) + "\n")
        clock.sleep(1.0)
        snap = host.snapshot()
        assert not snap.vfs[PF0_VF0].interrupts_frozen
        assert snap.vfs[hosttree.vf_bdf(hosttree.PF0[0], 1)].interrupts_frozen
    finally:
        host.close()


def test_vf_vanishing_after_inventory_is_an_error_line_not_a_crash(tmp_path: Path) -> None:
    host, counting, _ = host_on(tmp_path, libvirt=False)
    try:
        counting.missing.add((hosttree.PF0[1], 5))
        del counting.pfs[hosttree.PF1[1]]  # the whole PF is gone: the kernel answers ENODEV
        snap = host.snapshot()
        gone = hosttree.vf_bdf(hosttree.PF0[0], 5)
        assert gone not in snap.vfs and PF1_VF0 not in snap.vfs
        assert len(snap.vfs) == 62
        assert f"enp3s0f0 VF 5 ({gone}): not in the PF's netlink VF list (VF removed?)" in snap.errors
        assert "enp3s0f1: netlink RTM_GETLINK: No such device (errno 19)" in snap.errors
        assert "enp3s0f1" not in snap.pfs and "enp3s0f0" in snap.pfs
    finally:
        host.close()


def test_unreadable_proc_files_are_reported_and_the_rest_still_sampled(tmp_path: Path) -> None:
    host, _, _ = host_on(tmp_path)
    try:
        irq_file = tmp_path / "proc/interrupts"
        irq_file.unlink()
        irq_file.mkdir()
        shutil.rmtree(tmp_path / "proc" / str(hosttree.GUESTS[2].pid))  # vm-db0's QEMU exited
        snap = host.snapshot()
        assert f"{irq_file}: Is a directory (errno 21)" in snap.errors
        assert any(e.startswith(f"guest vm-db0: {tmp_path}/proc/{hosttree.GUESTS[2].pid}/stat: No such file")
                   for e in snap.errors)
        assert len(snap.vfs) == 126 and snap.vfs[PF0_VF0].interrupts is None
        assert set(snap.guest_cpu) == {"vm-web0", "vm-web1", "vm-cache0"}
    finally:
        host.close()


def test_parse_interrupts_sums_vfio_vectors_per_device() -> None:
    text = (
        "            CPU0       CPU1\n"
        "  24:          5          7  IR-PCI-MSIX-0000:03:10.0    0-edge      vfio-msix[0](0000:03:10.0)\n"
        "  25:         10          0  IR-PCI-MSIX-0000:03:10.0    1-edge      vfio-msix[1](0000:03:10.0)\n"
        "  26:          1          1  IR-PCI-MSIX-0000:03:10.2    0-edge      vfio-msix[0](0000:03:10.2)\n"
        " NMI:          0          0   Non-maskable interrupts\n"
        " ERR:          0\n"
    )
    counts = parse_interrupts(text)
    assert counts.cpus == 2
    assert counts.vfio_by_pci == {"0000:03:10.0": 22, "0000:03:10.2": 2}
    assert counts.for_vf("0000:03:10.4", [26]) == 2 and counts.for_vf("0000:03:10.6", [99]) is None


def test_pid_stat_with_parentheses_in_the_process_name() -> None:
    fields = ["0"] * 10 + [str(3 * CLOCK_TICKS), str(CLOCK_TICKS)] + ["0"] * 30
    assert parse_pid_stat("77 (qemu (x) kvm) S " + " ".join(fields)) == 4.0


def test_counter_health_keeps_stale_while_interrupts_move() -> None:
    health = CounterHealth(refresh_s=2.0)
    health.update("v", 0.0, packets=10, interrupts=5, always_fresh=False)
    for t, irqs in ((1.0, 6), (2.0, 7), (3.0, 8)):
        h = health.update("v", t, packets=10, interrupts=irqs, always_fresh=False)
        # Interrupts keep coming but the copy never changes: the counters are stale, not idle.
        assert h.stale and h.counters_time == 0.0


def test_vf_macs_come_from_netlink_and_reach_the_inventory(tmp_path: Path) -> None:
    host, counting, _ = host_on(tmp_path, libvirt=False)
    try:
        counting.macs[(hosttree.PF0[1], 0)] = "02:aa:bb:cc:dd:01"
        assert host.inventory().vf(PF0_VF0).mac is None  # not read yet: inventory does not ask netlink
        snap = host.snapshot()
        assert snap.vfs[PF0_VF0].mac == "02:aa:bb:cc:dd:01"
        assert snap.vfs[PF1_VF0].mac == "52:54:00:05:00:00"
        assert host.inventory().vf(PF0_VF0).mac == "02:aa:bb:cc:dd:01"
    finally:
        host.close()
