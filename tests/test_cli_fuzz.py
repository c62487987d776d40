"""Hostile values for every numeric option of every command: a usage error naming the option, or a
value inside the option's finite range; never a traceback, a hang or a silent nan.

The in-process part walks every command click knows and feeds each numeric option the values
that broke it before (nan, inf, 1e309, -1, 1e-300, 1e12, 99999999999, text, control bytes).
The subprocess part runs the cases the issue lists end to end: one line on stderr, exit 2."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import click
import pytest

from conftest import VFTUNE
from vftune.cli import cli
from vftune.cli.common import Number

HOSTILE = ["nan", "-nan", "inf", "-inf", "1e309", "-1e309", "-1", "0", "1e-300", "1e12", "99999999999",
           "99999999999999999999999", "", " ", "x", "0x10", "1_000", "1e", "\x1b[2J", "9" * 400, "-0"]


def numeric_params() -> list[tuple[str, click.Command, click.Parameter]]:
    found: list[tuple[str, click.Command, click.Parameter]] = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])
            return
        for p in cmd.params:
            if isinstance(p.type, (Number, click.types.FloatParamType, click.types.IntParamType)):
                found.append((" ".join(path), cmd, p))

    walk(cli, [])
    return found


PARAMS = numeric_params()


@pytest.mark.parametrize("where, cmd, param", PARAMS, ids=[f"{w} {p.opts[0]}" for w, _, p in PARAMS])
def test_every_numeric_option_is_finite_and_bounded(where, cmd, param):
    t = param.type
    if isinstance(t, Number):
        assert t.low is not None and t.high is not None, f"{where} {param.opts[0]}: unbounded"
    else:
        assert isinstance(t, click.IntRange) and t.min is not None and t.max is not None, \
            f"{where} {param.opts[0]}: {type(t).__name__} takes nan, inf or any size"
    for value in HOSTILE:
        try:
            got = t.convert(value, param, None)
        except click.BadParameter as exc:
            assert "Traceback" not in str(exc) and len(str(exc)) < 200 and "\x1b" not in exc.format_message()
            continue
        assert isinstance(got, (int, float)) and math.isfinite(got), (value, got)
        low = t.low if isinstance(t, Number) else t.min
        high = t.high if isinstance(t, Number) else t.max
        assert low <= got <= high, (value, got)


def cli_cases(tmp: Path) -> list[list[str]]:
    nested = tmp / "nested.toml"
    nested.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    inf_scenario = tmp / "inf.toml"
    inf_scenario.write_text('name = "x"\nduration_s = inf\n[host]\ncores = 4\nports = 1\n[[guest]]\nname = "g"\n'
                            '[[vf]]\nguest = "g"\n[[vf.phase]]\nat_s = 0\nkind = "tcp"\n')
    db = str(tmp / "x.db")
    return [
        ["sim", "sweep", "--scenario", "paper-1vm", "--time", "nan"],
        ["sim", "sweep", "--scenario", "paper-1vm", "--time", "inf"],
        ["sim", "sweep", "--scenario", "paper-1vm", "--time", "1e309"],
        ["sim", "sweep", "--scenario", "paper-1vm", "--seed", "-1"],
        ["status", "--watch", "--every", "nan"],
        ["status", "--watch", "--every", "inf"],
        ["status", "--watch", "--every", "1e309"],
        ["run", "--sim", "paper-1vm", "--speed", "1e-300", "--for", "1", "--db", db],
        ["run", "--sim", "paper-1vm", "--token-file", "/", "--for", "1", "--db", db],
        ["run", "--sysfs-root", "/tmp", "--libvirt-uri", "none", "--for", "1", "--db", db],
        ["run", "--sim", "paper-1vm", "--pf-mode", "hybrid:0", "--for", "1", "--db", db],
        ["run", "--sim", "paper-1vm", "--pf-mode", "hybrid:nan", "--for", "1", "--db", db],
        ["run", "--sim", "paper-1vm", "--max-interval-us", "1e30", "--for", "1", "--db", db],
        ["bench", "--seeds", "0-99999999999", "--quick"],
        ["bench", "--seeds", "5-1", "--quick"],
        ["bench", "--quick", "--duration", "1e12"],
        ["bench", "--quick", "--jobs", "0"],
        ["testbed", "--window", "nan"],
        ["testbed", "--bulk-seconds", "nan"],
        ["testbed", "--rate", "inf"],
        ["config", "check", str(nested)],
        ["config", "check", "/dev/zero"],
        ["config", "check", str(tmp)],
        ["sim", "sweep", "--scenario-file", str(inf_scenario)],
    ]


def test_the_cases_that_raised_tracebacks_give_one_line_and_exit_2(tmp_path):
    bad = []
    cases = cli_cases(tmp_path)
    for args in cases:
        out = subprocess.run([*VFTUNE, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        lines = out.stderr.strip().splitlines()
        if out.returncode != 2 or "Traceback" in out.stderr or len(lines) != 1:
            bad.append(f"{' '.join(args)}: rc {out.returncode}: {out.stderr[-300:]}")
    assert not bad, f"{len(bad)} of {len(cases)}:\n" + "\n".join(bad)
