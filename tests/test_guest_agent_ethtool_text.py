"""The guest's `ethtool -c` text: real outputs parse, arbitrary text never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vftune.hostdriver.linux.guest_agent.ethtool_text import (
    Coalesce,
    Unparsable,
    parse_coalesce,
    restore_args,
    set_args,
)

# ethtool 6.1 on a virtio_net interface (captured on this machine): an adaptive flag, off.
VIRTIO = """Coalesce parameters for eth0:
Adaptive RX: off  TX: n/a
stats-block-usecs: n/a
sample-interval: n/a
pkt-rate-low: n/a
pkt-rate-high: n/a

rx-usecs: 0
rx-frames: 1
rx-usecs-irq: n/a
rx-frames-irq: n/a

tx-usecs: 0
tx-frames: 1
tx-usecs-irq: n/a
tx-frames-irq: n/a

rx-usecs-low: n/a
rx-frame-low: n/a
tx-usecs-low: n/a
tx-frame-low: n/a

rx-usecs-high: n/a
rx-frame-high: n/a
tx-usecs-high: n/a
tx-frame-high: n/a

CQE mode RX: n/a  TX: n/a
"""

# The same layout as ixgbevf answers it: usecs only, adaptive is rx-usecs 1 and the flag is n/a.
IXGBEVF = VIRTIO.replace("Adaptive RX: off", "Adaptive RX: n/a").replace("rx-usecs: 0", "rx-usecs: 1") \
    .replace("rx-frames: 1", "rx-frames: n/a")


def test_real_layouts_parse() -> None:
    assert parse_coalesce(VIRTIO) == Coalesce(0, False)
    assert parse_coalesce(IXGBEVF) == Coalesce(1, None)
    assert parse_coalesce(IXGBEVF).effective_rx_usecs == 1  # type: ignore[union-attr]
    assert parse_coalesce(VIRTIO.replace("Adaptive RX: off", "Adaptive RX: on")).effective_rx_usecs == 1  # type: ignore[union-attr]


def test_unreadable_outputs_say_why() -> None:
    assert parse_coalesce("netlink error: Operation not supported\n") == Unparsable(
        "no rx-usecs line in ethtool -c output: 'netlink error: Operation not supported'")
    assert parse_coalesce(IXGBEVF.replace("rx-usecs: 1", "rx-usecs: n/a")) == Unparsable(
        "the guest's driver reports rx-usecs n/a: it has no interrupt moderation to set")
    assert parse_coalesce("rx-usecs: 12a\n") == Unparsable("rx-usecs '12a' is not a number 0..4294967295")
    assert parse_coalesce("rx-usecs: 4294967296\n") == Unparsable(
        "rx-usecs '4294967296' is not a number 0..4294967295")
    assert parse_coalesce("rx-usecs: 3\nrx-usecs: 4\n") == Unparsable("2 rx-usecs lines in ethtool -c output")
    assert parse_coalesce("Adaptive RX: maybe  TX: off\nrx-usecs: 3\n") == Unparsable(
        "Adaptive RX 'maybe' is not on, off or n/a")
    # Non-ASCII digits are digits to str.isdigit, not to the driver.
    assert isinstance(parse_coalesce("rx-usecs: \u0661\u0662\n"), Unparsable)


def test_write_arguments_follow_the_driver() -> None:
    vf = Coalesce(1, None)  # ixgbevf, adaptive
    assert set_args("eth1", vf, 48) == ["-C", "eth1", "rx-usecs", "48"]
    assert set_args("eth1", vf, 1) is None
    flag = Coalesce(0, True)  # a driver with an adaptive flag, on
    assert set_args("eth1", flag, 48) == ["-C", "eth1", "adaptive-rx", "off", "rx-usecs", "48"]
    assert set_args("eth1", flag, 1) is None
    assert set_args("eth1", Coalesce(48, False), 1) == ["-C", "eth1", "adaptive-rx", "on"]
    assert restore_args("eth1", Coalesce(20, False), flag) == ["-C", "eth1", "adaptive-rx", "on", "rx-usecs", "0"]
    assert restore_args("eth1", Coalesce(48, None), vf) == ["-C", "eth1", "rx-usecs", "1"]
    assert restore_args("eth1", vf, vf) is None


lines = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["rx-usecs:", "rx-usecs: ", "Adaptive RX:", "rx-usecs-irq: 5", "rx-usecs: n/a"]).flatmap(
        lambda head: st.text(max_size=12).map(lambda tail: head + tail)),
)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(lines, max_size=30))
def test_parser_never_raises(parts: list[str]) -> None:
    got = parse_coalesce("\n".join(parts))
    assert isinstance(got, (Coalesce, Unparsable))
    if isinstance(got, Coalesce):
        assert 0 <= got.rx_usecs <= 0xFFFF_FFFF
    else:
        assert got.reason and "\n" not in got.reason


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.integers(0, 0xFFFF_FFFF), st.sampled_from([None, True, False]))
def test_rendered_output_parses_back(usecs: int, adaptive: bool | None) -> None:
    flag = {None: "n/a", True: "on", False: "off"}[adaptive]
    text = VIRTIO.replace("Adaptive RX: off", f"Adaptive RX: {flag}").replace("rx-usecs: 0", f"rx-usecs: {usecs}")
    assert parse_coalesce(text) == Coalesce(usecs, adaptive)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner,
                                                                                        max_size=3), max_leaves=8)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.one_of(json_values, st.fixed_dictionaries({"rx_usecs": json_values, "adaptive_rx": json_values})))
def test_journal_entries_never_raise(obj: object) -> None:
    assert isinstance(Coalesce.from_dict(obj), (Coalesce, Unparsable))


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.integers(0, 0xFFFF_FFFF), st.sampled_from([None, True, False]))
def test_journal_round_trip(usecs: int, adaptive: bool | None) -> None:
    c = Coalesce(usecs, adaptive)
    assert Coalesce.from_dict(c.as_dict()) == c


def test_odd_journal_entries_say_why() -> None:
    assert Coalesce.from_dict({"rx_usecs": True, "adaptive_rx": None}) == Unparsable(
        "journal rx_usecs True is not a number 0..4294967295")
    assert Coalesce.from_dict({"rx_usecs": 3, "adaptive_rx": "on"}) == Unparsable(
        "journal adaptive_rx 'on' is not true, false or null")
    assert Coalesce.from_dict([1]) == Unparsable("journal entry is list, not an object")
