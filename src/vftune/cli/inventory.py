"""`vftune inventory`: the host's PFs, VFs and the guests holding them, without starting the agent."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import click

from vftune.config import GUEST_SOURCES
from vftune.hostdriver.base import HostError
from vftune.model import Inventory

# Shared with `vftune run` (node_exporter's --path.sysfs / --path.procfs are the model).
sysfs_root_option = click.option(
    "--sysfs-root", default="/sys", show_default=True,
    type=click.Path(exists=True, file_okay=False), help="Where sysfs is mounted (a fixture tree in tests).",
)
procfs_root_option = click.option(
    "--procfs-root", default="/proc", show_default=True,
    type=click.Path(exists=True, file_okay=False), help="Where procfs is mounted.",
)
libvirt_uri_option = click.option(
    "--libvirt-uri", default="qemu:///system", show_default=True,
    help="libvirt connection for guest ownership; 'none' to skip libvirt.",
)
guest_source_option = click.option(
    "--guest-source", type=click.Choice(GUEST_SOURCES), default="auto", show_default=True,
    help="Where guests come from: libvirt, the QEMU processes' command lines in --procfs-root, or auto "
         "(libvirt where it answers, else the processes).",
)


def inventory_json(inv: Inventory) -> dict[str, Any]:
    return {
        "pfs": [
            {
                "name": pf.name, "pci": pf.pci, "device_id": f"0x{pf.device_id:04x}", "driver": pf.driver,
                "num_vfs": pf.num_vfs, "total_vfs": pf.total_vfs,
                "vfs": [
                    {"index": vf.index, "pci": vf.pci, "driver": vf.driver,
                     "guest": None if vf.guest is None else {"name": vf.guest.name, "uuid": vf.guest.uuid}}
                    for vf in pf.vfs
                ],
            }
            for pf in inv.pfs
        ],
        "ignored": [{"name": i.name, "reason": i.reason} for i in inv.ignored],
    }


def inventory_text(inv: Inventory) -> str:
    lines = []
    for pf in inv.pfs:
        lines.append(f"{pf.name}  {pf.pci}  8086:{pf.device_id:04x}  {pf.driver}  VFs {pf.num_vfs}/{pf.total_vfs}")
        for vf in pf.vfs:
            guest = f"{vf.guest.name} ({vf.guest.uuid})" if vf.guest else "-"
            lines.append(f"  vf{vf.index:<3} {vf.pci}  {vf.driver or 'unbound':<9} {guest}")
    if inv.ignored:
        lines.append("ignored:")
        lines.extend(f"  {i.name}: {i.reason}" for i in inv.ignored)
    return "\n".join(lines)


@click.command("inventory")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@sysfs_root_option
@procfs_root_option
@libvirt_uri_option
@guest_source_option
def command(as_json: bool, sysfs_root: str, procfs_root: str, libvirt_uri: str, guest_source: str) -> None:
    """List the host's ixgbe-family PFs (82599, X540, X550, X552, X553) and VFs and which guest holds each VF."""
    from vftune.hostdriver.linux.host import LinuxHost

    if not logging.getLogger().handlers:
        # Problems are printed once below as warnings; keep the library's log lines out of the output.
        logging.getLogger("vftune").addHandler(logging.NullHandler())
        logging.getLogger("vftune").propagate = False
    uri = None if libvirt_uri in ("", "none") else libvirt_uri
    host = LinuxHost(sysfs_root=sysfs_root, procfs_root=procfs_root, libvirt_uri=uri, guest_source=guest_source)
    try:
        inv = host.inventory()
        warnings = host.inventory_errors
        source = host.guest_source_in_use
    except HostError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        host.close()
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    if as_json:
        json.dump({**inventory_json(inv), "guest_source": source}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        click.echo(inventory_text(inv))
        click.echo(f"guests from: {'libvirt' if source == 'libvirt' else 'QEMU processes in ' + procfs_root}")
