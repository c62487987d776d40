"""ITR units shared by every backend: what a request becomes on an 82599."""

from vftune.itr import ITR_MAX_RATE, ITR_MIN_RATE, itr_to_usecs, quantize_itr, usecs_to_itr


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
