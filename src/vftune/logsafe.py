"""Log lines that cannot be forged: control characters in a message (a guest name with a
newline, a file name with an escape sequence) are written escaped, as \\n or \\x1b."""

from __future__ import annotations

import logging
import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape(text: str) -> str:
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class EscapingFormatter(logging.Formatter):
    """Escapes the message (its arguments included); a traceback keeps its own newlines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape(record.message)
        return super().formatMessage(record)


def setup(level: str, fmt: str = "%(asctime)s %(levelname)s %(name)s: %(message)s") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(EscapingFormatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
