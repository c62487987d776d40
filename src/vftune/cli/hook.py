"""`vftune hook`: the libvirt qemu hook. Tells the agent a guest started or stopped.

libvirt runs /etc/libvirt/hooks/qemu (and qemu.d/*) as `<domain> <operation> <sub-op> <extra>`
with the domain XML on stdin, and waits for it: a hook must never call back into libvirt (it
deadlocks) and must not hold up or fail a guest's start. So this only parses the XML, posts one
short request to the local agent, and always exits 0; problems go to stderr, which libvirt logs.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import click
import httpx

from vftune.cli.status import DEFAULT_URL
from vftune.hostdriver.base import HostError
from vftune.hostdriver.linux.libvirt_guests import hostdev_addresses

# Operations after which VF ownership has changed; the others (prepare, migrate, ...) are ignored.
REPORTED = {"started", "stopped", "release", "reconnect", "restore"}


@click.command("hook")
@click.argument("domain")
@click.argument("operation")
@click.argument("sub_operation", required=False, default="-")
@click.argument("extra", required=False, default="-")
@click.option("--url", default=DEFAULT_URL, show_default=True, help="The agent's API.")
@click.option("--timeout", type=float, default=2.0, show_default=True, help="Seconds to wait for the agent.")
def command(domain: str, operation: str, sub_operation: str, extra: str, url: str, timeout: float) -> None:
    """Run by libvirt as its qemu hook; reads the domain XML from stdin."""
    if operation not in REPORTED:
        return
    xml = sys.stdin.read() if not sys.stdin.isatty() else ""
    try:
        vfs = hostdev_addresses(xml) if xml.strip() else []
        uuid = ET.fromstring(xml).findtext("uuid") if xml.strip() else None
    except (HostError, ET.ParseError) as exc:
        click.echo(f"vftune hook: {domain} {operation}: {exc}; telling the agent without VF list", err=True)
        vfs, uuid = [], None
    body = {"guest": domain, "uuid": uuid, "operation": operation, "vfs": vfs, "source": "libvirt-hook"}
    try:
        resp = httpx.post(f"{url.rstrip('/')}/v1/events", json=body, timeout=timeout)
        if resp.status_code != 202:
            click.echo(f"vftune hook: {domain} {operation}: agent answered {resp.status_code}: {resp.text[:200]}",
                       err=True)
    except httpx.HTTPError as exc:
        # The agent may be down; libvirt events and its periodic re-read catch up later.
        click.echo(f"vftune hook: {domain} {operation}: agent at {url} not reached: {exc}", err=True)
