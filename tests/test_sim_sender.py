"""The sending host's CPU as a limit (model.sender_bound_pps), on Geist et al.'s testbed."""

from __future__ import annotations

from dataclasses import replace

from vftune.sim.costs import GEIST_P4
from vftune.sim.model import Platform, VfInput, sender_bound_pps, vf_rates
from vftune.sim.validate import GEIST_PLATFORM, GEIST_UNIT_S
from vftune.sim.workload import Stream

WITH_SENDER = replace(GEIST_PLATFORM, sender=GEIST_P4)


def _delivered(mtu: int, acked: bool, delay: int, plat: Platform = GEIST_PLATFORM) -> float:
    w = Stream(packet_bytes=mtu, acked=acked, rtt_s=60e-6)
    return vf_rates(VfInput(w, 1.0 / (delay * GEIST_UNIT_S), 1.0), plat=plat).delivered_bps


def test_a_sender_like_the_receiver_limits_small_segments_at_short_delays_only() -> None:
    # At a delay of 10 units its interrupts for ACKs and completions cost it the line rate ...
    assert _delivered(1500, True, 10, WITH_SENDER) < 0.8 * _delivered(1500, True, 10)
    # ... at 80 they no longer do, and large segments never hit the limit.
    assert _delivered(1500, True, 80, WITH_SENDER) == _delivered(1500, True, 80)
    assert _delivered(6000, True, 10, WITH_SENDER) == _delivered(6000, True, 10)


def test_the_sender_bound_falls_with_more_interrupts_and_acks() -> None:
    slow, fast = 1.0 / (640 * GEIST_UNIT_S), 1.0 / (10 * GEIST_UNIT_S)
    assert sender_bound_pps(1500, True, fast, GEIST_P4) < sender_bound_pps(1500, True, slow, GEIST_P4)
    # ACKs cost a TCP sender more than a UDP sender's send calls save it here.
    tcp, udp = sender_bound_pps(1500, True, fast, GEIST_P4), sender_bound_pps(1500, False, fast, GEIST_P4)
    assert tcp < udp
    # Without interrupts the bound is the CPU over the per-packet work.
    per_packet = GEIST_P4.per_byte_s * 1500 + GEIST_P4.per_packet_s * 2.0
    assert abs(sender_bound_pps(1500, False, 1e-3, GEIST_P4) * per_packet - 1.0) < 0.01
