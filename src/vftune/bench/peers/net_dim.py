"""``net_dim``: Linux DIM as a guest driver runs it, a port of lib/dim/net_dim.c and dim.c (6.1).

A decision every 64 events, 10% significance, bytes/ms then packets/ms then events/ms, the
PARKING_ON_TOP / PARKING_TIRED / GOING_LEFT / GOING_RIGHT tuner with a tired counter of 10,
five profiles. Two profile tables, mapped to 82599 rates (1e6/usec, clamped to 956..488281/s;
the profiles' packet counts have no 82599 equivalent and are dropped):
- ``ice``: Intel ice's rx table, 2 / 8 / 16 / 62 / 126 us (`net_dim`, the headline peer);
- ``cqe``: mlx5's CQE table, 2 / 8 / 16 / 32 / 64 us (`net_dim-cqe`).
The profile index starts at 1 (NET_DIM_DEF_PROFILE_CQE, ICE_DIM_DEFAULT_PROFILE_IX).

Where it runs: in the guest, per interrupt, on the driver's own ring counters (exact, never the
host's 2-s VF counter refresh). GuestNetDim takes the place of ixgbevf's adaptive ITR in the
simulated guest (bench/groundtruth.py feeds it every simulator step, 0.25 s): each step it ends the
measurement that 64 events completed and decides, and the profile is applied at once, as
the driver's work item does. One vector carries a VF's rx and tx rings on the 82599, so DIM
counts both rings' packets and bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE, quantize_itr

DIM_NEVENTS = 64
NET_DIM_PARAMS_NUM_PROFILES = 5
NET_DIM_DEF_PROFILE = 1  # NET_DIM_DEF_PROFILE_CQE == NET_DIM_DEF_PROFILE_EQE == 1
RX_PROFILE_USECS = {"ice": (2, 8, 16, 62, 126), "cqe": (2, 8, 16, 32, 64)}

# enum dim_state, dim_tune_state, dim_stats_state, dim_step_result
DIM_START_MEASURE, DIM_MEASURE_IN_PROGRESS, DIM_APPLY_NEW_PROFILE = 0, 1, 2
DIM_PARKING_ON_TOP, DIM_PARKING_TIRED, DIM_GOING_RIGHT, DIM_GOING_LEFT = 0, 1, 2, 3
DIM_STATS_WORSE, DIM_STATS_SAME, DIM_STATS_BETTER = 0, 1, 2
DIM_STEPPED, DIM_TOO_TIRED, DIM_ON_EDGE = 0, 1, 2
TUNE_STATE_NAMES = {0: "PARKING_ON_TOP", 1: "PARKING_TIRED", 2: "GOING_RIGHT", 3: "GOING_LEFT"}


def _bit_gap(bits: int, end: int, start: int) -> int:
    return ((end - start) + (1 << bits)) & ((1 << bits) - 1)


def _significant(val: int, ref: int) -> bool:
    """IS_SIGNIFICANT_DIFF: more than 10% apart, integer arithmetic as in dim.h."""
    return bool(ref) and (100 * abs(val - ref)) // ref > 10


@dataclass
class DimSample:
    time_us: int
    pkt_ctr: int  # u32
    byte_ctr: int  # u32
    event_ctr: int  # u16


@dataclass
class DimStats:
    ppms: int = 0
    bpms: int = 0
    epms: int = 0


class NetDim:
    """struct dim and net_dim() for one rx queue: feed samples, get profile changes."""

    def __init__(self, profile_ix: int = NET_DIM_DEF_PROFILE) -> None:
        self.state = DIM_START_MEASURE
        self.tune_state = DIM_PARKING_ON_TOP  # the struct is zeroed at allocation
        self.profile_ix = profile_ix
        self.steps_right = 0
        self.steps_left = 0
        self.tired = 0
        self.prev_stats = DimStats()
        self.start_sample = DimSample(0, 0, 0, 0)

    # dim.c
    def on_top(self) -> bool:
        if self.tune_state in (DIM_PARKING_ON_TOP, DIM_PARKING_TIRED):
            return True
        if self.tune_state == DIM_GOING_RIGHT:
            return self.steps_left > 1 and self.steps_right == 1
        return self.steps_right > 1 and self.steps_left == 1

    def turn(self) -> None:
        if self.tune_state == DIM_GOING_RIGHT:
            self.tune_state = DIM_GOING_LEFT
            self.steps_left = 0
        elif self.tune_state == DIM_GOING_LEFT:
            self.tune_state = DIM_GOING_RIGHT
            self.steps_right = 0

    def park_on_top(self) -> None:
        self.steps_right = self.steps_left = self.tired = 0
        self.tune_state = DIM_PARKING_ON_TOP

    def park_tired(self) -> None:
        self.steps_right = self.steps_left = 0
        self.tune_state = DIM_PARKING_TIRED

    @staticmethod
    def calc_stats(start: DimSample, end: DimSample) -> DimStats | None:
        delta_us = (end.time_us - start.time_us) & 0xFFFFFFFF
        if not delta_us:
            return None
        npkts = _bit_gap(32, end.pkt_ctr, start.pkt_ctr)
        nbytes = _bit_gap(32, end.byte_ctr, start.byte_ctr)
        def ceil(n: int, d: int) -> int:  # DIV_ROUND_UP
            return -(-n // d)

        return DimStats(
            ppms=ceil(npkts * 1000, delta_us),
            bpms=ceil(nbytes * 1000, delta_us),
            epms=ceil(DIM_NEVENTS * 1000, delta_us),  # sic: DIM_NEVENTS, not the events seen
        )

    # net_dim.c
    def step(self) -> int:
        if self.tired == NET_DIM_PARAMS_NUM_PROFILES * 2:
            return DIM_TOO_TIRED
        if self.tune_state == DIM_GOING_RIGHT:
            if self.profile_ix == NET_DIM_PARAMS_NUM_PROFILES - 1:
                return DIM_ON_EDGE
            self.profile_ix += 1
            self.steps_right += 1
        elif self.tune_state == DIM_GOING_LEFT:
            if self.profile_ix == 0:
                return DIM_ON_EDGE
            self.profile_ix -= 1
            self.steps_left += 1
        self.tired += 1
        return DIM_STEPPED

    def exit_parking(self) -> None:
        self.tune_state = DIM_GOING_LEFT if self.profile_ix else DIM_GOING_RIGHT
        self.step()

    def stats_compare(self, curr: DimStats, prev: DimStats) -> int:
        if not prev.bpms:
            return DIM_STATS_BETTER if curr.bpms else DIM_STATS_SAME
        if _significant(curr.bpms, prev.bpms):
            return DIM_STATS_BETTER if curr.bpms > prev.bpms else DIM_STATS_WORSE
        if not prev.ppms:
            return DIM_STATS_BETTER if curr.ppms else DIM_STATS_SAME
        if _significant(curr.ppms, prev.ppms):
            return DIM_STATS_BETTER if curr.ppms > prev.ppms else DIM_STATS_WORSE
        if not prev.epms:
            return DIM_STATS_SAME
        if _significant(curr.epms, prev.epms):
            return DIM_STATS_BETTER if curr.epms < prev.epms else DIM_STATS_WORSE
        return DIM_STATS_SAME

    def decision(self, curr: DimStats) -> bool:
        prev_state, prev_ix = self.tune_state, self.profile_ix
        if self.tune_state == DIM_PARKING_ON_TOP:
            if self.stats_compare(curr, self.prev_stats) != DIM_STATS_SAME:
                self.exit_parking()
        elif self.tune_state == DIM_PARKING_TIRED:
            self.tired -= 1
            if not self.tired:
                self.exit_parking()
        else:
            if self.stats_compare(curr, self.prev_stats) != DIM_STATS_BETTER:
                self.turn()
            if self.on_top():
                self.park_on_top()
            else:
                result = self.step()
                if result == DIM_ON_EDGE:
                    self.park_on_top()
                elif result == DIM_TOO_TIRED:
                    self.park_tired()
        if prev_state != DIM_PARKING_ON_TOP or self.tune_state != DIM_PARKING_ON_TOP:
            self.prev_stats = curr
        return self.profile_ix != prev_ix

    def net_dim(self, end: DimSample) -> bool:
        """One call of net_dim(); True when a new profile must be applied."""
        if self.state == DIM_MEASURE_IN_PROGRESS:
            nevents = _bit_gap(16, end.event_ctr, self.start_sample.event_ctr)
            if nevents < DIM_NEVENTS:
                return False
            curr = self.calc_stats(self.start_sample, end)
            if curr is None:
                return False
            if self.decision(curr):
                self.state = DIM_APPLY_NEW_PROFILE
                return True
            # fallthrough to DIM_START_MEASURE
        if self.state in (DIM_START_MEASURE, DIM_MEASURE_IN_PROGRESS):
            self.start_sample = end
            self.state = DIM_MEASURE_IN_PROGRESS
        return False

    def profile_applied(self) -> None:
        """What the driver's work item does after setting the moderation."""
        self.state = DIM_START_MEASURE




