"""Time parameters of the history endpoints: what an orchestrator may send, and what it is told."""

import pytest

from vftune.api.deps import BadParameter, parse_time


@pytest.mark.parametrize("text, expected", [
    ("1795000000", 1795000000.0),
    ("1795000000.5", 1795000000.5),
    ("2026-11-21T12:00:00Z", 1795262400.0),
    ("2026-11-21T13:00:00+01:00", 1795262400.0),
])
def test_unix_seconds_and_zoned_iso8601_are_accepted(text, expected):
    assert parse_time("since", text, 0.0) == expected


def test_missing_parameter_takes_the_default():
    assert parse_time("until", None, 42.0) == 42.0


@pytest.mark.parametrize("text, why", [
    ("yesterday", "not Unix seconds or an ISO 8601 time"),
    ("2026-11-21T12:00:00", "needs a zone"),
])
def test_bad_times_name_the_parameter_never_the_value(text, why):
    with pytest.raises(BadParameter) as err:
        parse_time("since", text, 0.0)
    assert err.value.message.startswith("since: ") and why in err.value.message and text not in err.value.message
