"""--token-file: only a regular file of the running user's, mode 0600, or a path to create; an
existing file is never replaced, whatever it is (a device node, a kernel file, a directory)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import VFTUNE
from vftune import paths

ROOT = os.geteuid() == 0


def test_a_new_path_gets_a_private_token_and_keeps_it(tmp_path):
    path = tmp_path / "token"
    token = paths.ensure_token(path)
    assert len(token) == 64 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert paths.ensure_token(path) == token


def test_an_empty_file_gets_a_token_written_in_place_not_replaced(tmp_path):
    path = tmp_path / "token"
    path.touch(mode=0o600)
    inode = path.stat().st_ino
    token = paths.ensure_token(path)
    assert path.read_text().strip() == token and path.stat().st_ino == inode


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_token_others_can_read_is_refused_at_every_start(tmp_path, mode):
    path = tmp_path / "token"
    paths.ensure_token(path)
    path.chmod(mode)
    with pytest.raises(paths.TokenFileError, match=f"mode {mode:04o}"):
        paths.ensure_token(path)


def test_symlinks_directories_fifos_and_kernel_files_are_refused(tmp_path):
    target = tmp_path / "real"
    paths.ensure_token(target)
    (tmp_path / "link").symlink_to(target)
    os.mkfifo(tmp_path / "fifo", 0o600)
    for path, why in ((tmp_path / "link", "symbolic link"), (tmp_path, "directory"), (Path("/"), "directory"),
                      (tmp_path / "fifo", "not a regular file"), (Path("/proc/version"), "kernel file"),
                      (Path("/dev/null"), "not a regular file")):
        with pytest.raises(paths.TokenFileError, match=why):
            paths.ensure_token(path)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not ROOT, reason="chown to another user needs root")
def test_a_file_of_another_user_is_refused(tmp_path):
    path = tmp_path / "token"
    paths.ensure_token(path)
    os.chown(path, 65534, 65534)
    with pytest.raises(paths.TokenFileError, match="owned by uid 65534"):
        paths.ensure_token(path)


@pytest.mark.skipif(not ROOT, reason="mknod needs root")
def test_run_refuses_a_device_node_and_leaves_it_a_device(tmp_path):
    node = tmp_path / "fakenull"
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    out = subprocess.run([*VFTUNE, "run", "--sim", "paper-1vm", "--for", "1", "--db", str(tmp_path / "t.db"),
                          "--listen", "127.0.0.1:0", "--token-file", str(node)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "not a regular file" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert stat.S_ISCHR(node.stat().st_mode)


def test_read_token_never_blocks_on_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "fifo", 0o600)
    assert paths.read_token(tmp_path / "fifo") is None
