"""Helpers shared by the subcommands."""

from __future__ import annotations

import sys
from typing import NoReturn

import click


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr naming the problem and the value, then exit (2 = usage error)."""
    click.echo(f"vftune: {message}", err=True)
    sys.exit(code)
