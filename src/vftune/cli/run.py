"""`vftune run`: the agent, its API server, and a clean stop that restores every port."""

from __future__ import annotations

import dataclasses
import errno
import functools
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from vftune import paths, sdnotify
from vftune.cli.common import Number, fail
from vftune.cli.config import config_option
from vftune.config import (
    GUEST_AGENT_MODES,
    GUEST_RX_DROPS_MODES,
    GUEST_SOURCES,
    LIMITS,
    LOG_FORMATS,
    LOG_LEVELS,
    Listen,
    RunConfig,
)
from vftune.itr import MAX_RX_USECS
from vftune.sim import DEMO_SCENARIO

if TYPE_CHECKING:
    from vftune.hostdriver.base import HostDriver
    from vftune.store.journal import Journal

log = logging.getLogger("vftune")
DEFAULTS = RunConfig()
STOP_JOIN_S = 1.5  # longest a tick in progress may hold up the restore on SIGTERM
DRAIN_S = 1.5  # then requests in flight get this long; the whole stop stays under 5 s
API_RULES_NAME = "api-rules.json"
EXIT_DEADLINE_S = 4.0  # the latest exit after a stop began, restore permitting
DRAIN_AFTER_SLOW_RESTORE_S = 0.5  # what a restore that outlasted EXIT_DEADLINE_S leaves the drain


