"""The history the store keeps of the ticks: one row per VF and PF a second, rates over the row."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vftune.agent.recording import VF_RATES, SampleRecorder, merge_pf_samples, merge_vf_samples
from vftune.model import PfSample, VfSample

PCI = "0000:03:10.0"


def _vf(t: float, dt: float = 0.25, rx_bps: float = 1e9, interrupts: int | None = 5000,
        guest_cpu: float | None = 0.5, itr: int = 0, fresh: bool = True) -> VfSample:
    ips = None if interrupts is None else interrupts / dt
    return VfSample(pci=PCI, pf="enp3s0f0", t=t, dt=dt, rx_pps=rx_bps / 12_000, rx_bps=rx_bps, tx_pps=0.0,
                    tx_bps=0.0, interrupts_per_s=ips, interrupts=interrupts, itr=itr, guest_cpu=guest_cpu,
                    fresh=fresh)


def test_a_burst_in_one_tick_counts_in_the_seconds_rate():
    # Three idle quarter-seconds and one at 4 Gbit/s: the second carried 1 Gbit.
    merged = merge_vf_samples([_vf(0.25, rx_bps=0.0), _vf(0.5, rx_bps=0.0), _vf(0.75, rx_bps=0.0),
                               _vf(1.0, rx_bps=4e9, itr=20000)])
    assert merged.t == 1.0 and merged.dt == pytest.approx(1.0)
    assert merged.rx_bps == pytest.approx(1e9)
    assert merged.interrupts == 20_000 and merged.interrupts_per_s == pytest.approx(20_000)
    assert merged.itr == 20000, "the row shows the setting in force at its end"


def test_what_is_unknown_for_part_of_a_row_is_unknown_for_the_row():
    merged = merge_vf_samples([_vf(0.25), _vf(0.5, interrupts=None, guest_cpu=None)])
    assert merged.interrupts is None and merged.interrupts_per_s is None and merged.guest_cpu is None


def test_stale_counters_inside_a_row_do_not_hide_the_refresh():
    merged = merge_vf_samples([_vf(0.25, fresh=False), _vf(0.5, fresh=True)])
    assert merged.fresh


def test_the_recorder_hands_back_one_row_a_second_and_starts_again():
    rec = SampleRecorder(1.0)
    rows = []
    for i in range(1, 13):  # three seconds of quarter-second ticks
        t = i * 0.25
        rec.add(t, [_vf(t, rx_bps=float(i))], [PfSample("enp3s0f0", t, 0.25, 100.0 * i, 8e3 * i, "napi")])
        if rec.due(t):
            rows.append(rec.take())
    assert [vfs[0].t for vfs, _ in rows] == [1.0, 2.0, 3.0]
    assert [vfs[0].rx_bps for vfs, _ in rows] == pytest.approx([2.5, 6.5, 10.5])
    assert [pfs[0].rx_pps for _, pfs in rows] == pytest.approx([250.0, 650.0, 1050.0])
    assert rec.take() == ([], [])


def test_a_record_period_of_zero_keeps_every_tick():
    rec = SampleRecorder(0.0)
    rec.add(0.25, [_vf(0.25)], [])
    assert rec.due(0.25) and rec.take()[0] == [_vf(0.25)]


def test_a_negative_period_is_refused_with_its_value():
    with pytest.raises(ValueError, match="-1"):
        SampleRecorder(-1)


@given(st.lists(st.tuples(st.floats(0.01, 2.0), st.floats(0, 1e10), st.integers(0, 10**6)), min_size=1, max_size=12))
def test_merging_keeps_every_bit_and_interrupt(parts):
    t, samples = 0.0, []
    for dt, bps, irqs in parts:
        t += dt
        samples.append(_vf(t, dt=dt, rx_bps=bps, interrupts=irqs))
    merged = merge_vf_samples(samples)
    assert merged.dt == pytest.approx(sum(s.dt for s in samples))
    assert merged.rx_bps * merged.dt == pytest.approx(sum(s.rx_bps * s.dt for s in samples), rel=1e-9, abs=1e-3)
    assert merged.interrupts == sum(s.interrupts or 0 for s in samples)


def test_one_pf_sample_is_its_own_row():
    p = PfSample("enp3s0f0", 1.0, 1.0, 5.0, 6.0, "de", 3)
    assert merge_pf_samples([p]) == p


RATES = st.one_of(st.none(), st.floats(-1e12, 1e12, allow_nan=False))


@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.1, 1.5]), RATES, RATES, st.booleans()), min_size=1, max_size=8))
def test_a_row_collected_tick_by_tick_is_the_plain_interval_weighted_mean(parts):
    """The recorder keeps running sums instead of the ticks' samples: the row must be the very
    floats the plain average over the kept samples gives (what the history held before)."""
    samples = [replace(_vf(0.25 * (i + 1), guest_cpu=cpu, fresh=fresh), dt=dt, port_rx_bps=port, itr=1000 * i,
                       itr_pending=i if fresh else None)
               for i, (dt, cpu, port, fresh) in enumerate(parts)]
    rec = SampleRecorder(1e9)
    for s in samples:
        rec.add(s.t, [s], [])
    (row,), _ = rec.take()
    dt = sum(s.dt for s in samples)
    for name in ("guest_cpu", "port_rx_bps", "rx_bps"):
        values = [getattr(s, name) for s in samples]
        if any(v is None for v in values):
            want = None
        elif dt <= 0:
            want = values[-1]
        else:
            want = sum(v * s.dt for v, s in zip(values, samples)) / dt
        assert getattr(row, name) == want or (len(samples) == 1 and getattr(row, name) == values[0])
    assert row.dt == dt and row.fresh == any(s.fresh for s in samples)
    # Everything else is the last sample's: its setting, its time.
    for f in fields(VfSample):
        if f.name not in VF_RATES and f.name not in ("dt", "interrupts", "fresh"):
            assert getattr(row, f.name) == getattr(samples[-1], f.name), f.name
