"""Where the agent's log lines go and how they look.

On a terminal: a timestamp, the level, the logger. Under systemd (JOURNAL_STREAM names the
stderr we write to) journald stamps every line itself, so a line carries no time but starts
with its syslog priority, "<3>" .. "<7>", which journald reads as the line's priority
(sd-daemon(3)); `journalctl -p warning` then shows warnings and errors only. --log-format json
writes one JSON object per line for log shippers, under journald too. Every format escapes
control characters in messages (logsafe), so a guest name cannot forge a line or a priority.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import IO

from vftune.logsafe import EscapingFormatter, escape

# logging level -> syslog priority (sd-daemon.h: SD_ERR 3, SD_WARNING 4, SD_INFO 6, SD_DEBUG 7).
SYSLOG_PRIORITY = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}


def syslog_priority(levelno: int) -> int:
    """The syslog priority of a logging level; levels between the named ones take the lower one's."""
    for level in sorted(SYSLOG_PRIORITY, reverse=True):
        if levelno >= level:
            return SYSLOG_PRIORITY[level]
    return 7


def under_journald(stream: IO[str], environ: dict[str, str] | None = None) -> bool:
    """Whether `stream` is the journal stream systemd gave us (JOURNAL_STREAM is "DEV:INODE")."""
    value = (environ if environ is not None else dict(os.environ)).get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    if not dev.isdigit() or not ino.isdigit():
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        # Not a real file (a test's buffer): trust the variable, as sd_journal_stream_fd users do.
        return True
    return (st.st_dev, st.st_ino) == (int(dev), int(ino))


class JournalFormatter(logging.Formatter):
    """"<N>logger: message", no timestamp: journald adds both the time and the priority field."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.name}: {escape(record.getMessage())}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        prefix = f"<{syslog_priority(record.levelno)}>"
        # Every physical line gets the prefix, or journald files a traceback's lines at INFO.
        return "\n".join(prefix + line for line in text.splitlines())


class JsonFormatter(logging.Formatter):
    """One object per line: ts (Unix seconds), level, priority, logger, msg[, exc]."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, object] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "priority": syslog_priority(record.levelno),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            body["exc"] = self.formatException(record.exc_info)
        return json.dumps(body)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def formatter_for(log_format: str, stream: IO[str], environ: dict[str, str] | None = None) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    if under_journald(stream, environ):
        return JournalFormatter()
    return EscapingFormatter(TEXT_FORMAT)


def setup_logging(level: str, log_format: str = "text", stream: IO[str] | None = None) -> None:
    """Configure the root logger once for `vftune run` (replaces handlers a previous call set)."""
    out = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter_for(log_format, out))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    # --log-level is vftune's own detail; libraries (asyncio, uvicorn, httpx) speak from WARNING.
    root.setLevel(logging.WARNING)
    logging.getLogger("vftune").setLevel(level.upper())