def _number(name: str, integer: bool = False) -> Number:
    _, low, high, low_open = LIMITS[name]
    return Number(low, high, low_open=low_open, integer=integer)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(listen: Listen, option: str = "--listen") -> socket.socket:
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on connections accepted from a
    # socket that says it is TCP; without it every small keep-alive response waited ~40 ms for
    # the client's delayed ACK.
    sock = socket.socket(listen.family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((listen.host, listen.port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            fail(f"{option} {listen.host}:{listen.port}: port already in use (is another vftune running?)", 1)
        fail(f"{option} {listen.host}:{listen.port}: cannot bind: {exc.strerror}", 2)
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def api_rules_path(db: str) -> Path:
    """Where the API's rules are kept: beside the history file (the state directory)."""
    return Path(db).parent / API_RULES_NAME


def open_host(config: RunConfig, journal: Journal) -> HostDriver:
    if config.sim is not None:
        from vftune.sim.host import SimHost

        return SimHost(config.sim, seed=config.seed, speed=config.speed)
    from vftune.hostdriver.linux.guest_agent.socket_drops import DEFAULT_DROPS_LIMITS, DropsLimits
    from vftune.hostdriver.linux.host import LinuxHost

    return LinuxHost(sysfs_root=config.sysfs_root, procfs_root=config.procfs_root, libvirt_uri=config.libvirt,
                     guest_source=config.guest_source,
                     journal=journal, guest_agent=config.guest_agent,
                     guest_agent_sockets=config.guest_agent_sockets, guest_rx_drops=config.guest_rx_drops,
                     # Each read is a few guest-agent calls in the guest: no more often than
                     # every 0.5 s, whatever the tick (the tuner's windows are 0.5 s).
                     guest_rx_drops_limits=DropsLimits(interval_s=max(config.interval,
                                                                      DEFAULT_DROPS_LIMITS.interval_s)))


@click.command("run")
@click.option("--sim", "sim", is_flag=False, flag_value=DEMO_SCENARIO, default=None, metavar="[SCENARIO]",
              help=f"Run on the simulated host (scenario default: {DEMO_SCENARIO}; see `vftune sim list`).")
@click.option("--scenario-file", "scenario_files", envvar="VFTUNE_RUN_SCENARIO_FILE", multiple=True, metavar="PATH",
              help="Run on the simulated host described by this TOML file (docs/scenarios.md).")
@click.option("--speed", type=_number("speed"), default=DEFAULTS.speed, show_default=True,
              help="Simulated seconds per wall second (sim only).")
@click.option("--seed", type=_number("seed", integer=True), default=DEFAULTS.seed, show_default=True,
              help="Simulator seed.")
@click.option("--for", "run_for", envvar="VFTUNE_RUN_FOR", type=_number("run_for"), default=DEFAULTS.run_for, metavar="SECONDS",
              help="Stop cleanly after this many wall seconds (default: until SIGINT/SIGTERM).")
@click.option("--db", default=None, metavar="PATH",
              help="SQLite history and write journal [default: vftune.db in the state directory, "
                   "/var/lib/vftune for root].")
@click.option("--listen", default=DEFAULTS.listen, show_default=True,
              help="API address HOST:PORT. Beyond loopback every endpoint needs the token.")
@click.option("--metrics-listen", default=DEFAULTS.metrics_listen, metavar="HOST:PORT",
              help="Also serve /metrics and /healthz, and nothing else, on HOST:PORT without the token, "
              "for Prometheus scrapers beyond loopback (the unit's IPAddressAllow= says who may connect).")
@click.option("--token-file", default=None, metavar="PATH",
              help="The API's bearer token, created 0600 at first start [default: `token` beside --db].")
@click.option("--interval", type=_number("interval"), default=DEFAULTS.interval, show_default=True,
              help="Seconds of host time per tick.")
@click.option("--policy", default=DEFAULTS.policy, show_default=True,
              help="Per-VF ITR policy: search, fixed:RATE, observe.")
@click.option("--pf-mode", default=DEFAULTS.pf_mode, show_default=True,
              help="Per-PF rx mode controller: hybrid, hybrid:CLIFF_PPS, stock.")
@click.option("--retention", "retention_h", envvar="VFTUNE_RUN_RETENTION", type=_number("retention_h"),
              default=DEFAULTS.retention_h, show_default=True,
              help="Hours of per-tick samples to keep; older ones become 1-minute rows.")
@click.option("--rollup-days", type=_number("rollup_days"), default=DEFAULTS.rollup_days, show_default=True,
              help="Days of 1-minute samples, events and decisions to keep.")
@click.option("--max-db-mb", type=_number("max_db_mb"), default=DEFAULTS.max_db_mb, show_default=True,
              help="History size cap in MiB; beyond it the oldest rows go first.")
@click.option("--sysfs-root", default=DEFAULTS.sysfs_root, show_default=True,
              help="Where sysfs is mounted (linux backend).")
@click.option("--procfs-root", default=DEFAULTS.procfs_root, show_default=True,
              help="Where procfs is mounted (linux backend).")
@click.option("--libvirt-uri", default=DEFAULTS.libvirt_uri, show_default=True,
              help="libvirt connection for guest ownership (linux backend); 'none' to skip.")
@click.option("--guest-source", type=click.Choice(GUEST_SOURCES), default=DEFAULTS.guest_source, show_default=True,
              help="Where guests come from: libvirt, the QEMU processes' command lines in --procfs-root (Proxmox VE, "
              "KubeVirt, scripts), or auto: libvirt where it answers, else the processes (linux backend).")
@click.option("--guest-agent", type=click.Choice(GUEST_AGENT_MODES), default=DEFAULTS.guest_agent, show_default=True,
              help="Set VF ITRs inside guests with their ethtool through the QEMU guest agent: auto where the "
              "patched PF cannot, on for every guest-held VF, off never (linux backend).")
@click.option("--guest-agent-sockets", default=DEFAULTS.guest_agent_sockets, metavar="DIR",
              help="Reach guest agents on DIR/<guest>.sock instead of through libvirt.")
@click.option("--guest-rx-drops", type=click.Choice(GUEST_RX_DROPS_MODES), default=DEFAULTS.guest_rx_drops,
              show_default=True, help="Read VF-owning guests' socket receive drops (UDP RcvbufErrors in their "
              "/proc/net/snmp{,6}) through the QEMU guest agent, once per --interval: auto where the agent "
              "allows guest-file-*, off never (linux backend).")
@click.option("--max-interval-us", type=Number(2, MAX_RX_USECS, integer=True), default=DEFAULTS.max_interval_us,
              metavar="USECS",
              help="Longest interval (rx-usecs) a VF's own adaptive ITR may pick (patched driver's bounds).")
@click.option("--keep-warm", "keep_warm_s", envvar="VFTUNE_RUN_KEEP_WARM", type=_number("keep_warm_s"),
              default=DEFAULTS.keep_warm_s, show_default=True, metavar="SECONDS",
              help="After an ITR change, write the rate in force again every 8 s for this long, so a "
              "patched VF keeps fetching every 250 ms and its next change lands at once; 0: off.")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), default=DEFAULTS.log_level, show_default=True)
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default=DEFAULTS.log_format, show_default=True,
              help="text (no timestamps under journald, a syslog priority per line) or json.")
@config_option
def command(**options: Any) -> None:
    """Run the agent and its API until stopped; every value it wrote is restored on stop,
    and after a crash at the next start."""
    files = options.pop("scenario_files")
    if files:  # the file's scenario becomes the simulated host
        from vftune.cli.sim import register_scenario_files

        if len(files) > 1:
            fail(f"--scenario-file: one host at a time, got {len(files)} files", 2)
        options["sim"] = register_scenario_files(files)[0]
    if options["db"] is None:
        del options["db"]
    run(RunConfig(**options))


