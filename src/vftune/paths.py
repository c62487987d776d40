"""Where vftune keeps its state, and the API token beside it.

The state directory is systemd's $STATE_DIRECTORY when set, /var/lib/vftune for root, and
~/.local/state/vftune for anyone else (a first try without root). The history file and the
token live there unless --db names another file; then the token sits beside that file.
No dependencies: `vftune hook` imports this under libvirt and must start fast.
"""

from __future__ import annotations

import os
import secrets
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


def ensure_token(path: Path) -> str:
    """The token in `path`, created 0600 with 32 random bytes (hex) at first start."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_token(path) or _replace_empty(path)
    token = secrets.token_hex(32)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


def _replace_empty(path: Path) -> str:
    # An empty token file (a crash between create and write) would accept an empty bearer.
    tmp = path.with_name(path.name + ".new")
    tmp.unlink(missing_ok=True)
    token = secrets.token_hex(32)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.replace(tmp, path)
    return token


def read_token(path: Path) -> str | None:
    """The token, or None when the file is missing, unreadable or empty."""
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return text or None


def make_private_dir(path: Path) -> None:
    """Create a state directory 0700; an existing directory is left as the operator made it."""
    if not path.exists():
        path.mkdir(mode=0o700, parents=True)
