"""The interrupt-delay range of each simulated NIC profile: the one place a sweep, the oracle's
candidates, the simulated host's capabilities and `vftune sim validate` take it from.

Both NICs keep an interval in whole register steps; a rate (interrupts/s) is 1e6 / (steps *
step_us):
- 82599 (ixgbe/ixgbevf): EITR's 9-bit interval field, 1..511 steps of 2.048 us, 956..488281/s
  (vftune.itr; IXGBE_MIN_INT_RATE, IXGBE_MAX_INT_RATE).
- pro1000 (e1000): the absolute receive-interrupt delay (RADV, `RxAbsIntDelay`) counts 1.024 us
  units in a 16-bit field. The profile sweeps 1..3200 units (1.024 us .. 3.28 ms, 976562..305/s):
  the range Geist et al. measured this NIC over (delays 10..3200), where their TCP at MTU 6000
  decays past ~2000; the field's far end (67 ms, 15 interrupts/s) holds a 256-descriptor ring's
  worth of packets at any rate a host of that era receives and tells nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

from vftune.itr import ITR_MAX_STEPS, ITR_STEP_US


@dataclass(frozen=True)
class NicProfile:
    name: str
    step_us: float  # one unit of the interval register
    max_steps: int  # the longest interval the profile sweeps, in units

    def rate(self, steps: int) -> int:
        """Interrupts/s of a whole number of interval units."""
        return int(round(1e6 / (steps * self.step_us)))

    def steps(self, itr: float) -> int:
        """Interval units (1..max_steps) whose rate is nearest to `itr`."""
        return max(1, min(self.max_steps, round(1e6 / (itr * self.step_us))))

    def quantize(self, itr: float) -> int:
        """The rate the NIC really delivers for a request: whole interval units."""
        return self.rate(self.steps(itr))

    @property
    def itr_min(self) -> int:
        return self.rate(self.max_steps)

    @property
    def itr_max(self) -> int:
        return self.rate(1)

    def hardware_rates(self) -> list[int]:
        """Every rate the profile delivers, ascending."""
        return sorted({self.rate(s) for s in range(1, self.max_steps + 1)})


I82599 = NicProfile("82599", ITR_STEP_US, ITR_MAX_STEPS)
PRO1000 = NicProfile("pro1000", 1.024, 3200)
NIC_PROFILES = {p.name: p for p in (I82599, PRO1000)}


def profile_for_range(itr_min: int, itr_max: int) -> NicProfile:
    """The profile whose range a host reports (its capabilities' itr_min, itr_max), for a policy
    that sees only those; the 82599 where none matches."""
    return next((p for p in NIC_PROFILES.values() if (p.itr_min, p.itr_max) == (itr_min, itr_max)), I82599)


def nic_profile(name: str) -> NicProfile:
    """The profile of a scenario's `nic`; ValueError naming the known ones otherwise."""
    try:
        return NIC_PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown NIC {name!r}: expected one of {', '.join(NIC_PROFILES)}") from None
