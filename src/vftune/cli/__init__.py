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
    "bench",
    "config",
]


class LazyGroup(click.Group):
    """Imports a subcommand's module only when it runs: the agent does not carry the CLI's
    HTTP client and table renderer, and `vftune hook` starts fast under libvirt."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMAND_MODULES:
            return None
        command: click.Command = importlib.import_module(f"vftune.cli.{cmd_name}").command
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vftune")
def cli() -> None:
    """Tune interrupt moderation of SR-IOV VFs passed through to KVM guests."""


def main() -> None:
    # click exits 2 on usage errors by itself; keep tracebacks for real bugs only.
    sys.exit(cli.main(standalone_mode=True, auto_envvar_prefix="VFTUNE"))
