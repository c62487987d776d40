"""RateDeriver's port view: each VF sample carries its port's received total, the port's
capacity at line rate and the VF's fair share of it (what the tuner judges saturated ports on)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vftune.agent.sampling import RateDeriver, fair_share, fair_shares, port_view
from vftune.itr import LINE_RATE_BPS
from vftune.model import Guest, GuestCpuTimes, Inventory, PfCounters, PfInfo, Snapshot, VfCounters, VfInfo, VfSample

FRAME = 1518  # bytes the counters count per full-size frame (header + FCS included)
CAPACITY = LINE_RATE_BPS * FRAME / (FRAME + 20)  # 8 B preamble + 12 B gap per frame on the wire


def test_fair_share_water_fills_the_line_rate():
    # Everyone wants more than an equal split: the equal split.
    assert fair_share(1000.0, [400.0, 400.0, 400.0]) == pytest.approx(250.0)
    # A small user leaves its room to the others: (1000 - 100) / 3.
    assert fair_share(1000.0, [100.0, 400.0, 400.0]) == pytest.approx(300.0)
    # A neighbour just under the equal split is held back by its own setting, not a small user.
    assert fair_share(1000.0, [240.0, 400.0, 400.0]) == pytest.approx(250.0)
    assert fair_share(1000.0, []) == pytest.approx(1000.0)


def test_port_view_capacity_follows_the_frame_size():
    full = port_view({"a": (4e9, 4e9 / 8 / FRAME)}, (1e9, 1e9 / 8 / FRAME))
    assert full.rx_bps == pytest.approx(5e9)
    assert full.capacity_bps == pytest.approx(CAPACITY)
    small = port_view({"a": (1e9, 1e9 / 8 / 82)}, (0.0, 0.0))  # 64-byte IP packets
    assert small.capacity_bps == pytest.approx(LINE_RATE_BPS * 82 / 102)
    assert port_view({"a": (0.0, 0.0)}, (0.0, 0.0)).capacity_bps == LINE_RATE_BPS


def _inventory(n_vfs: int) -> Inventory:
    vfs = tuple(VfInfo("enp3s0f0", i, f"0000:03:10.{i}", "vfio-pci") for i in range(n_vfs))
    other = (VfInfo("enp3s0f1", 0, "0000:03:18.0", "vfio-pci"),)
    return Inventory((
        PfInfo("enp3s0f0", "0000:03:00.0", 0x10FB, "ixgbe", n_vfs, 63, vfs),
        PfInfo("enp3s0f1", "0000:03:00.1", 0x10FB, "ixgbe", 1, 63, other),
    ))


class Port:
    """Cumulative counters of two ports: VF rx rates in bits/s set per tick, full-size frames."""

    def __init__(self, inv: Inventory) -> None:
        self.inv = inv
        self.t = 0.0
        self.bytes = {vf.pci: 0.0 for vf in inv.vfs()}
        self.pf_bytes = {pf.name: 0.0 for pf in inv.pfs}

    def tick(self, vf_bps: dict[str, float], pf_bps: float = 0.0, drop: str | None = None) -> Snapshot:
        self.t += 1.0
        for pci, bps in vf_bps.items():
            self.bytes[pci] += bps / 8
        self.pf_bytes["enp3s0f0"] += pf_bps / 8
        vfs = {
            pci: VfCounters(int(b // FRAME), int(b), 0, 0, None, counters_time=self.t)
            for pci, b in self.bytes.items() if pci != drop
        }
        pfs = {name: PfCounters(int(b // FRAME), int(b)) for name, b in self.pf_bytes.items()}
        return Snapshot(self.t, vfs, pfs, {}, 0.0)


def test_every_vf_sample_carries_its_ports_total_capacity_and_share():
    inv = _inventory(4)
    port, deriver = Port(inv), RateDeriver()
    rates = {vf.pci: 2.4e9 for vf in inv.vfs()}
    rates["0000:03:18.0"] = 3e9
    for _ in range(3):
        samples, _, _ = deriver.derive(port.tick(rates, pf_bps=0.3e9), inv, {}, {})
    by_pci = {s.pci: s for s in samples}
    s = by_pci["0000:03:10.1"]
    assert s.port_rx_bps == pytest.approx(4 * 2.4e9 + 0.3e9, rel=1e-3)
    assert s.port_rx_capacity_bps == pytest.approx(CAPACITY, rel=1e-3)
    # The PF's 0.3 Gb/s is a small user: the four VFs split the rest.
    assert s.port_rx_share_bps == pytest.approx((CAPACITY - 0.3e9) / 4, rel=1e-3)
    # The other port is on its own: its one VF may have the whole line.
    alone = by_pci["0000:03:18.0"]
    assert alone.port_rx_bps == pytest.approx(3e9, rel=1e-3)
    assert alone.port_rx_share_bps == pytest.approx(CAPACITY, rel=1e-3)


def test_a_port_with_an_unrated_vf_has_no_port_view():
    inv = _inventory(2)
    port, deriver = Port(inv), RateDeriver()
    rates = {vf.pci: 1e9 for vf in inv.vfs()}
    deriver.derive(port.tick(rates), inv, {}, {})
    samples, _, _ = deriver.derive(port.tick(rates, drop="0000:03:10.1"), inv, {}, {})
    seen = {s.pci: s for s in samples}
    assert "0000:03:10.1" not in seen
    assert seen["0000:03:10.0"].port_rx_bps is None and seen["0000:03:10.0"].port_rx_share_bps is None
    assert seen["0000:03:18.0"].port_rx_bps == pytest.approx(1e9, rel=1e-3)


def test_room_a_neighbour_leaves_for_a_few_seconds_is_not_the_vfs_share():
    inv = _inventory(4)
    port, deriver = Port(inv), RateDeriver()
    level = CAPACITY / 4
    steady = {vf.pci: level for vf in inv.vfs()}
    for _ in range(10):
        deriver.derive(port.tick(steady), inv, {}, {})
    probing = dict(steady, **{"0000:03:10.3": 0.2 * level})  # the neighbour probes a low rate
    samples, _, _ = deriver.derive(port.tick(probing), inv, {}, {})
    share = {s.pci: s.port_rx_share_bps for s in samples}
    assert share["0000:03:10.0"] == pytest.approx(level, rel=1e-3)
    # Once it has stayed small for longer than the memory, it is a small user: its room is shared.
    for _ in range(round(deriver.share_memory_s) + 1):
        samples, _, _ = deriver.derive(port.tick(probing), inv, {}, {})
    share = {s.pci: s.port_rx_share_bps for s in samples}
    assert share["0000:03:10.0"] == pytest.approx((CAPACITY - 0.2 * level) / 3, rel=1e-3)


def test_socket_drops_are_a_one_vf_guests_own_and_shared_by_packets_on_a_guest_with_several():
    """A guest's socket drops are guest-wide: they are its VF's own when it has one. On a guest
    with two, whose datagrams they were is not known: each VF's window counts a share by the
    packets it received, and none is shown as the VF's own (operators see rx_dropped_pps)."""
    solo, duo = Guest("solo", "u1"), Guest("duo", "u2")
    vfs = (VfInfo("enp3s0f0", 0, "0000:03:10.0", "vfio-pci", solo),
           VfInfo("enp3s0f0", 1, "0000:03:10.1", "vfio-pci", duo),
           VfInfo("enp3s0f0", 2, "0000:03:10.2", "vfio-pci", duo),
           VfInfo("enp3s0f0", 3, "0000:03:10.3", "vfio-pci", Guest("silent", "u3")),
           VfInfo("enp3s0f0", 4, "0000:03:10.4", "vfio-pci", Guest("silent", "u3")))
    inv = Inventory((PfInfo("enp3s0f0", "0000:03:00.0", 0x10FB, "ixgbe", 5, 63, vfs),))
    port, deriver = Port(inv), RateDeriver()
    rates = {vf.pci: 1e9 for vf in vfs} | {"0000:03:10.1": 3e9}  # duo's packets: 3 to 1
    drops = {"solo": 0, "duo": 0}  # "silent" has no agent: not in the snapshot
    samples: list = []
    for _ in range(3):
        drops = {g: n + 5000 for g, n in drops.items()}
        samples, _, _ = deriver.derive(dataclasses.replace(port.tick(rates), guest_rx_drops=drops), inv, {}, {})
    by_pci = {s.pci: s for s in samples}
    assert by_pci["0000:03:10.0"].rx_dropped_pps == pytest.approx(5000.0)
    assert by_pci["0000:03:10.0"].rx_dropped_share_pps is None
    assert by_pci["0000:03:10.1"].rx_dropped_pps is None and by_pci["0000:03:10.2"].rx_dropped_pps is None
    assert by_pci["0000:03:10.1"].rx_dropped_share_pps == pytest.approx(3750.0, rel=1e-3)
    assert by_pci["0000:03:10.2"].rx_dropped_share_pps == pytest.approx(1250.0, rel=1e-3)
    for silent in ("0000:03:10.3", "0000:03:10.4"):
        assert by_pci[silent].rx_dropped_pps is None and by_pci[silent].rx_dropped_share_pps is None


