"""Where vftune keeps its state, and the API token beside it.

The state directory is systemd's $STATE_DIRECTORY when set, /var/lib/vftune for root, and
~/.local/state/vftune for anyone else (a first try without root). The history file and the
token live there unless --db names another file; then the token sits beside that file.
No dependencies: `vftune hook` imports this under libvirt and must start fast.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

TOKEN_NAME = "token"
DB_NAME = "vftune.db"


def state_dir() -> Path:
    systemd = os.environ.get("STATE_DIRECTORY", "").split(":")[0]
    if systemd:
        return Path(systemd)
    if os.geteuid() == 0:
        return Path("/var/lib/vftune")
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "vftune"


def default_db() -> str:
    return str(state_dir() / DB_NAME)


def token_path(db: str | os.PathLike[str] | None = None, token_file: str | os.PathLike[str] | None = None) -> Path:
    """--token-file if given, else `token` beside the history file, else in the state directory."""
    if token_file:
        return Path(token_file)
    if db:
        return Path(db).parent / TOKEN_NAME
    return state_dir() / TOKEN_NAME


TOKEN_MAX_BYTES = 4096  # a token file is 65 bytes; anything longer is not one
# Pseudo-file systems: their "regular files" (/proc/version) are the kernel's, never a token.
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")


class TokenFileError(ValueError):
    """The token file cannot be used as one; the message names the path and why."""


def _check_token_stat(path: Path, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise TokenFileError(f"--token-file {path}: is a symbolic link: give the file itself")
    if stat.S_ISDIR(st.st_mode):
        raise TokenFileError(f"--token-file {path}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise TokenFileError(f"--token-file {path}: not a regular file (a device, FIFO or socket)")
    real = os.path.realpath(path)
    if any(real == root or real.startswith(root + "/") for root in PSEUDO_ROOTS):
        raise TokenFileError(f"--token-file {path}: a kernel file ({real}), not a token file of your own")
    if st.st_uid != os.geteuid():
        raise TokenFileError(f"--token-file {path}: owned by uid {st.st_uid}, not by this user ({os.geteuid()})")
    if st.st_mode & 0o077:
        raise TokenFileError(f"--token-file {path}: mode {stat.S_IMODE(st.st_mode):04o} lets others read it: "
                             "chmod 600 it, or remove it for a new token")


def ensure_token(path: Path) -> str:
    """The token in `path`, created 0600 with 32 random bytes (hex) at first start.

    An existing file must be a regular file of this user's, mode 0600 (checked at every start):
    it is never replaced, and an empty one (a crash between create and write) gets a token
    written in place. Raises TokenFileError with the one-line reason."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return _existing_token(path)
    except IsADirectoryError:
        raise TokenFileError(f"--token-file {path}: is a directory") from None
    except OSError as exc:
        raise TokenFileError(f"--token-file {path}: cannot create: {exc.strerror}") from None
    return _write_token(fd)


def _write_token(fd: int) -> str:
    token = secrets.token_hex(32)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return token


def _existing_token(path: Path) -> str:
    try:
        before = os.lstat(path)
    except OSError as exc:
        raise TokenFileError(f"--token-file {path}: {exc.strerror}") from None
    _check_token_stat(path, before)  # before opening: opening a device node can act on it
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TokenFileError(f"--token-file {path}: cannot open: {exc.strerror}") from None
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise TokenFileError(f"--token-file {path}: replaced while being opened")
        data = os.read(fd, TOKEN_MAX_BYTES + 1)
        if len(data) > TOKEN_MAX_BYTES:
            raise TokenFileError(f"--token-file {path}: longer than {TOKEN_MAX_BYTES} bytes: not a token file")
    except BaseException:
        os.close(fd)
        raise
    text = data.decode("ascii", errors="replace").strip()
    if text:
        os.close(fd)
        return text
    return _write_token(fd)


def read_token(path: Path) -> str | None:
    """The token, or None when the file is missing, unreadable, empty or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, TOKEN_MAX_BYTES).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return text or None


def make_private_dir(path: Path) -> None:
    """Create a state directory 0700; an existing directory is left as the operator made it."""
    if not path.exists():
        path.mkdir(mode=0o700, parents=True)
