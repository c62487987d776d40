"""A guest's /proc/stat: the CPU time its own work got, as the guest-drops reader takes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vftune.hostdriver.linux.guest_agent.stat_text import USER_HZ, StatTextError, parse_work_seconds

STAT_TEXT = (Path(__file__).parent / "fixtures" / "guest_net" / "stat").read_text()


def test_this_machines_own_file_gives_user_nice_system() -> None:
    first = STAT_TEXT.splitlines()[0].split()
    assert first[0] == "cpu"
    user, nice, system = (int(x) for x in first[1:4])
    assert parse_work_seconds(STAT_TEXT) == (user + nice + system) / USER_HZ


def test_irq_softirq_and_idle_are_not_the_guests_work() -> None:
    text = "cpu  100 20 30 9000 5 700 800 40 0 0\ncpu0 100 20 30 9000 5 700 800 40 0 0\n"
    assert parse_work_seconds(text) == 1.5


@pytest.mark.parametrize(("text", "message"), [
    ("cpu0 1 2 3 4\n", "/proc/stat: no 'cpu' line (is this /proc/stat?)"),
    ("cpu  1 2\n", "/proc/stat: line 1: 'cpu  1 2': 2 counts, expected at least 3"),
    ("intr 5\ncpu  1 -2 3 4\n", "/proc/stat: line 2: 'cpu  1 -2 3 4': '-2' is not a counter"),
    ("<html>\n", "/proc/stat: no 'cpu' line (is this /proc/stat?)"),
])
def test_errors_name_the_file_and_the_line(text: str, message: str) -> None:
    with pytest.raises(StatTextError) as caught:
        parse_work_seconds(text)
    assert str(caught.value) == message


@st.composite
def stat_files(draw: st.DrawFn) -> tuple[str, int]:
    """A /proc/stat as fs/proc/stat.c prints it (4 to 10 counts a line), and its user+nice+system ticks."""
    counts = draw(st.lists(st.integers(0, 2**63 - 1), min_size=4, max_size=10))
    cpus = draw(st.integers(1, 4))
    lines = ["cpu  " + " ".join(map(str, counts))]
    lines += [f"cpu{i} " + " ".join(map(str, counts)) for i in range(cpus)]
    lines += ["intr 1 2 3", "ctxt 9", "btime 1700000000", "processes 4", "procs_running 1"]
    return "\n".join(lines) + "\n", sum(counts[:3])


@given(stat_files())
def test_round_trip(case: tuple[str, int]) -> None:
    text, ticks = case
    assert parse_work_seconds(text) == ticks / USER_HZ


@given(st.text())
def test_garbage_raises_only_the_parsers_error(text: str) -> None:
    try:
        value = parse_work_seconds(text)
    except StatTextError as exc:
        assert "\n" not in str(exc)
    else:
        assert value >= 0