def test_a_guests_drops_are_rated_over_its_own_read_times_and_carried_between_reads():
    """An agent is read off the tick: a count read 0.3 s into a 1-s tick is rated over the time
    between reads, and a snapshot with no newer read carries the last rate instead of a 0 (a
    window would otherwise see none and then twice as many)."""
    solo = Guest("solo", "u1")
    vfs = (VfInfo("enp3s0f0", 0, "0000:03:10.0", "vfio-pci", solo),)
    inv = Inventory((PfInfo("enp3s0f0", "0000:03:00.0", 0x10FB, "ixgbe", 1, 63, vfs),))
    port, deriver = Port(inv), RateDeriver()
    rates = {"0000:03:10.0": 1e9}

    def tick(count: int, read_at: float) -> list:
        snap = dataclasses.replace(port.tick(rates), guest_rx_drops={"solo": count},
                                   guest_rx_drops_time={"solo": read_at})
        return deriver.derive(snap, inv, {}, {})[0]

    tick(0, 0.3)
    (s,) = tick(1200, 1.1)  # 1200 in 0.8 s between reads, not in the snapshots' 1 s
    assert s.rx_dropped_pps == pytest.approx(1500.0)
    (s,) = tick(1200, 1.1)  # not read again: the rate carries
    assert s.rx_dropped_pps == pytest.approx(1500.0)
    (s,) = tick(0, 3.4)  # the guest rebooted: its counter started again
    assert s.rx_dropped_pps == 0.0


