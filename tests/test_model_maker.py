"""model.maker: the per-tick records built fast are the same values as their constructors give."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from vftune.model import VfCounters, VfSample, make_vf_counters, make_vf_sample


def test_a_sample_built_fast_is_the_one_the_constructor_builds():
    values = ["0000:03:10.0", "eth0", 1.5, 0.25, 0.1, 1e-7, 3.0, 4.0, None, None, 8000, 0.3, False,
              1e10, 9e9, 5e8, None, 488, None, 0.0]
    fast, slow = make_vf_sample(values), VfSample(*values)
    assert type(fast) is VfSample and fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert pickle.loads(pickle.dumps(fast)) == slow
    assert dataclasses.replace(fast, itr=0) == dataclasses.replace(slow, itr=0)
    assert fast.throughput_bps == slow.throughput_bps
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.itr = 1  # type: ignore[misc]


def test_counters_with_their_defaults_left_out_go_through_the_constructor():
    assert make_vf_counters((1, 2, 3, 4, None, 5.0)) == VfCounters(1, 2, 3, 4, None, 5.0)
    assert make_vf_counters((1, 2, 3, 4, 7, 5.0, True, False, "aa:bb:cc:dd:ee:ff")) == \
        VfCounters(1, 2, 3, 4, 7, 5.0, True, False, "aa:bb:cc:dd:ee:ff")
