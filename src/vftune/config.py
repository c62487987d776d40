"""RunConfig: every option of `vftune run` in one typed, frozen place.

The CLI builds one from its options and hands it to the run; anything that adds a run option
(a config file, a new flag) adds a field here. validate() finds everything that can be wrong
with the values before anything is created, one line per problem, naming the option and value.
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass, field

from vftune import paths
from vftune.itr import MAX_RX_USECS

DEFAULT_LISTEN = "127.0.0.1:8740"
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
GUEST_AGENT_MODES = ("auto", "on", "off")  # hostdriver/linux/guest_wiring.py says what each does
GUEST_RX_DROPS_MODES = ("auto", "off")  # hostdriver/linux/guest_agent/socket_drops.py
# Where guests come from: libvirt, the QEMU processes' command lines (hostdriver/linux/qemu_guests.py),
# or libvirt where it answers, else the processes.
GUEST_SOURCES = ("auto", "libvirt", "qemu")

# Numeric options: field -> (option, low, high, low excluded). The CLI's types and validate()
# both use these, so a config file gets the same one-line answers as a flag.
LIMITS: dict[str, tuple[str, float, float, bool]] = {
    "speed": ("--speed", 0.01, 10_000.0, False),  # slower than 1/100 overflows the sleeps' timeouts
    "seed": ("--seed", 0, 2**32 - 1, False),
    "interval": ("--interval", 0.01, 3600.0, False),
    "run_for": ("--for", 0.0, 10 * 365 * 86400.0, True),
    "retention_h": ("--retention", 0.0, 24 * 365.0, True),
    "rollup_days": ("--rollup-days", 0.0, 3650.0, False),
    "max_db_mb": ("--max-db-mb", 16.0, 10_000_000.0, False),
    "keep_warm_s": ("--keep-warm", 0.0, 3600.0, False),
}


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def family(self) -> int:
        return socket.AF_INET6 if ":" in self.host else socket.AF_INET


def parse_listen(value: str, option: str = "--listen") -> Listen:
    """HOST:PORT or [IPv6]:PORT; raises ValueError with the one-line reason."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{option} {value!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"{option} {value!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{option} {value!r}: port {port} is outside 0..65535")
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICSERV)
    except socket.gaierror:
        raise ValueError(f"{option} {value!r}: cannot resolve host {host!r}") from None
    return Listen(host, port)