def run(config: RunConfig, host_factory: Callable[[RunConfig, Journal], HostDriver] = open_host) -> None:
    """Everything `vftune run` does, from a validated config to a clean stop.

    host_factory builds the backend (tests pass one with a recorded netlink source)."""
    from vftune import rules
    from vftune.agent.loop import Agent, AgentConfig
    from vftune.agent.policies import PolicyError, pf_controller, vf_policy
    from vftune.api.process import ApiProcess, ApiSettings
    from vftune.hostdriver.base import HostError
    from vftune.logsetup import setup_logging
    from vftune.sim.scenarios import SCENARIOS
    from vftune.store.db import Retention, Store, StoreError, check_writable
    from vftune.store.journal import Journal, JournalError

    setup_logging(config.log_level, config.log_format)
    os.umask(0o077)  # history, journal, token: the owner's only
    # Everything that can be wrong with the arguments is found before anything is created.
    try:
        address = config.address()
        policy_factory, pf_factory = vf_policy(config.policy), pf_controller(config.pf_mode)
        config.validate(list(SCENARIOS))
    except ValueError as exc:
        fail(str(exc), 2)
    try:
        file_rules = rules.load(config.config) if config.config else rules.EMPTY
        # Rules set over the API (PUT /v1/rules) by the last run, kept beside the history.
        file_rules = dataclasses.replace(file_rules, api_rules=rules.load_api_rules(api_rules_path(config.db)))
    except rules.ConfigError as exc:
        fail(str(exc.problems[0]), 2)
    policy_factory = with_tuner_settings(policy_factory, file_rules.tuner)
    if config.db == paths.default_db():
        try:
            paths.make_private_dir(paths.state_dir())
        except OSError as exc:
            fail(f"state directory {paths.state_dir()}: {exc.strerror}; give --db PATH", 2)
    from vftune.store.lock import Busy, WriterLock

    problem = check_writable(config.db)
    if problem and not os.path.isfile(config.db):
        fail(problem, 2)
    writer = WriterLock(config.db)  # held until the process ends (os._exit drops it)
    try:
        writer.acquire()
    except Busy as exc:
        fail(f"--db {exc}", 1)
    except OSError as exc:
        fail(f"--db {config.db}: cannot take its lock {writer.path}: {exc.strerror}", 2)
    if problem:  # a history file that cannot be written: its journal is still put back
        fail(problem + restore_read_only(config, host_factory), 2)

    sock = bind(address)
    metrics_address = config.metrics_address()
    metrics_sock = bind(metrics_address, "--metrics-listen") if metrics_address is not None else None
    try:
        token = paths.ensure_token(Path(config.token_path))
    except paths.TokenFileError as exc:
        sock.close()
        fail(str(exc), 2)
    retention = Retention(raw_s=config.retention_h * 3600, rollup_s=max(config.rollup_days * 86400,
                          config.retention_h * 3600), max_bytes=int(config.max_db_mb * 1024**2))
    try:
        store = Store(config.db, retention)
        journal = Journal(config.db)
    except (StoreError, JournalError) as exc:
        sock.close()
        fail(f"--db {config.db}: {exc}" + restore_read_only(config, host_factory), 2)
    detail = config.detail
    if journal.untrusted:
        log.error("the write journal in %s lost %d entr%s a run left (database or WAL deleted, truncated or "
                  "garbled; %s lists them): their originals are unknown, so vftune will not write them until "
                  "an operator checks them and runs `vftune restore --accept-current`", config.db,
                  len(journal.untrusted), "y" if len(journal.untrusted) == 1 else "ies", journal_marker(config.db))
        detail += f" journal-lost={len(journal.untrusted)}"
    try:
        host = host_factory(config, journal)
        agent = Agent(host, store, policy_factory, pf_factory,
                      AgentConfig(interval=config.interval, max_interval_us={} if config.max_interval_us is None
                                  else {"*": config.max_interval_us}, keep_warm_s=config.keep_warm_s),
                      rules=file_rules)
        agent.api_rules_saver = functools.partial(rules.save_api_rules, api_rules_path(config.db))
        agent.start(detail)  # first of all: restore what an unfinished run left
        source = getattr(host, "guest_source_in_use", None)
        if isinstance(source, str):  # where guests come from, in /v1/host's detail and status' header
            agent.detail = f"{detail} guests={'libvirt' if source == 'libvirt' else 'qemu-processes'}"
    except (PolicyError, HostError) as exc:
        # A HostError here: the roots hold no host (--sysfs-root /tmp); nothing was written.
        store.close()
        sock.close()
        fail(str(exc) if isinstance(exc, PolicyError) else f"--sysfs-root {config.sysfs_root}: {exc}", 2)

    # An operator reads this once at start: what the agent can only observe here, and why.
    for cap in agent.caps.missing:
        log.warning("capability missing: %s", cap)
    public = not is_loopback(address.host)
    if public:
        log.warning("--listen %s is not loopback: every endpoint, reads included, needs "
                    "'Authorization: Bearer' with the token in %s", config.listen, config.token_path)
    stop = threading.Event()
    stopped = threading.Event()  # the restore is done
    drained = threading.Event()  # and the API has stopped (or was killed)
    restored: list[Any] = []
    crashed: list[BaseException] = []
    worker: threading.Thread | None = None
    api: ApiProcess | None = None

    def restore_then_drain() -> None:
        """SIGTERM's order: the tick loop stops, every written value is put back (and recorded),
        then the API stops taking requests and gives those in flight DRAIN_S."""
        sdnotify.notify("STOPPING=1")
        # A database another process holds or a full disk must not make the stop wait (the
        # unit's TimeoutStopSec) or end it early: the restore needs only the journal's reads.
        journal.hurry()
        store.hurry()
        try:
            if worker is not None:
                worker.join(STOP_JOIN_S)
            restored.extend(agent.shutdown())
            if journal.kept:
                log.error("%d restored setting(s) are still in the write journal (%s): the next start or "
                          "`vftune restore` writes their originals again", journal.kept, journal.unwritable)
        except Exception as exc:  # never leave the stop half done without a word
            log.exception("stop failed")
            crashed.append(exc)
        finally:
            stopped.set()
        if api is not None:
            api.drain(DRAIN_S + 0.5)
        drained.set()

    stop_lock = threading.Lock()

    def request_stop(*_: object) -> None:
        with stop_lock:
            if stop.is_set():
                if stopped.is_set() and api is not None:
                    api.kill()  # a second signal after the restore: stop draining
                return
            stop.set()
        host.stop()  # wake the agent's sleep where the backend can; no new writes
        threading.Thread(target=restore_then_drain, name="vftune-stop", daemon=True).start()
        threading.Thread(target=exit_by_deadline, name="vftune-exit", daemon=True).start()

    def exit_by_deadline() -> None:
        """Whatever the API is doing, the process is gone EXIT_DEADLINE_S after the stop began,
        once the restore is done (the restore is never cut short; TimeoutStopSec leaves margin).
        A restore that took that long leaves the drain DRAIN_AFTER_SLOW_RESTORE_S, and the
        warning is given only when the API had not drained."""
        began = time.monotonic()
        stopped.wait()
        left = max(EXIT_DEADLINE_S - (time.monotonic() - began), DRAIN_AFTER_SLOW_RESTORE_S)
        if drained.wait(left):
            time.sleep(1.0)  # the main thread exits well within this; a hung close() does not keep us
        else:
            log.warning("requests still in flight %.1f s after the restore: exiting without them", left)
            if api is not None:
                api.kill()
        logging.shutdown()
        os._exit(exit_code())

    def exit_code() -> int:
        """1 when the loop crashed or restored entries could not be forgotten (said at ERROR)."""
        return 1 if crashed or journal.kept else 0

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    # SIGHUP (systemctl reload) re-reads the rules; never the default action, which would end the
    # agent without restoring anything.
    signal.signal(signal.SIGHUP, lambda *_: reload_rules(agent, config.config or rules.DEFAULT_PATH))
    pet = sdnotify.watchdog_interval()
    last_pet = [0.0]

    def heartbeat() -> None:
        # The tick loop pets systemd's watchdog: a stalled loop gets the service restarted,
        # and the restart restores from the journal.
        if pet is not None and time.monotonic() - last_pet[0] >= pet / 2:
            last_pet[0] = time.monotonic()
            sdnotify.notify("WATCHDOG=1")
        if api is not None:
            api.tick()

    agent.heartbeat = heartbeat

    def run_agent() -> None:
        try:
            agent.run(stop)
        except Exception as exc:  # a bug, not a host condition: stop serving stale state
            log.exception("agent loop failed")
            crashed.append(exc)
            request_stop()

    # The API runs in a process of its own (api/process.py): requests never wait for the
    # tick's Python, nor the tick for theirs.
    settings = ApiSettings(db=str(store.path) if store.on_disk else None, token_for_reads=public,
                           log_level=config.log_level, log_format=config.log_format, drain_s=DRAIN_S)
    try:
        api = ApiProcess(sock, settings, token, agent, store if store.on_disk else None,
                         clock_rate=float(getattr(host, "speed", 1.0)), metrics_sock=metrics_sock)
    except OSError as exc:  # no process to be had (a limit on processes, memory): undo and say so
        log.error("cannot start the API process: %s; restoring and stopping", exc)
        agent.shutdown()
        host.close()
        journal.close()
        fail(f"cannot start the API process: {exc}", 1)
    agent.view_wanted = api.view_due  # the tick copies the policies' states only for a view pushed
    # Everything built so far (modules, the inventory) lives as long as the process: the
    # collector need not walk it again at every full collection, a stall of the tick.
    gc.collect()
    gc.freeze()
    bound_host, bound_port = sock.getsockname()[:2]
    log.info("listening on http://%s:%d, backend %s (%s)", bound_host, bound_port, host.name, config.detail)
    if metrics_sock is not None:
        log.info("metrics (no token) on http://%s:%d/metrics", *metrics_sock.getsockname()[:2])
    # READY before the tick loop starts: its first watchdog pet must not reach systemd first.
    sdnotify.notify(f"READY=1\nSTATUS=tuning {len(agent.inventory.vfs())} VFs on {host.name}")
    worker = threading.Thread(target=run_agent, name="vftune-agent", daemon=True)
    worker.start()
    timer = threading.Timer(config.run_for, request_stop) if config.run_for else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        api.supervise()  # until drained, replacing an API process that dies
    finally:
        request_stop()
        if timer:
            timer.cancel()
        stopped.wait(STOP_JOIN_S + 3.0)
        host.close()
        journal.close()
        failed = [a for a in restored if not a.ok]
        log.info("stopped; restored %d setting(s)%s", len(restored) - len(failed),
                 f", {len(failed)} could not be restored (kept in the journal)" if failed else "")
        logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code())