class GuestNetDim:
    """net_dim in a guest's driver for one VF's vector: fed the VF's rates as they happen."""

    def __init__(self, table: str = "ice") -> None:
        if table not in RX_PROFILE_USECS:
            raise ValueError(f"DIM profile table must be one of {', '.join(RX_PROFILE_USECS)}, got {table!r}")
        self.table = table
        self.rates = tuple(int(min(ITR_MAX_RATE, max(ITR_MIN_RATE, 1e6 / u))) for u in RX_PROFILE_USECS[table])
        self.dim = NetDim()
        self.dim.profile_applied()  # the driver applies the default profile at open
        self.decisions = 0
        self._time_us = 0.0
        self._packets = 0.0
        self._bytes = 0.0
        self._events = 0.0

    @property
    def itr(self) -> int:
        """The rate the vector runs now: the profile in force."""
        return quantize_itr(self.rates[self.dim.profile_ix])

    def _sample(self) -> DimSample:
        return DimSample(int(self._time_us) & 0xFFFFFFFF, int(self._packets) & 0xFFFFFFFF,
                         int(self._bytes) & 0xFFFFFFFF, int(self._events) & 0xFFFF)

    def observe(self, rates: Any, seconds: float) -> None:
        """`seconds` of the vector at these rates (a simulator step's VfRates)."""
        if self.dim.state == DIM_START_MEASURE:
            self.dim.net_dim(self._sample())  # the first interrupt after a profile change
        self._time_us += seconds * 1e6
        self._packets += (rates.rx_pps + rates.tx_pps) * seconds
        self._bytes += (rates.rx_Bps + rates.tx_Bps) * seconds
        self._events += rates.interrupts_per_s * seconds
        if self.dim.net_dim(self._sample()):
            self.decisions += 1
            self.dim.profile_applied()

    def update(self, rx_bytes: float, tx_bytes: float, interrupts: float) -> None:
        """The simulator's call for ixgbevf's adaptive ITR, whose place this takes: DIM is fed
        through observe(), which sees packets too."""