def test_a_guests_own_cpu_split_is_rated_over_its_read_times_for_each_of_its_vfs():
    """The guest's interrupt and process CPU (guest-get-cpustats) come with its drops' read: rated
    over the reads' times, carried while not read again, 0 after a reboot, and given to every VF
    of the guest (it is the guest's, like its CPU); a guest without it shows None."""
    duo, silent = Guest("duo", "u2"), Guest("silent", "u3")
    vfs = (VfInfo("enp3s0f0", 0, "0000:03:10.0", "vfio-pci", duo),
           VfInfo("enp3s0f0", 1, "0000:03:10.1", "vfio-pci", duo),
           VfInfo("enp3s0f0", 2, "0000:03:10.2", "vfio-pci", silent))
    inv = Inventory((PfInfo("enp3s0f0", "0000:03:00.0", 0x10FB, "ixgbe", 3, 63, vfs),))
    port, deriver = Port(inv), RateDeriver()
    rates = {vf.pci: 1e9 for vf in vfs}

    def tick(irq: float, user: float, read_at: float) -> dict[str, VfSample]:
        times = GuestCpuTimes(user=user, system=1.0, interrupts=irq, idle=50.0, steal=0.0)
        snap = dataclasses.replace(port.tick(rates), guest_rx_drops={"duo": 0}, guest_rx_drops_time={"duo": read_at},
                                   guest_cpu_times={"duo": times})
        return {s.pci: s for s in deriver.derive(snap, inv, {}, {})[0]}

    tick(10.0, 100.0, 0.3)
    got = tick(10.4, 101.2, 1.1)  # 0.4 s of interrupts and 1.2 s of processes in the 0.8 s between reads
    for pci in ("0000:03:10.0", "0000:03:10.1"):
        assert got[pci].guest_irq_cpu == pytest.approx(0.5) and got[pci].guest_user_cpu == pytest.approx(1.5)
        assert got[pci].guest_idle_cpu == 0.0  # its idle did not move: full
    assert got["0000:03:10.2"].guest_irq_cpu is None and got["0000:03:10.2"].guest_user_cpu is None
    got = tick(10.4, 101.2, 1.1)  # not read again: the rates carry
    assert got["0000:03:10.0"].guest_irq_cpu == pytest.approx(0.5)
    got = tick(0.2, 0.5, 3.1)  # rebooted: its counts started again
    assert got["0000:03:10.0"].guest_irq_cpu == 0.0 and got["0000:03:10.0"].guest_user_cpu == 0.0


