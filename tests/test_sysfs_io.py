"""The sysfs/procfs readers, which read with the system calls alone, give what reading the file
through a Python file object gives, whatever its bytes (hypothesis, fixed seeds)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.sysfs_io import read_optional, read_source, read_text

CONTENT = st.one_of(st.binary(max_size=512), st.sampled_from([b"", b"12\n", b"1\r\n2\r3\n", b"\xff\xfe7\n", b" 40 \n"]),
                    st.integers(0, 200_000).map(lambda n: bytes(range(256)) * (n // 256) + b"\r" * (n % 7)))


@settings(max_examples=150, derandomize=True, deadline=None)
@given(CONTENT)
def test_reads_give_what_a_file_object_gives(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "attr"
        path.write_bytes(data)
        with open(path, encoding="ascii", errors="replace") as fh:
            text = fh.read().strip()
        with open(path, "rb") as fh:
            raw = fh.read(100)
        assert read_text(path) == text
        assert read_optional(path) == text
        assert read_source(path) == data.decode("utf-8", errors="replace")
        assert read_source(path, limit=100) == raw.decode("utf-8", errors="replace")


def test_a_missing_file_or_a_directory_is_the_same_one_line_error() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for path, errno in ((Path(tmp) / "gone", 2), (Path(tmp), 21)):
            with pytest.raises(HostError, match=rf"^{path}: .* \(errno {errno}\)$"):
                read_text(path)
            with pytest.raises(HostError, match=rf"^{path}: .* \(errno {errno}\)$"):
                read_source(path)
            assert read_optional(path) is None
