"""What a set rate bought against the VF's adaptive ITR (agent/value.py), from windows built as
the tuner builds them: merit and CPU per Gb against the adaptive ITR's under the same load, only
from windows measured near each other, and the host line that sums them."""

from __future__ import annotations

import math

import pytest

from vftune.agent.value import PAIR_S, ValueMeter, summarize
from vftune.control.window import Window
from vftune.model import VfView, VsAdaptive


def _bulk(end: float, itr: int, gbps: float, cpu_s: float, duration: float = 0.5) -> Window:
    """A receive-heavy bulk window (1500-byte frames) whose guest spent cpu_s over it."""
    bits = gbps * 1e9 * duration
    rx_packets = bits / (1500 * 8)
    return Window(end - duration, end, bits + 64 * 8 * rx_packets / 2, rx_packets * 1.5,
                  int(rx_packets / 20), itr, rx_bits=bits, rx_packets=rx_packets, cpu_s=cpu_s)


def _rr(end: float, itr: int, pps: float, cpu_s: float, duration: float = 0.5) -> Window:
    """A request/response window: as many 100-byte packets each way."""
    packets = pps * duration
    return Window(end - duration, end, packets * 100 * 8, packets, int(packets / 2), itr,
                  rx_bits=packets * 100 * 8 / 2, rx_packets=packets / 2, cpu_s=cpu_s)


def test_a_set_rate_is_judged_against_the_adaptive_itr_under_the_same_load():
    meter = ValueMeter()
    meter.add(_bulk(10.0, 0, 3.0, 0.30))  # the adaptive ITR: 3 Gb/s for 0.3 CPU s per 0.5 s
    for i in range(4):
        meter.add(_bulk(20.0 + i, 7398, 3.6, 0.27))  # the set rate: +20% for less CPU
    got = meter.compare(7398, now=70.0)
    assert got is not None and got.merit == "throughput"
    assert got.merit_change == pytest.approx(0.2, rel=1e-3)
    # CPU per bit: 0.27/3.6 against 0.30/3.0, plus the tuner's price of each host interrupt.
    assert -0.30 < got.cpu_per_gbit_change < -0.20
    assert got.cpu_change_cores < 0  # saved at the VF's throughput now
    assert got.age_s == pytest.approx(60.0)
    assert meter.compare(0, now=70.0) is None  # under its adaptive ITR: nothing bought
    assert meter.compare(20000, now=70.0) is None  # a rate never measured


def test_the_same_window_twice_counts_once_and_one_window_is_not_enough():
    meter = ValueMeter()
    meter.add(_bulk(10.0, 0, 3.0, 0.3))
    w = _bulk(12.0, 9766, 3.3, 0.3)
    meter.add(w)
    meter.add(w)  # the tuner's latest window, read again at the next tick
    assert meter.compare(9766, now=13.0) is None
    meter.add(_bulk(13.0, 9766, 3.3, 0.3))
    assert meter.compare(9766, now=13.0) is not None


def test_windows_long_after_the_adaptive_reference_do_not_move_the_comparison():
    meter = ValueMeter()
    meter.add(_bulk(10.0, 0, 3.0, 0.3))
    for t in (12.0, 13.0):
        meter.add(_bulk(t, 7398, 3.3, 0.3))
    before = meter.compare(7398, now=20.0)
    # The load halves much later: those windows are no comparison with the adaptive ITR's.
    for i in range(30):
        meter.add(_bulk(10.0 + PAIR_S + 50 + i, 7398, 1.5, 0.15))
    after = meter.compare(7398, now=10.0 + PAIR_S + 80)
    assert before is not None and after is not None
    assert after.merit_change == pytest.approx(before.merit_change)
    assert after.age_s > PAIR_S
    # A new adaptive measurement (a cold search) pairs with the windows near it.
    meter.add(_bulk(10.0 + PAIR_S + 85, 0, 1.4, 0.15))
    fresh = meter.compare(7398, now=10.0 + PAIR_S + 90)
    assert fresh is not None and fresh.merit_change == pytest.approx(1.5 / 1.4 - 1, rel=1e-3)


def test_a_request_response_load_is_judged_on_its_transaction_rate():
    meter = ValueMeter()
    meter.add(_rr(5.0, 0, 40_000, 0.2))
    for t in (8.0, 9.0):
        meter.add(_rr(t, 244141, 50_000, 0.25))
    got = meter.compare(244141, now=9.0)
    assert got is not None and got.merit == "response time"
    assert got.merit_change == pytest.approx(0.25)
    assert got.response_time_change == pytest.approx(-0.2)


def test_windows_without_guest_cpu_or_traffic_are_left_out():
    meter = ValueMeter()
    meter.add(Window(0.0, 0.5, 0.0, 0.0, 0, 0))
    meter.add(_bulk(1.0, 0, 3.0, 0.3).__class__(0.5, 1.0, 1e9, 1e5, 10, 0, rx_bits=1e9, rx_packets=1e5))  # cpu unknown
    meter.add(_bulk(2.0, 7398, 3.0, 0.3))
    meter.add(_bulk(3.0, 7398, 3.0, 0.3))
    assert meter.compare(7398, now=3.0) is None


def _vf(pci: str, value: VsAdaptive | None, rx_bps: float) -> VfView:
    return VfView(pci=pci, pf="enp3s0f0", index=0, driver="vfio-pci", guest="g", guest_uuid=None, itr=7398,
                  policy="vftune", phase="holding", rx_pps=None, rx_bps=rx_bps, tx_pps=None, tx_bps=0.0,
                  interrupts_per_s=None, guest_cpu=None, fresh=True, updated=None, last_decision=None,
                  policy_state={}, vs_adaptive=value)


def test_the_host_line_weights_merit_by_traffic_and_sums_cpu():
    bulk = VsAdaptive("throughput", 0.2, 0.05, 0.3, 300.0)
    small = VsAdaptive("throughput", -0.1, -0.1, -0.1, 60.0)
    rr = VsAdaptive("response time", 0.25, 0.1, 0.2, 90.0)
    host = summarize([_vf("a", bulk, 3e9), _vf("b", small, 1e9), _vf("c", rr, 1e8), _vf("d", None, 5e9)])
    assert host is not None and host.vfs == 3
    assert host.cpu_change_cores == pytest.approx(0.4)
    assert host.merit_change == pytest.approx((0.2 * 3e9 - 0.1 * 1e9 + 0.25 * 1e8) / 4.1e9)
    assert host.text == ("+12% throughput on 2 VFs, -20% response time on 1 VF, for 0.40 CPU "
                         "(measured 60 s to 5 min ago)")
    assert summarize([_vf("d", None, 5e9)]) is None


def test_the_host_line_says_when_the_same_throughput_costs_less():
    same = VsAdaptive("throughput", 0.004, -0.11, -0.2, 30.0)
    host = summarize([_vf("a", same, 3e9)])
    assert host is not None and host.text.startswith("-11% CPU per Gb at the same throughput on 1 VF")
    assert math.isfinite(host.cpu_change_cores)