def test_the_vfs_of_one_guest_carry_their_bits_together_and_a_lone_vf_none():
    """A guest's CPU time covers all of its VFs, so each VF of a guest with two is given their
    bits/s together (the tuner takes the guest's CPU over those); a guest's only VF gets None."""
    shared, alone = Guest("vm-a", "uuid-a"), Guest("vm-b", "uuid-b")
    vfs = (VfInfo("enp3s0f0", 0, "0000:03:10.0", "vfio-pci", shared),
           VfInfo("enp3s0f0", 1, "0000:03:10.2", "vfio-pci", alone))
    other = (VfInfo("enp3s0f1", 0, "0000:03:10.1", "vfio-pci", shared),)
    inv = Inventory((PfInfo("enp3s0f0", "0000:03:00.0", 0x10FB, "ixgbe", 2, 63, vfs),
                     PfInfo("enp3s0f1", "0000:03:00.1", 0x10FB, "ixgbe", 1, 63, other)))
    port, deriver = Port(inv), RateDeriver()
    rates = {"0000:03:10.0": 3e9, "0000:03:10.1": 1e9, "0000:03:10.2": 2e9}
    for _ in range(3):
        samples, _, _ = deriver.derive(port.tick(rates), inv, {}, {})
    by_pci = {s.pci: s for s in samples}
    assert by_pci["0000:03:10.0"].guest_bps == pytest.approx(4e9, rel=1e-3)
    assert by_pci["0000:03:10.1"].guest_bps == pytest.approx(4e9, rel=1e-3)
    assert by_pci["0000:03:10.2"].guest_bps is None


# Rates as ports see them: idle users, equal users (ties), small and saturating ones.
_rates = st.one_of(st.just(0.0), st.sampled_from([1e6, 2.5e8, 1e9]),
                   st.floats(min_value=0.0, max_value=1.2e10, allow_nan=False))


@given(st.floats(min_value=1e8, max_value=1e10), st.lists(_rates, min_size=1, max_size=70),
       st.floats(min_value=0.5, max_value=1.0))
def test_the_ports_shares_at_once_are_each_users_fair_share_to_the_last_bit(capacity, wants, near):
    want = {f"vf{i}": w for i, w in enumerate(wants[1:])} | {"": wants[0]}
    users = [k for k in want if k]
    got = fair_shares(capacity, want, users, near)
    assert list(got) == users
    for u in users:
        assert got[u] == fair_share(capacity, [b for k, b in want.items() if k != u], near)


def test_a_pending_itr_is_in_the_sample_it_was_pending_for():
    inv = _inventory(2)
    port, deriver = Port(inv), RateDeriver()
    rates = {vf.pci: 1e9 for vf in inv.vfs()}
    deriver.derive(port.tick(rates), inv, {}, {})
    samples, _, _ = deriver.derive(port.tick(rates), inv, {"0000:03:10.0": 8000}, {}, {"0000:03:10.0": 20000})
    by_pci = {s.pci: s for s in samples}
    assert (by_pci["0000:03:10.0"].itr, by_pci["0000:03:10.0"].itr_pending) == (8000, 20000)
    assert (by_pci["0000:03:10.1"].itr, by_pci["0000:03:10.1"].itr_pending) == (0, None)


