"""The `vftune` command. Each subcommand lives in its own module and exports `command`."""

from __future__ import annotations

import importlib
import sys

import click

from vftune.cli.common import FullHelpGroup

# One line per subcommand module under vftune.cli.
COMMAND_MODULES = [
    "run",
    "status",
    "inventory",
    "sim",
    "hook",
    "restore",
    "bench",
    "testbed",
    "config",
]


class LazyGroup(FullHelpGroup):
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
    """Usage errors are one line naming the option and the value, exit 2 (click's own format
    adds a usage block); `vftune hook` exits 0 whatever it is given, so libvirt never fails a guest."""
    hook = len(sys.argv) > 1 and sys.argv[1] == "hook"
    try:
        code = cli.main(prog_name="vftune", standalone_mode=False, auto_envvar_prefix="VFTUNE")
    except click.exceptions.Abort:
        click.echo("vftune: aborted", err=True)
        code = 1
    except click.ClickException as exc:
        where = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx else "vftune"
        click.echo(f"{where}: {exc.format_message()}", err=True)
        code = 0 if hook else exc.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except Exception as exc:
        if not hook:
            raise
        click.echo(f"vftune hook: {type(exc).__name__}: {exc}", err=True)  # libvirt logs stderr
        code = 0
    sys.exit(code if isinstance(code, int) else 0)
