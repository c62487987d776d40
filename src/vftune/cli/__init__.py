"""The `vftune` command. Each subcommand lives in its own module and exports `command`."""

from __future__ import annotations

import importlib
import sys

import click

# One line per subcommand module under vftune.cli.
COMMAND_MODULES = [
    "run",
    "status",
    "inventory",
    "sim",
    "hook",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vftune")
def cli() -> None:
    """Tune interrupt moderation of SR-IOV VFs passed through to KVM guests."""


for _name in COMMAND_MODULES:
    cli.add_command(importlib.import_module(f"vftune.cli.{_name}").command)


def main() -> None:
    # click exits 2 on usage errors by itself; keep tracebacks for real bugs only.
    sys.exit(cli.main(standalone_mode=True, auto_envvar_prefix="VFTUNE"))
