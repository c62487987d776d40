"""ITR units shared by every backend: what a request becomes on an 82599."""

from hypothesis import given
from hypothesis import strategies as st

from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE, itr_to_usecs, quantize_itr, usecs_to_itr
from vftune.model import Capabilities
from vftune.sim.nic import PRO1000


def test_the_range_ends_are_the_drivers_limits():
    assert itr_to_usecs(ITR_MAX_RATE) == 2 and usecs_to_itr(2) == ITR_MAX_RATE
    assert itr_to_usecs(ITR_MIN_RATE) == 1022 and usecs_to_itr(1022) == ITR_MIN_RATE


def test_usecs_written_give_back_the_rate_the_hardware_delivers():
    # rx-usecs N keeps N/2 steps of 2.048 us, so 50 and 51 us are both 25 steps: 19531/s.
    assert usecs_to_itr(50) == usecs_to_itr(51) == 19531
    for itr in range(ITR_MIN_RATE, ITR_MAX_RATE + 1, 97):
        assert usecs_to_itr(itr_to_usecs(itr)) == quantize_itr(itr)
        # within half a step, plus what rounding the rate to a whole number adds
        assert abs(1e6 / quantize_itr(itr) - 1e6 / itr) <= 1.024 + 0.5e6 / itr**2 * 1.01


def test_off_and_adaptive_are_not_rates():
    assert itr_to_usecs(0) == 0 and usecs_to_itr(0) == 0 and usecs_to_itr(1) == 0


@given(st.floats(min_value=1.0, max_value=5e6, allow_nan=False))
def test_a_host_quantizes_to_its_own_nics_units(itr: float) -> None:
    """The tuner probes what the host's NIC delivers: the 82599's steps by default, a NIC with
    other units (the simulator's e1000, 1.024 us up to 3200 of them) by its own."""
    assert Capabilities(backend="any").quantize(itr) == quantize_itr(itr)
    e1000 = Capabilities(backend="sim", itr_min=PRO1000.itr_min, itr_max=PRO1000.itr_max, itr_unit_us=PRO1000.step_us)
    assert e1000.quantize(itr) == PRO1000.quantize(itr)
    assert PRO1000.itr_min <= e1000.quantize(itr) <= PRO1000.itr_max
