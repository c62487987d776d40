"""Helpers shared by the subcommands."""

from __future__ import annotations

import math
import sys
from typing import Any, NoReturn

import click

SEED_MAX = 2**32 - 1  # every seed option: numpy's and the simulator's seeds are 32-bit


class FullHelpGroup(click.Group):
    """A group whose --help lists each subcommand with its whole first paragraph, wrapped to
    the terminal (click cuts it at 45 columns)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr naming the problem and the value, then exit (2 = usage error)."""
    click.echo(f"vftune: {message}", err=True)
    sys.exit(code)


class Number(click.ParamType):  # type: ignore[type-arg]
    """A finite number within [low, high] (or (low, high] with low_open): click's FLOAT takes
    nan and inf, and FloatRange lets nan through because every comparison with it is false."""

    def __init__(self, low: float | None = None, high: float | None = None, *, low_open: bool = False,
                 integer: bool = False, unit: str = "") -> None:
        self.low, self.high, self.low_open, self.integer, self.unit = low, high, low_open, integer, unit
        self.name = "integer" if integer else "number"

    def _range(self) -> str:
        low = "" if self.low is None else (f"> {self.low:g}" if self.low_open else f">= {self.low:g}")
        high = "" if self.high is None else f"<= {self.high:g}"
        return " and ".join(p for p in (low, high) if p) + (f" {self.unit}" if self.unit else "")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number: float = value
        else:
            text = str(value).strip()
            try:
                number = int(text) if self.integer else float(text)
            except ValueError:
                self.fail(f"{text[:40]!r} is not {'a whole number' if self.integer else 'a number'}", param, ctx)
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"{number} is not a finite number", param, ctx)
        if ((self.low is not None and (number <= self.low if self.low_open else number < self.low))
                or (self.high is not None and number > self.high)):
            # An integer of 400 digits is shown as its size, not echoed.
            shown = f"{number:g}" if isinstance(number, float) or abs(number) < 10**15 else f"a {len(str(number))}-digit number"
            self.fail(f"{shown} is out of range: must be {self._range()}", param, ctx)
        return number