@dataclass(frozen=True)
class RunConfig:
    # Where the agent runs: a simulated scenario, or this host's sysfs/procfs and libvirt.
    sim: str | None = None  # scenario name; None = the linux backend
    speed: float = 1.0  # simulated seconds per wall second (sim only)
    seed: int = 0  # simulator seed
    sysfs_root: str = "/sys"
    procfs_root: str = "/proc"
    libvirt_uri: str = "qemu:///system"  # "none": no libvirt
    guest_source: str = "auto"  # GUEST_SOURCES: libvirt, QEMU processes, or libvirt where it answers
    # Set VFs' ITR inside their guests (ethtool through the QEMU guest agent): auto where the
    # patched PF cannot, on for every guest-held VF, off never.
    guest_agent: str = "auto"
    guest_agent_sockets: str | None = None  # DIR of <guest>.sock agent sockets instead of libvirt
    # Read VF-owning guests' socket receive drops (UDP RcvbufErrors) through their agents: auto
    # where an agent answers and allows guest-file-*, off never.
    guest_rx_drops: str = "auto"
    # What it does.
    policy: str = "search"  # per-VF ITR policy spec (agent/policies.py)
    pf_mode: str = "hybrid"  # per-PF rx mode controller spec
    interval: float = 0.25  # seconds of host time per tick (the PF's ethtool statistics may be read this often)
    # Longest interval (rx-usecs) a VF's own adaptive ITR may pick, for every VF; None = no bound.
    # The config file's per-VF max_interval_us rules will feed the same AgentConfig field.
    max_interval_us: int | None = None
    # After an ITR change, the rate in force is written again every few seconds for this long, so
    # a patched VF keeps fetching every 250 ms and its next change lands at once; 0 = off.
    keep_warm_s: float = 60.0
    run_for: float | None = None  # wall seconds until a clean stop; None = until a signal
    # Where it keeps and serves what it does.
    db: str = field(default_factory=paths.default_db)  # SQLite history file (and write journal)
    retention_h: float = 24.0  # hours of raw per-tick samples to keep
    rollup_days: float = 30.0  # days of 1-minute samples, events and decisions to keep
    max_db_mb: float = 1900.0  # history file cap (< 2 GB); the oldest rows go first beyond it
    listen: str = DEFAULT_LISTEN  # API address HOST:PORT
    # A second listener serving only /metrics and /healthz, without the token (fleet scrapers).
    metrics_listen: str | None = None
    token_file: str | None = None  # default: `token` beside the history file
    log_level: str = "info"
    log_format: str = "text"  # "json": one JSON object per line
    config: str | None = None  # the config file these values were read with (rules come from it too)

    @property
    def libvirt(self) -> str | None:
        return None if self.libvirt_uri == "none" else self.libvirt_uri

    @property
    def detail(self) -> str:
        """What the agent runs on, in one line (the API's /v1/host and the run records)."""
        return f"scenario={self.sim} seed={self.seed} speed={self.speed}" if self.sim else f"sysfs={self.sysfs_root}"

    def address(self) -> Listen:
        return parse_listen(self.listen)

    def metrics_address(self) -> Listen | None:
        return None if self.metrics_listen is None else parse_listen(self.metrics_listen, "--metrics-listen")

    @property
    def token_path(self) -> str:
        return str(paths.token_path(self.db, self.token_file))

    def validate(self, scenarios: tuple[str, ...] | list[str]) -> None:
        """Raise ValueError naming the first option whose value cannot work."""
        self.address()
        self.metrics_address()
        if self.sim is not None and self.sim not in scenarios:
            raise ValueError(f"--sim {self.sim!r}: unknown scenario; `vftune sim list` shows the "
                             f"{len(scenarios)} there are")
        for name, (option, low, high, low_open) in LIMITS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if not math.isfinite(value):
                raise ValueError(f"{option} {value}: not a finite number")
            if (value <= low if low_open else value < low) or value > high:
                raise ValueError(f"{option} {value:g}: must be {'>' if low_open else '>='} {low:g} and <= {high:g}")
        if self.sim is None:
            for option, root in (("--sysfs-root", self.sysfs_root), ("--procfs-root", self.procfs_root)):
                if not os.path.isdir(root):
                    raise ValueError(f"{option} {root}: not a directory")
            if not os.path.isdir(os.path.join(self.sysfs_root, "class", "net")):
                raise ValueError(f"--sysfs-root {self.sysfs_root}: no class/net in it: not a sysfs tree")
        if self.guest_source not in GUEST_SOURCES:
            raise ValueError(f"--guest-source {self.guest_source!r}: choose from {', '.join(GUEST_SOURCES)}")
        if self.guest_agent not in GUEST_AGENT_MODES:
            raise ValueError(f"--guest-agent {self.guest_agent!r}: choose from {', '.join(GUEST_AGENT_MODES)}")
        if self.guest_rx_drops not in GUEST_RX_DROPS_MODES:
            raise ValueError(f"--guest-rx-drops {self.guest_rx_drops!r}: choose from {', '.join(GUEST_RX_DROPS_MODES)}")
        if self.max_interval_us is not None and not 2 <= self.max_interval_us <= MAX_RX_USECS:
            raise ValueError(f"--max-interval-us {self.max_interval_us}: must be 2..{MAX_RX_USECS} (rx-usecs)")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"--log-level {self.log_level!r}: choose from {', '.join(LOG_LEVELS)}")
        if self.log_format not in LOG_FORMATS:
            raise ValueError(f"--log-format {self.log_format!r}: choose from {', '.join(LOG_FORMATS)}")