def journal_marker(db: str) -> str:
    from vftune.store.journal import MARKER_SUFFIX

    return db + MARKER_SUFFIX


def restore_read_only(config: RunConfig, host_factory: Callable[[RunConfig, Journal], HostDriver]) -> str:
    """The history file cannot be written: still put back what its journal holds (read-only)
    before refusing to run. Returns what was done, as the tail of the one-line refusal."""
    from vftune.store.journal import Journal, JournalError

    if config.sim is not None or not os.path.isfile(config.db):
        return ""
    try:
        journal = Journal(config.db, read_only=True)
    except JournalError:
        return ""
    try:
        if not journal.pending():
            return ""
        host = host_factory(config, journal)
        try:
            results = host.restore()
        finally:
            host.close()
    except Exception as exc:  # whatever the host says, the refusal below is the answer
        log.error("restoring from the read-only journal failed: %s", exc)
        return "; its journal could not be restored"
    finally:
        journal.close()
    ok = sum(1 for a in results if a.ok)
    for a in results:
        if not a.ok:
            log.warning("%s %s: not restored: %s", a.target, a.setting, a.error)
    return (f"; restored {ok} of {len(results)} setting(s) from its read-only journal (kept there: run "
            "`vftune restore` once it is writable)")


def with_tuner_settings(factory: Any, tuner: Any) -> Any:
    """The search factory with [tuner]'s periodic re-search (the other keys reach each VF through
    its rule); any other policy as it is."""
    from vftune.agent.policies import SearchFactory
    from vftune.control.tuner import TunerOptions

    if not isinstance(factory, SearchFactory):
        return factory
    changes = {k: v for k in ("restart_s", "restart_interrupts") if (v := getattr(tuner, k)) is not None}
    if not changes:
        return factory
    return SearchFactory(options=dataclasses.replace(factory.options or TunerOptions(), **changes), profiles=factory.profiles,
                         default_goal=factory.default_goal)


def reload_rules(agent: Any, path: str) -> None:
    """SIGHUP: re-read the config file's rules; a file with problems is refused and the rules in
    force are kept. [run] options are read at start only (a restart applies them)."""
    from vftune import rules

    if not os.path.exists(path):
        log.warning("SIGHUP: no config file at %s to reload; the rules in force are kept", path)
        return
    try:
        new = rules.load(path)
    except rules.ConfigError as exc:
        for p in exc.problems:
            log.error("config reload refused, keeping the rules in force: %s", p)
        return
    log.info("config reloaded from %s: %d rule(s); [run] options apply on restart", path, len(new.rules))
    agent.set_rules(new)