@given(st.lists(st.lists(st.sampled_from([0.0, 1e8, 2.4e9, 5e9]), min_size=5, max_size=5), min_size=2, max_size=12))
def test_port_fields_are_port_views_of_the_ticks_demands_whether_or_not_they_moved(ticks):
    """The port's shares are computed again only when its capacity or demands moved: every
    tick's port fields are port_view's of that tick's rates and demands, to the last bit."""
    inv = _inventory(4)
    port, deriver = Port(inv), RateDeriver()
    pcis = [vf.pci for vf in inv.vfs()]
    for rates in ticks:  # a rate held for several ticks is a port whose shares did not move
        snap = port.tick(dict(zip(pcis, rates)), pf_bps=rates[0] / 10)
        recent = {k: list(v) for k, v in deriver._recent.items()}
        samples, pf_samples, _ = deriver.derive(snap, inv, {}, {})
        if not samples:
            continue
        by_pci = {s.pci: s for s in samples}
        for pf in inv.pfs:
            members = [by_pci[vf.pci] for vf in pf.vfs]
            pf_rx = next((p.rx_bps, p.rx_pps) for p in pf_samples if p.pf == pf.name)
            vf_rx = {s.pci: (s.rx_bps, s.rx_pps) for s in members}

            def peak(key, bps, t=snap.time, recent=recent):  # the highest of the last share_memory_s, this one too
                kept = [b for at, b in recent.get(key, []) if at > t - deriver.share_memory_s]
                return max([*kept, bps])

            demand = {pci: peak(pci, b) for pci, (b, _) in vf_rx.items()}
            demand[""] = peak(f"pf:{pf.name}", pf_rx[0])
            view = port_view(vf_rx, pf_rx, demand)
            assert [(s.port_rx_bps, s.port_rx_capacity_bps, s.port_rx_share_bps) for s in members] == \
                [(view.rx_bps, view.capacity_bps, view.shares[s.pci]) for s in members]


def test_a_vf_at_rest_is_rated_once_per_span_and_its_quiet_span_comes_before_its_traffic():
    inv = _inventory(2)
    port, deriver = Port(inv), RateDeriver()
    quiet_vf, busy_vf = "0000:03:10.0", "0000:03:10.1"
    rates = {quiet_vf: 0.0, busy_vf: 2e9, "0000:03:18.0": 0.0}
    deriver.derive(port.tick(rates), inv, {}, {})
    deriver.derive(port.tick(rates), inv, {}, {})  # t=2: its last tick sample (quiet)
    resting = {quiet_vf}
    seen: list[tuple[float, list[VfSample], list[VfSample]]] = []
    for _ in range(8):  # t=3..10; a history row closes at 6 and 10
        vfs, _, quiet = deriver.derive(port.tick(rates), inv, {quiet_vf: 8000}, {}, resting=resting,
                                       close_spans=port.t in (6.0, 10.0))
        seen.append((port.t, vfs, quiet))
    # No tick sample while its counts stay the same; the busy VF's port still counts it (at zero).
    assert all(quiet_vf not in {s.pci for s in vfs} for _, vfs, _ in seen)
    busy = [s for _, vfs, _ in seen for s in vfs if s.pci == busy_vf]
    assert len(busy) == 8 and all(s.port_rx_bps == pytest.approx(2e9) for s in busy)
    assert all(s.port_rx_share_bps is not None and s.port_rx_share_bps > 5e9 for s in busy)
    # A span each time a row closes, from where its rest began (t=2), without a gap or overlap.
    spans = [s for _, _, quiet in seen for s in quiet]
    assert [(s.t - s.dt, s.t) for s in spans] == [(2.0, 6.0), (6.0, 10.0)]
    assert all(s.rx_bps == 0 and s.itr == 8000 and s.fresh for s in spans)
    # Traffic again at t=12: the span 10..11 first, then the tick 11..12 with its rate.
    deriver.derive(port.tick(rates), inv, {}, {}, resting=resting)
    vfs, _, quiet = deriver.derive(port.tick({**rates, quiet_vf: 1e9}), inv, {}, {}, resting=resting)
    assert [(s.t - s.dt, s.t) for s in quiet] == [(10.0, 11.0)]
    sample = next(s for s in vfs if s.pci == quiet_vf)
    assert (sample.t - sample.dt, sample.rx_bps) == (11.0, pytest.approx(1e9, rel=1e-3))
