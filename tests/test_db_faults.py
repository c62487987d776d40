"""Faults of the history file itself leave no host file mis-set (docs/reliability.md's matrix).

Each test runs the agent as `vftune run` does on the fixture host tree (tests/fixtures/
agent_on_tree.py: a patched PF, a stock PF, net.core.netdev_budget), lets it write, then breaks
the database the way an operator's host can: another process holding SQLite's write lock at
SIGTERM, a full file system at SIGTERM, a read-only file system after kill -9, a second agent
or `vftune restore` on the same file, restore pointed at the wrong roots, the journal lost.
The disk cases mount a small tmpfs and need root; they are skipped with that reason otherwise.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from linux_host import host_files, make_tree

from conftest import VFTUNE
from test_crash_restore import NO_CONTRACT_S, STARTED, UNIT_STOP_TIMEOUT_S, TreeAgent, _written, changed

pytest.importorskip("libvirt")
ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True)
def _no_agent_left_behind() -> Iterator[None]:
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def restore(db: Path, root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VFTUNE, "restore", "--db", str(db), "--sysfs-root", str(root / "sys"),
                           "--procfs-root", str(root / "proc"), "--libvirt-uri", "none", *extra],
                          capture_output=True, text=True, timeout=NO_CONTRACT_S)


def tuned(tmp_path: Path, db: Path, log: str = "agent.log") -> tuple[Path, dict[str, str], TreeAgent]:
    root = tmp_path / "host"
    if not root.exists():
        make_tree(root)
    pristine = host_files(root)
    agent = TreeAgent(root, db, tmp_path / log)
    agent.wait(lambda: _written(pristine, root), "ITRs and PF settings written")
    return root, pristine, agent


def journal_rows(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM journal").fetchone()[0])
    finally:
        con.close()


def test_sigterm_with_the_database_locked_by_another_process_restores_and_exits(tmp_path):
    db = tmp_path / "vftune.db"
    root, pristine, agent = tuned(tmp_path, db)
    holder = sqlite3.connect(db, isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")  # SQLite's write lock, as a backup tool or sqlite3 shell holds it
    try:
        agent.proc.terminate()
        rc = agent.proc.wait(UNIT_STOP_TIMEOUT_S)  # raises past the unit's stop timeout
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert changed(pristine, root) == set(), "every host file back although the journal could not be written"
    log = (tmp_path / "agent.log").read_text()
    assert rc == 1 and "still in the write journal" in log, log[-2000:]
    # The kept entries are originals: a restore writes them again and now forgets them.
    out = restore(db, root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert journal_rows(db) == 0 and changed(pristine, root) == set()


@pytest.mark.skipif(not ROOT, reason="mounts a small tmpfs to fill: needs root")
def test_sigterm_on_a_full_disk_restores_and_exits(tmp_path):
    with tmpfs(tmp_path / "disk") as disk:
        db = disk / "vftune.db"
        root, pristine, agent = tuned(tmp_path, db)
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as fh:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        agent.proc.terminate()
        rc = agent.proc.wait(UNIT_STOP_TIMEOUT_S)
        assert changed(pristine, root) == set(), "every host file back on a full disk"
        assert rc in (0, 1), (tmp_path / "agent.log").read_text()[-2000:]
        (disk / "filler").unlink()
        out = restore(db, root)
        assert out.returncode == 0, out.stdout + out.stderr
        assert journal_rows(db) == 0


@pytest.mark.skipif(not ROOT, reason="remounts a tmpfs read-only: needs root")
def test_read_only_database_after_kill_9_still_restores(tmp_path):
    with tmpfs(tmp_path / "disk") as disk:
        db = disk / "vftune.db"
        root, pristine, agent = tuned(tmp_path, db)
        agent.proc.kill()
        agent.proc.wait(NO_CONTRACT_S)
        left = changed(pristine, root)
        assert left
        set_values = {k: v for k, v in host_files(root).items() if k in left}
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        out = restore(db, root)
        assert changed(pristine, root) == set(), out.stdout + out.stderr
        assert out.returncode == 1 and "not forgotten" in out.stderr, out.stdout + out.stderr
        # The agent cannot run on it, but puts the host back before it says so (the files set
        # again as the crashed run left them: the kept entries still hold their originals).
        for name, value in set_values.items():
            (root / name).write_text(value)
        assert changed(pristine, root) == left
        again = TreeAgent(root, db, tmp_path / "agent2.log")
        rc = again.proc.wait(NO_CONTRACT_S)
        text = (tmp_path / "agent2.log").read_text()
        assert rc == 2 and "read-only journal" in text, text[-2000:]
        assert changed(pristine, root) == set()
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
        out = restore(db, root)
        assert out.returncode == 0 and journal_rows(db) == 0, out.stdout + out.stderr


def test_a_second_agent_or_restore_on_the_same_database_refuses_naming_the_holder(tmp_path):
    db = tmp_path / "vftune.db"
    root, pristine, agent = tuned(tmp_path, db)
    second = TreeAgent(root, db, tmp_path / "second.log")
    assert second.proc.wait(NO_CONTRACT_S) == 1
    text = (tmp_path / "second.log").read_text().strip()
    assert f"held by pid {agent.proc.pid}" in text and len(text.splitlines()) == 1, text
    out = restore(db, root)
    assert out.returncode == 1 and f"held by pid {agent.proc.pid}" in out.stderr, out.stderr
    assert journal_rows(db) > 0, "nothing of the running agent's journal was touched"
    agent.proc.kill()  # the lock dies with its holder: the next start restores
    agent.proc.wait(NO_CONTRACT_S)
    third = TreeAgent(root, db, tmp_path / "third.log")
    third.wait(lambda: third.ticks() >= 2, "two ticks")
    third.proc.terminate()
    assert third.proc.wait(UNIT_STOP_TIMEOUT_S) == 0
    assert changed(pristine, root) == set()


def test_restore_at_the_wrong_roots_keeps_every_entry(tmp_path):
    db = tmp_path / "vftune.db"
    root, pristine, agent = tuned(tmp_path, db)
    agent.proc.kill()
    agent.proc.wait(NO_CONTRACT_S)
    entries = journal_rows(db)
    empty = tmp_path / "empty"
    (empty / "sys").mkdir(parents=True)
    (empty / "proc").mkdir()
    out = restore(db, empty)
    assert out.returncode == 1 and "wrong roots?" in out.stderr, out.stdout + out.stderr
    assert journal_rows(db) == entries, "no entry dropped at the wrong roots"
    out = restore(db, root)
    assert out.returncode == 0, out.stdout + out.stderr
    assert changed(pristine, root) == set() and journal_rows(db) == 0


def test_restore_forget_missing_drops_entries_whose_device_is_gone(tmp_path):
    db = tmp_path / "vftune.db"
    root, pristine, agent = tuned(tmp_path, db)
    agent.proc.kill()
    agent.proc.wait(NO_CONTRACT_S)
    empty = tmp_path / "empty"
    (empty / "sys").mkdir(parents=True)
    (empty / "proc").mkdir()
    out = restore(db, empty, "--forget-missing")
    assert out.returncode == 0 and journal_rows(db) == 0, out.stdout + out.stderr
    assert changed(pristine, root), "nothing written at the empty roots: the real host stays as it was left"


def _lose_journal(db: Path, how: str) -> None:
    wal = db.with_name(db.name + "-wal")
    if how == "delete":
        for p in (db, wal, db.with_name(db.name + "-shm")):
            p.unlink(missing_ok=True)
    elif how == "delete-wal":
        wal.unlink()
        db.with_name(db.name + "-shm").unlink(missing_ok=True)
    elif how == "truncate-db":
        for p in (wal, db.with_name(db.name + "-shm")):
            p.unlink(missing_ok=True)
        db.write_bytes(b"")
    elif how == "garble-wal":
        data = bytearray(wal.read_bytes())
        data[32:96] = os.urandom(64)  # the WAL header's salts and checksums: SQLite ignores every frame
        wal.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["delete", "delete-wal", "truncate-db", "garble-wal"])
def test_a_lost_journal_is_said_loudly_and_never_taken_for_originals(tmp_path, how):
    db = tmp_path / "vftune.db"
    root, pristine, agent = tuned(tmp_path, db)
    agent.proc.kill()
    agent.proc.wait(NO_CONTRACT_S)
    left = changed(pristine, root)
    set_values = {k: v for k, v in host_files(root).items() if k in left}
    _lose_journal(db, how)
    again = TreeAgent(root, db, tmp_path / "again.log")
    again.wait(lambda: again.ticks() >= 2, "two ticks")
    text = (tmp_path / "again.log").read_text()
    assert "ERROR" in text and "lost" in text and "--accept-current" in text, text[-3000:]
    again.proc.terminate()
    again.proc.wait(UNIT_STOP_TIMEOUT_S)
    # What the crashed run set is not recorded as the host's original, nor changed blindly.
    con = sqlite3.connect(db)
    journaled = {r[0] for r in con.execute("SELECT target FROM journal")}
    con.close()
    assert not any(str(root / k) in journaled for k in left)
    assert {k: v for k, v in host_files(root).items() if k in left} == set_values
    out = restore(db, root)
    assert out.returncode == 1 and "--accept-current" in out.stderr, out.stdout + out.stderr
    out = restore(db, root, "--accept-current")
    assert out.returncode == 0, out.stdout + out.stderr
    assert not Path(f"{db}.unrestored").exists()


def test_a_clean_stop_removes_the_marker(tmp_path):
    db = tmp_path / "vftune.db"
    root, pristine, agent = tuned(tmp_path, db)
    assert Path(f"{db}.unrestored").exists(), "a run with writes outstanding is marked outside the database"
    agent.proc.terminate()
    assert agent.proc.wait(UNIT_STOP_TIMEOUT_S) == 0
    assert not Path(f"{db}.unrestored").exists()
    assert changed(pristine, root) == set()
