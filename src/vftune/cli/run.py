"""`vftune run`: the agent, its API server, and a clean stop that restores every port."""

from __future__ import annotations

import errno
import logging
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from typing import Any

import click

from vftune.cli.common import fail

DEFAULT_LISTEN = "127.0.0.1:8740"
DEFAULT_SCENARIO = "mixed-host"
log = logging.getLogger("vftune")


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def family(self) -> int:
        return socket.AF_INET6 if ":" in self.host else socket.AF_INET


def parse_listen(value: str) -> Listen:
    """HOST:PORT or [IPv6]:PORT; raises ValueError with the one-line reason."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"--listen {value!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--listen {value!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"--listen {value!r}: port {port} is outside 0..65535")
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICSERV)
    except socket.gaierror:
        raise ValueError(f"--listen {value!r}: cannot resolve host {host!r}") from None
    return Listen(host, port)


def bind(listen: Listen) -> socket.socket:
    sock = socket.socket(listen.family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((listen.host, listen.port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            fail(f"--listen {listen.host}:{listen.port}: port already in use (is another vftune running?)", 1)
        fail(f"--listen {listen.host}:{listen.port}: cannot bind: {exc.strerror}", 2)
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _open_host(sim: str | None, seed: int, speed: float, sysfs_root: str, procfs_root: str,
               libvirt_uri: str | None) -> Any:
    if sim is not None:
        from vftune.sim.host import SimHost

        return SimHost(sim, seed=seed, speed=speed)
    from vftune.hostdriver.linux.host import LinuxHost

    return LinuxHost(sysfs_root=sysfs_root, procfs_root=procfs_root, libvirt_uri=libvirt_uri)


@click.command("run")
@click.option("--sim", "sim", is_flag=False, flag_value=DEFAULT_SCENARIO, default=None, metavar="[SCENARIO]",
              help=f"Run on the simulated host (scenario default: {DEFAULT_SCENARIO}; see `vftune sim list`).")
@click.option("--scenario-file", "scenario_files", multiple=True, metavar="PATH",
              help="Run on the simulated host described by this TOML file (docs/scenarios.md).")
@click.option("--speed", type=float, default=1.0, show_default=True,
              help="Simulated seconds per wall second (sim only).")
@click.option("--seed", type=int, default=0, show_default=True, help="Simulator seed.")
@click.option("--for", "run_for", type=float, default=None, metavar="SECONDS",
              help="Stop cleanly after this many wall seconds (default: until SIGINT/SIGTERM).")
@click.option("--db", default="vftune.db", show_default=True, help="SQLite history file.")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True, help="API address HOST:PORT.")
@click.option("--interval", type=float, default=1.0, show_default=True, help="Seconds of host time per tick.")
@click.option("--policy", default="search", show_default=True,
              help="Per-VF ITR policy: search, fixed:RATE, observe.")
@click.option("--pf-mode", default="hybrid", show_default=True,
              help="Per-PF rx mode controller: hybrid, hybrid:CLIFF_PPS, stock.")
@click.option("--retention", type=float, default=24.0, show_default=True, help="Hours of samples to keep.")
@click.option("--sysfs-root", default="/sys", show_default=True, help="Where sysfs is mounted (linux backend).")
@click.option("--procfs-root", default="/proc", show_default=True, help="Where procfs is mounted (linux backend).")
@click.option("--libvirt-uri", default="qemu:///system", show_default=True,
              help="libvirt connection for guest ownership (linux backend); 'none' to skip.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
def command(sim: str | None, scenario_files: tuple[str, ...], speed: float, seed: int, run_for: float | None, db: str, listen: str,
            interval: float, policy: str, pf_mode: str, retention: float, sysfs_root: str,
            procfs_root: str, libvirt_uri: str, log_level: str) -> None:
    """Run the agent and its API until stopped; every value it wrote is restored on stop."""
    import uvicorn

    from vftune.agent.loop import Agent, AgentConfig
    from vftune.agent.policies import PolicyError, pf_controller, vf_policy
    from vftune.api.app import create_app
    from vftune.store.db import Store, StoreError, check_writable

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    # Everything that can be wrong with the arguments is found before anything is created.
    try:
        address = parse_listen(listen)
        policy_factory, pf_factory = vf_policy(policy), pf_controller(pf_mode)
    except ValueError as exc:
        fail(str(exc), 2)
    if scenario_files:
        from vftune.cli.sim import register_scenario_files

        if len(scenario_files) > 1:
            fail(f"--scenario-file: one host at a time, got {len(scenario_files)} files", 2)
        sim = register_scenario_files(scenario_files)[0]
    if sim is not None:
        from vftune.sim.scenarios import SCENARIOS

        if sim not in SCENARIOS:
            fail(f"--sim {sim!r}: unknown scenario; `vftune sim list` shows the {len(SCENARIOS)} there are", 2)
    if speed <= 0:
        fail(f"--speed {speed}: must be positive", 2)
    if interval <= 0:
        fail(f"--interval {interval}: must be positive", 2)
    if run_for is not None and run_for <= 0:
        fail(f"--for {run_for}: must be positive", 2)
    problem = check_writable(db)
    if problem:
        fail(problem, 2)

    sock = bind(address)
    try:
        store = Store(db)
    except StoreError as exc:
        sock.close()
        fail(f"--db {db}: {exc}", 2)
    uri = None if libvirt_uri == "none" else libvirt_uri
    try:
        host = _open_host(sim, seed, speed, sysfs_root, procfs_root, uri)
        agent = Agent(host, store, policy_factory, pf_factory,
                      AgentConfig(interval=interval, retention=retention * 3600))
        detail = f"scenario={sim} seed={seed} speed={speed}" if sim else f"sysfs={sysfs_root}"
        agent.start(detail)
    except PolicyError as exc:
        store.close()
        sock.close()
        fail(str(exc), 2)

    # An operator reads this once at start: what the agent can only observe here, and why.
    for cap in agent.caps.missing:
        log.warning("capability missing: %s", cap)
    app = create_app(agent, store, detail)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    stop = threading.Event()

    def request_stop(*_: object) -> None:
        stop.set()
        server.should_exit = True
        stopper = getattr(host, "stop", None)
        if callable(stopper):
            stopper()

    # uvicorn captures SIGINT/SIGTERM while it serves and re-raises them afterwards to the
    # handlers in place before it: ours, so a signal always ends in the clean stop below.
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    crashed: list[BaseException] = []

    def run_agent() -> None:
        try:
            agent.run(stop)
        except Exception as exc:  # a bug, not a host condition: stop serving stale state
            log.exception("agent loop failed")
            crashed.append(exc)
            request_stop()

    worker = threading.Thread(target=run_agent, name="vftune-agent", daemon=True)
    worker.start()
    timer = threading.Timer(run_for, request_stop) if run_for else None
    if timer:
        timer.daemon = True
        timer.start()
    bound_host, bound_port = sock.getsockname()[:2]
    log.info("listening on http://%s:%d, backend %s (%s)", bound_host, bound_port, host.name, detail)
    try:
        server.run(sockets=[sock])
    finally:
        request_stop()
        if timer:
            timer.cancel()
        worker.join()
        restored = agent.shutdown()
        host.close()
        store.close()
        log.info("stopped; restored %d setting(s)", len(restored))
    sys.exit(1 if crashed else 0)
