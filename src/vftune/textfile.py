"""Reading a small text file an operator names (config, scenario) without trusting the path:
a FIFO or a device (/dev/zero) must not hang or fill memory, a huge file is refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_TEXT_BYTES = 4 * 1024 * 1024  # a config or scenario file is a few KiB


def read_bounded(path: str | os.PathLike[str], limit: int = MAX_TEXT_BYTES) -> str:
    """The file's UTF-8 text; OSError as open() raises it, ValueError (one line) when it is not a
    regular file, is over `limit` bytes or is not UTF-8."""
    fd = os.open(Path(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ValueError(f"larger than {limit // (1024 * 1024)} MiB: not a vftune file")
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
