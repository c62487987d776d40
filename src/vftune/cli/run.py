"""`vftune run`: the agent, its API server, and a clean stop that restores every port."""

from __future__ import annotations

import errno
import logging
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Any

import click

from vftune.cli.common import fail
from vftune.config import DEFAULT_SCENARIO, LOG_LEVELS, Listen, RunConfig

if TYPE_CHECKING:
    from vftune.hostdriver.base import HostDriver

log = logging.getLogger("vftune")
DEFAULTS = RunConfig()


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


def _open_host(config: RunConfig) -> HostDriver:
    if config.sim is not None:
        from vftune.sim.host import SimHost

        return SimHost(config.sim, seed=config.seed, speed=config.speed)
    from vftune.hostdriver.linux.host import LinuxHost

    return LinuxHost(sysfs_root=config.sysfs_root, procfs_root=config.procfs_root, libvirt_uri=config.libvirt)


@click.command("run")
@click.option("--sim", "sim", is_flag=False, flag_value=DEFAULT_SCENARIO, default=None, metavar="[SCENARIO]",
              help=f"Run on the simulated host (scenario default: {DEFAULT_SCENARIO}; see `vftune sim list`).")
@click.option("--scenario-file", "scenario_files", multiple=True, metavar="PATH",
              help="Run on the simulated host described by this TOML file (docs/scenarios.md).")
@click.option("--speed", type=float, default=DEFAULTS.speed, show_default=True,
              help="Simulated seconds per wall second (sim only).")
@click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True, help="Simulator seed.")
@click.option("--for", "run_for", type=float, default=DEFAULTS.run_for, metavar="SECONDS",
              help="Stop cleanly after this many wall seconds (default: until SIGINT/SIGTERM).")
@click.option("--db", default=DEFAULTS.db, show_default=True, help="SQLite history file.")
@click.option("--listen", default=DEFAULTS.listen, show_default=True, help="API address HOST:PORT.")
@click.option("--interval", type=float, default=DEFAULTS.interval, show_default=True,
              help="Seconds of host time per tick.")
@click.option("--policy", default=DEFAULTS.policy, show_default=True,
              help="Per-VF ITR policy: search, fixed:RATE, observe.")
@click.option("--pf-mode", default=DEFAULTS.pf_mode, show_default=True,
              help="Per-PF rx mode controller: hybrid, hybrid:CLIFF_PPS, stock.")
@click.option("--retention", "retention_h", type=float, default=DEFAULTS.retention_h, show_default=True,
              help="Hours of samples to keep.")
@click.option("--sysfs-root", default=DEFAULTS.sysfs_root, show_default=True,
              help="Where sysfs is mounted (linux backend).")
@click.option("--procfs-root", default=DEFAULTS.procfs_root, show_default=True,
              help="Where procfs is mounted (linux backend).")
@click.option("--libvirt-uri", default=DEFAULTS.libvirt_uri, show_default=True,
              help="libvirt connection for guest ownership (linux backend); 'none' to skip.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), default=DEFAULTS.log_level, show_default=True)
def command(**options: Any) -> None:
    """Run the agent and its API until stopped; every value it wrote is restored on stop."""
    files = options.pop("scenario_files")
    if files:  # the file's scenario becomes the simulated host
        from vftune.cli.sim import register_scenario_files

        if len(files) > 1:
            fail(f"--scenario-file: one host at a time, got {len(files)} files", 2)
        options["sim"] = register_scenario_files(files)[0]
    run(RunConfig(**options))


def run(config: RunConfig) -> None:
    """Everything `vftune run` does, from a validated config to a clean stop."""
    import uvicorn

    from vftune.agent.loop import Agent, AgentConfig
    from vftune.agent.policies import PolicyError, pf_controller, vf_policy
    from vftune.api.app import create_app
    from vftune.sim.scenarios import SCENARIOS
    from vftune.store.db import Store, StoreError, check_writable

    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    # Everything that can be wrong with the arguments is found before anything is created.
    try:
        address = config.address()
        policy_factory, pf_factory = vf_policy(config.policy), pf_controller(config.pf_mode)
        config.validate(list(SCENARIOS))
    except ValueError as exc:
        fail(str(exc), 2)
    problem = check_writable(config.db)
    if problem:
        fail(problem, 2)

    sock = bind(address)
    try:
        store = Store(config.db)
    except StoreError as exc:
        sock.close()
        fail(f"--db {config.db}: {exc}", 2)
    try:
        host = _open_host(config)
        agent = Agent(host, store, policy_factory, pf_factory,
                      AgentConfig(interval=config.interval, retention=config.retention_h * 3600))
        agent.start(config.detail)
    except PolicyError as exc:
        store.close()
        sock.close()
        fail(str(exc), 2)

    # An operator reads this once at start: what the agent can only observe here, and why.
    for cap in agent.caps.missing:
        log.warning("capability missing: %s", cap)
    app = create_app(agent, store)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    stop = threading.Event()

    def request_stop(*_: object) -> None:
        stop.set()
        server.should_exit = True
        host.stop()  # wake the agent's sleep where the backend can

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
    timer = threading.Timer(config.run_for, request_stop) if config.run_for else None
    if timer:
        timer.daemon = True
        timer.start()
    bound_host, bound_port = sock.getsockname()[:2]
    log.info("listening on http://%s:%d, backend %s (%s)", bound_host, bound_port, host.name, config.detail)
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
