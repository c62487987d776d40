"""The agent's totals since start (loop._add_totals): an idle VF's sample, which leaves them as
they are, changes nothing, to the last bit and in key order, against the sums taken every time."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from vftune.agent.loop import _add_totals
from vftune.model import VfSample


def _reference(totals: dict[str, float], s: VfSample) -> None:
    dt, get = s.dt, totals.get
    totals["rx_bytes"] = get("rx_bytes", 0.0) + s.rx_bps / 8 * dt
    totals["tx_bytes"] = get("tx_bytes", 0.0) + s.tx_bps / 8 * dt
    totals["rx_packets"] = get("rx_packets", 0.0) + s.rx_pps * dt
    totals["tx_packets"] = get("tx_packets", 0.0) + s.tx_pps * dt
    if s.interrupts_per_s is not None:
        totals["interrupts"] = get("interrupts", 0.0) + s.interrupts_per_s * dt


RATE = st.sampled_from([0.0, -0.0, 1.0, 1e9, 1 / 3, math.inf, math.nan])
INTS = st.one_of(st.none(), RATE)
DT = st.sampled_from([0.25, 0.0, 1e-9, 2.0, math.inf])


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(st.tuples(RATE, RATE, RATE, RATE, INTS, DT), max_size=8))
def test_totals_are_the_sums_taken_every_time(samples):
    mine: dict[str, float] = {}
    ref: dict[str, float] = {}
    for rx_pps, rx_bps, tx_pps, tx_bps, ints, dt in samples:
        s = VfSample("0000:03:10.0", "enp3s0f0", 1.0, dt, rx_pps, rx_bps, tx_pps, tx_bps, ints, None, 0, None)
        _add_totals(mine, s)
        _reference(ref, s)
        assert list(mine) == list(ref)
        assert [repr(v) for v in mine.values()] == [repr(v) for v in ref.values()]
