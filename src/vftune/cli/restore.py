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
def command(db: str | None, sysfs_root: str, procfs_root: str, libvirt_uri: str, guest_source: str,
            guest_agent_sockets: str | None) -> None:
    """Write back every original value the journal holds (after a crash, or before removal)."""
    import os

    from vftune.logsafe import escape
    from vftune.model import Decision
    from vftune.store.db import Store, StoreError
    from vftune.store.journal import Journal, JournalError

    path = db or paths.default_db()
    if not os.path.isfile(path):
        fail(f"--db {path}: no such history file (nothing was journaled there)", 2)
    for option, root in (("--sysfs-root", sysfs_root), ("--procfs-root", procfs_root)):
        if not os.path.isdir(root):
            fail(f"{option} {root}: not a directory", 2)
    try:
        store = Store(path)
        journal = Journal(path)
    except (StoreError, JournalError) as exc:
        fail(f"--db {path}: {exc}", 2)
    pending = journal.pending()
    if not pending:
        click.echo(f"vftune restore: the journal in {path} is empty; nothing to put back")
        return
    from vftune.hostdriver.linux.host import LinuxHost
    from vftune.hostdriver.linux.netlink_vfstats import ReplaySource

    # Writing sysfs back needs no netlink: a source that is never asked.
    host = LinuxHost(sysfs_root, procfs_root, None if libvirt_uri == "none" else libvirt_uri,
                     netlink=ReplaySource({}), journal=journal, guest_agent_sockets=guest_agent_sockets,
                     guest_source=guest_source)
    try:
        results = host.restore()
    finally:
        host.close()
    t = time.time()
    failed = [a for a in results if not a.ok]
    for a in results:
        if a.ok:
            click.echo(escape(f"restored {a.target}: {a.old} -> {a.applied}"))
        else:
            click.echo(escape(f"NOT restored {a.target} {a.setting}: {a.error}"), err=True)
    store.record_decisions([Decision(t, a.target, a.setting, a.old, a.requested, a.applied, a.ok,
                                     "vftune restore", a.error) for a in results])
    for run_id, _ in store.unfinished_runs():
        store.stop_run(run_id, t, f"unclean; {len(results) - len(failed)} restored by vftune restore")
    store.close()
    journal.close()
    click.echo(f"vftune restore: {len(results) - len(failed)} setting(s) put back, {len(failed)} left in the journal")
    if failed:
        raise SystemExit(1)
