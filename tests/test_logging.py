"""Log lines as journald and log shippers read them: a syslog priority per line and no
timestamp under systemd, search probes only at DEBUG, one JSON object per line on request."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess

from conftest import VFTUNE
from vftune.logsetup import JournalFormatter, formatter_for


def _run(tmp_path, *args: str, journal: bool) -> list[str]:
    """`vftune run` for a few simulated minutes; its stderr lines."""
    log = tmp_path / "agent.log"
    with log.open("w") as err:
        env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
        if journal:  # what systemd sets when stderr goes to the journal: the stream's device:inode
            st = os.fstat(err.fileno())
            env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
        subprocess.run([*VFTUNE, "run", "--sim", "paper-3vm", "--speed", "200", "--for", "3", "--db",
                        str(tmp_path / "v.db"), "--listen", "127.0.0.1:0", *args], stderr=err, env=env, timeout=120,
                       check=True)
    return log.read_text().splitlines()


def test_under_journald_each_line_has_a_priority_and_no_timestamp(tmp_path):
    lines = _run(tmp_path, "--log-level", "debug", journal=True)
    assert lines and all(re.match(r"<[2-7]>vftune[.a-z]*: ", line) for line in lines), lines[:5]
    assert not any(re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", line) for line in lines)
    probes = [line for line in lines if re.search(r"\bprobe: |\(probe \d+/\d+", line)]
    assert probes and all(line.startswith("<7>") for line in probes), "a search's probes are DEBUG detail"
    assert any(line.startswith("<6>vftune: listening on") for line in lines)


def test_at_info_the_probes_stay_out_and_a_terminal_gets_timestamps(tmp_path):
    lines = _run(tmp_path, journal=False)
    assert lines and all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ vftune", line) for line in lines)
    assert not [line for line in lines if re.search(r"\bprobe: |\(probe \d+/\d+", line)]
    assert any(re.search(r"0000:03:1\d\.\d", line) for line in lines), "VF decisions other than probes stay at INFO"


def test_json_lines(tmp_path):
    lines = _run(tmp_path, "--log-format", "json", journal=True)
    records = [json.loads(line) for line in lines]
    assert records and all({"ts", "level", "priority", "logger", "msg"} <= set(r) for r in records)
    assert any(r["msg"].startswith("listening on") and r["priority"] == 6 for r in records)


def test_a_traceback_keeps_its_priority_on_every_line():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.LogRecord("vftune", logging.ERROR, __file__, 1, "agent loop failed", (), None)
        import sys

        record.exc_info = sys.exc_info()
    text = JournalFormatter().format(record)
    assert len(text.splitlines()) > 2 and all(line.startswith("<3>") for line in text.splitlines())


def test_journal_stream_of_another_file_is_not_ours(tmp_path):
    with (tmp_path / "a").open("w") as a:
        assert isinstance(formatter_for("text", a, {"JOURNAL_STREAM": "1:2"}), logging.Formatter)
        assert not isinstance(formatter_for("text", a, {"JOURNAL_STREAM": "1:2"}), JournalFormatter)
