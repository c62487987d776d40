"""`vftune restore`: put a host back from the write journal without running the agent.

The operator's escape hatch after a crash when the agent is not to be started again, and what
a package's postrm runs. Everything the journal holds is written back and read back; what
could not be stays in the journal (exit 1) so a later restore or start tries again.
"""

from __future__ import annotations

import time

import click

from vftune import paths
from vftune.cli.common import fail
from vftune.cli.inventory import guest_source_option, libvirt_uri_option, procfs_root_option, sysfs_root_option


@click.command("restore")
@click.option("--db", default=None, metavar="PATH",
              help="History file holding the journal [default: vftune.db in the state directory].")
@sysfs_root_option
@procfs_root_option
@libvirt_uri_option
@guest_source_option
@click.option("--guest-agent-sockets", default=None, metavar="DIR",
              help="Reach guest agents on DIR/<guest>.sock instead of through libvirt (as `vftune run` did).")
@click.option("--forget-missing", is_flag=True,
              help="Drop entries whose setting or device is not under the roots given (a VF disabled, a "
              "NIC removed) instead of keeping them for a later restore.")
@click.option("--accept-current", is_flag=True,
              help="After a lost journal: take the current values of the settings it held as their "
              "originals (check them first), so the agent writes them again.")
def command(db: str | None, sysfs_root: str, procfs_root: str, libvirt_uri: str, guest_source: str,
            guest_agent_sockets: str | None, forget_missing: bool, accept_current: bool) -> None:
    """Write back every original value the journal holds (after a crash, or before removal).

    Exit 0: everything put back and forgotten; 1: something kept (not restored, a device not
    under the roots, or a history file that cannot be written); 2: a usage error."""
    import os

    from vftune.logsafe import escape
    from vftune.model import Decision
    from vftune.store.db import Store, StoreError
    from vftune.store.journal import Journal, JournalError
    from vftune.store.lock import Busy, WriterLock

    path = db or paths.default_db()
    if not os.path.isfile(path):
        fail(f"--db {path}: no such history file (nothing was journaled there)", 2)
    for option, root in (("--sysfs-root", sysfs_root), ("--procfs-root", procfs_root)):
        if not os.path.isdir(root):
            fail(f"{option} {root}: not a directory", 2)
    writer = WriterLock(path)
    try:
        writer.acquire()
    except Busy as exc:
        fail(f"--db {exc}", 1)
    except OSError as exc:
        fail(f"--db {path}: cannot take its lock {writer.path}: {exc.strerror}", 2)
    try:
        journal = Journal.for_restore(path)
    except JournalError as exc:
        fail(f"--db {path}: {exc}", 2)
    store: Store | None = None
    if journal.unwritable is None:
        try:
            store = Store(path)
        except StoreError:
            store = None  # the restore goes on; only its record is lost
    if journal.untrusted:
        if accept_current and journal.unwritable is None:
            n = journal.accept_current()
            click.echo(f"vftune restore: {n} setting(s) whose journal entries were lost: current values "
                       "accepted as their originals")
        else:
            click.echo(f"vftune restore: the journal lost {len(journal.untrusted)} entr"
                       f"{'y' if len(journal.untrusted) == 1 else 'ies'} a run left (see {path}.unrestored): "
                       "their originals are unknown; check them, then run `vftune restore --accept-current`",
                       err=True)
    pending = journal.pending()
    if not pending:
        click.echo(f"vftune restore: the journal in {path} is empty; nothing to put back")
        if journal.untrusted:
            raise SystemExit(1)
        return
    from vftune.hostdriver.linux.host import LinuxHost
    from vftune.hostdriver.linux.netlink_vfstats import ReplaySource

    # Writing sysfs back needs no netlink: a source that is never asked.
    host = LinuxHost(sysfs_root, procfs_root, None if libvirt_uri == "none" else libvirt_uri,
                     netlink=ReplaySource({}), journal=journal, guest_agent_sockets=guest_agent_sockets,
                     guest_source=guest_source)
    try:
        results = host.restore(forget_gone=forget_missing, forget_absent=forget_missing)
    finally:
        host.close()
    t = time.time()
    failed = [a for a in results if not a.ok]
    for a in results:
        if a.ok:
            click.echo(escape(f"restored {a.target}: {a.old} -> {a.applied}"))
        else:
            click.echo(escape(f"NOT restored {a.target} {a.setting}: {a.error}"), err=True)
    if store is not None:
        try:
            store.record_decisions([Decision(t, a.target, a.setting, a.old, a.requested, a.applied, a.ok,
                                             "vftune restore", a.error) for a in results])
            for run_id, _ in store.unfinished_runs():
                store.stop_run(run_id, t, f"unclean; {len(results) - len(failed)} restored by vftune restore")
        except Exception as exc:  # the host is back; only the record is lost
            click.echo(escape(f"vftune restore: not recorded in the history: {exc}"), err=True)
        store.close()
    journal.close()
    left = len(failed) + journal.kept - journal.dropped
    if journal.absent and not forget_missing:
        names = "entry names a device" if journal.absent == 1 else "entries name devices"
        click.echo(escape(f"vftune restore: {journal.absent} {names} not under --sysfs-root {sysfs_root} / "
                          f"--procfs-root {procfs_root}: kept (wrong roots? --forget-missing drops them)"), err=True)
    click.echo(f"vftune restore: {len(results) - len(failed)} setting(s) put back, {left} left in the journal")
    if journal.kept:
        click.echo(escape(f"vftune restore: {journal.kept} put back but not forgotten: {journal.unwritable}; "
                          "rerun once the history file is writable"), err=True)
    if left or journal.untrusted:
        raise SystemExit(1)
