"""Bad input to `vftune run`: one line naming the problem and the value, exit 2, nothing written."""

from __future__ import annotations

import socket
import subprocess

import pytest

from conftest import VFTUNE


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*VFTUNE, "run", *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.mark.parametrize("args, needle", [
    (["--sim", "no-such-scenario"], "'no-such-scenario': unknown scenario"),
    (["--sim", "--listen", "localhost"], "--listen 'localhost': expected HOST:PORT"),
    (["--sim", "--listen", "127.0.0.1:http"], "port 'http' is not a number"),
    (["--sim", "--listen", "127.0.0.1:70000"], "port 70000 is outside 0..65535"),
    (["--sim", "--policy", "fixed:fast"], "--policy fixed:fast"),
    (["--sim", "--policy", "magic"], "--policy magic: unknown"),
    (["--sim", "--speed", "0"], "vftune run: Invalid value for '--speed': 0 is out of range: must be >= 0.01"),
    (["--sim", "--speed", "nan"], "'--speed': nan is not a finite number"),
    (["--sim", "--speed", "inf"], "'--speed': inf is not a finite number"),
    (["--sim", "--seed", "-1"], "'--seed': -1 is out of range: must be >= 0"),
    (["--sim", "--interval", "nan"], "'--interval': nan is not a finite number"),
    (["--sim", "--interval", "1e-9"], "'--interval': 1e-09 is out of range: must be >= 0.01"),
    (["--sim", "--retention", "nan"], "'--retention': nan is not a finite number"),
    (["--sim", "--retention", "-1"], "'--retention': -1 is out of range: must be > 0"),
    (["--sim", "--max-db-mb", "1e999"], "'--max-db-mb': inf is not a finite number"),
    (["--sim", "--keep-warm", "-1"], "'--keep-warm': -1 is out of range: must be >= 0"),
    (["--sim", "--guest-rx-drops", "sometimes"], "'--guest-rx-drops': 'sometimes' is not one of 'auto', 'off'"),
    (["--sysfs-root", "/nonexistent", "--libvirt-uri", "none"], "--sysfs-root /nonexistent: not a directory"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, args, needle):
    out = run(*args, "--db", str(tmp_path / "x.db"), "--for", "1")
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert not (tmp_path / "x.db").exists(), "nothing written for bad input"


def test_unwritable_db_exits_2_naming_the_path(tmp_path):
    db = tmp_path / "nope" / "h.db"
    out = run("--sim", "--db", str(db), "--for", "1", "--listen", "127.0.0.1:0")
    assert out.returncode == 2
    assert str(db) in out.stderr and "does not exist" in out.stderr
    assert "Traceback" not in out.stderr


def test_port_in_use_is_said(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        out = run("--sim", "--db", str(tmp_path / "h.db"), "--for", "1", "--listen", f"127.0.0.1:{port}")
    finally:
        holder.close()
    assert out.returncode == 1
    assert f"127.0.0.1:{port}: port already in use" in out.stderr
    assert not (tmp_path / "h.db").exists()
