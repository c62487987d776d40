"""``ixgbe``: the PF driver's adaptive ITR (ixgbe_update_itr / ixgbe_set_itr) applied to a VF.

Counters: these algorithms run per interrupt in a driver with exact counters; here they see
one VfSample per tick. They are fed only on samples whose counters were refreshed, with the
counts accumulated since the previous refresh, so stale per-VF counters do not fool them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vftune.agent.policy import VfPolicy
from vftune.itr import same_itr
from vftune.model import Capabilities, ItrDecision, VfSample

IXGBE_ITR_ADAPTIVE_MIN_INC = 2
IXGBE_ITR_ADAPTIVE_MIN_USECS = 10
IXGBE_ITR_ADAPTIVE_MAX_USECS = 126
IXGBE_ITR_ADAPTIVE_LATENCY = 0x80
IXGBE_ITR_ADAPTIVE_BULK = 0x00
IXGBE_20K_ITR = 200  # q_vector->itr at open with rx-usecs adaptive (usecs << 2)


@dataclass
class _RingContainer:
    itr: int = 0


def ixgbe_update_itr(ring: _RingContainer, q_itr: int, packets: int, nbytes: int, stale: bool) -> None:
    """ixgbe_update_itr() for one ring container; q_itr is q_vector->itr (usecs << 2)."""
    itr = IXGBE_ITR_ADAPTIVE_MIN_USECS | IXGBE_ITR_ADAPTIVE_LATENCY
    if stale:  # no update within a jiffy: go back to the latency default
        ring.itr = itr
        return
    if not packets:
        itr = min((q_itr >> 2) + IXGBE_ITR_ADAPTIVE_MIN_INC, IXGBE_ITR_ADAPTIVE_MAX_USECS)
        ring.itr = itr + (ring.itr & IXGBE_ITR_ADAPTIVE_LATENCY)
        return
    if packets < 4 and nbytes < 9000:
        itr = IXGBE_ITR_ADAPTIVE_LATENCY
    elif packets < 48:
        ring.itr = min((q_itr >> 2) + IXGBE_ITR_ADAPTIVE_MIN_INC, IXGBE_ITR_ADAPTIVE_MAX_USECS)
        return
    elif packets < 96:
        ring.itr = q_itr >> 2
        return
    elif packets < 256:
        ring.itr = max(q_itr >> 3, IXGBE_ITR_ADAPTIVE_MIN_USECS)
        return
    else:
        itr = IXGBE_ITR_ADAPTIVE_BULK
    # adjust_by_size
    avg = nbytes // packets
    if avg <= 60:
        avg = 5120
    elif avg <= 316:
        avg = avg * 40 + 2720
    elif avg <= 1084:
        avg = avg * 15 + 11452
    elif avg < 1968:
        avg = avg * 5 + 22420
    else:
        avg = 32256
    if itr & IXGBE_ITR_ADAPTIVE_LATENCY:
        avg >>= 1
    # 10 GbE link: DIV_ROUND_UP(avg, MIN_INC * 256) * MIN_INC
    itr += -(-avg // (IXGBE_ITR_ADAPTIVE_MIN_INC * 256)) * IXGBE_ITR_ADAPTIVE_MIN_INC
    ring.itr = itr


class IxgbeAdaptive(VfPolicy):
    """ixgbe_set_itr() run per interrupt on the VF's single rx/tx vector.

    Per tick the policy replays the driver's per-interrupt updates with the average packets
    and bytes per interrupt that the offered load gives at the current delay, until the delay
    stops moving (or a bounded number of interrupts), then sets the VF's rate to 1e6/usecs.
    """

    name = "ixgbe"
    hz = 250  # jiffies per second for the "no update within a jiffy" rule
    max_replay = 2000

    def __init__(self, pci: str, caps: Capabilities) -> None:
        self.pci = pci
        self.caps = caps
        self.q_itr = IXGBE_20K_ITR
        self.rx = _RingContainer(IXGBE_ITR_ADAPTIVE_MIN_USECS | IXGBE_ITR_ADAPTIVE_LATENCY)
        self.tx = _RingContainer(IXGBE_ITR_ADAPTIVE_MIN_USECS | IXGBE_ITR_ADAPTIVE_LATENCY)
        self._acc = [0.0, 0.0, 0.0, 0.0, 0.0]  # rx pkts, rx bytes, tx pkts, tx bytes, seconds
        self._started = False

    @property
    def usecs(self) -> int:
        return self.q_itr >> 2

    @property
    def itr(self) -> int:
        return int(min(self.caps.itr_max, max(self.caps.itr_min, 1e6 / max(self.usecs, 1))))

    def step(self, s: VfSample) -> ItrDecision | None:
        acc = self._acc
        acc[0] += s.rx_pps * s.dt
        acc[1] += s.rx_bps * s.dt / 8.0
        acc[2] += s.tx_pps * s.dt
        acc[3] += s.tx_bps * s.dt / 8.0
        acc[4] += s.dt
        first = not self._started and not same_itr(s.itr, self.itr)
        self._started = True
        if not s.fresh or acc[4] <= 0:
            return ItrDecision(self.itr, f"ixgbe adaptive: start at {self.usecs} us") if first else None
        rx_pps, rx_Bps, tx_pps, tx_Bps = (v / acc[4] for v in acc[:4])
        self._acc = [0.0] * 5
        before = self.usecs
        self._replay(rx_pps, rx_Bps, tx_pps, tx_Bps)
        if self.usecs != before or not same_itr(s.itr, self.itr):
            per_irq = (rx_pps + tx_pps) * self._spacing_us(rx_pps + tx_pps) / 1e6
            return ItrDecision(self.itr, f"ixgbe adaptive: {per_irq:.0f} pkts/irq -> {self.usecs} us")
        return None

    def _spacing_us(self, pps: float) -> float:
        """Time between interrupts: the throttle delay, or the packet gap when longer."""
        gap = 1e6 / pps if pps > 0 else math.inf
        return max(float(self.usecs), gap)

    def _replay(self, rx_pps: float, rx_Bps: float, tx_pps: float, tx_Bps: float) -> None:
        seen: set[tuple[int, int, int]] = set()
        for _ in range(self.max_replay):
            spacing = self._spacing_us(rx_pps + tx_pps)
            stale = spacing > 1e6 / self.hz
            for ring, pps, Bps in ((self.tx, tx_pps, tx_Bps), (self.rx, rx_pps, rx_Bps)):
                packets = int(round(pps * spacing / 1e6)) if math.isfinite(spacing) else 0
                nbytes = int(round(Bps * spacing / 1e6)) if math.isfinite(spacing) else 0
                ixgbe_update_itr(ring, self.q_itr, packets, nbytes, stale)
            new_itr = (min(self.rx.itr, self.tx.itr) & ~IXGBE_ITR_ADAPTIVE_LATENCY) << 2
            self.q_itr = new_itr
            key = (self.q_itr, self.rx.itr, self.tx.itr)
            if key in seen:  # a fixed point or a cycle: the driver would sit here
                return
            seen.add(key)
