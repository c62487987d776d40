"""`vftune config check [PATH]`, and the --config option `vftune run` reads its file with.

Precedence, highest first: flags, environment (VFTUNE_RUN_*), the file's [run], defaults. The
file's [run] values become click's default_map, which click consults after the command line
and the environment, so the order is click's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from vftune import rules
from vftune.cli.common import FullHelpGroup
from vftune.config import RunConfig

F = TypeVar("F", bound=Callable[..., Any])


def semantic_problems(config: rules.ConfigFile) -> list[rules.Problem]:
    """What the run itself would refuse in the file's [run] values (a scenario, an address, a
    policy spec), each as a Problem naming the file."""
    from vftune.agent.policies import PolicyError, pf_controller, vf_policy
    from vftune.sim.scenarios import SCENARIOS

    problems = []
    path = config.path or "<config>"
    run_values = dict(config.run)
    for scenario_file in run_values.pop("scenario_files", ()):
        from vftune.sim.scenarios import ScenarioError, register_file

        try:
            run_values["sim"] = register_file(scenario_file)
        except ScenarioError as exc:
            problems.append(rules.Problem(path, "run.scenario-file", scenario_file, str(exc)))
            return problems
    # Each value on its own, so that every bad one is named (RunConfig.validate stops at the first).
    for attr, value in run_values.items():
        try:
            RunConfig(**{attr: value}).validate(list(SCENARIOS))
        except (ValueError, TypeError) as exc:
            problems.append(rules.Problem(config.run_sources.get(attr, path), f"run.{_option_name(attr)}", value,
                                          str(exc).split(": ", 1)[-1]))
    try:
        run = RunConfig(**run_values)
        if not problems:
            run.validate(list(SCENARIOS))
    except (ValueError, TypeError) as exc:
        problems.append(rules.Problem(path, "run", rules.MISSING, str(exc)))
        return problems
    for key, spec, parse in (("run.policy", run.policy, vf_policy), ("run.pf-mode", run.pf_mode, pf_controller)):
        try:
            parse(spec)
        except PolicyError as exc:
            problems.append(rules.Problem(path, key, spec, str(exc).split(": ", 1)[-1]))
    return problems


def _option_name(attr: str) -> str:
    """A RunConfig field by the name the file and the command line give it."""
    return next((name for name, (field, _) in rules.RUN_OPTIONS.items() if field == attr), attr)


def check(path: str) -> list[rules.Problem]:
    """Every problem in the file at `path`: format, keys and types, then what `run` would refuse."""
    try:
        config = rules.load(path)
    except rules.ConfigError as exc:
        # The values that were well typed are checked further too: every problem at once.
        return exc.problems + (semantic_problems(exc.partial) if exc.partial is not None else [])
    return semantic_problems(config)


def _print_problems(problems: list[rules.Problem]) -> None:
    for p in problems:
        click.echo(f"vftune: {p}", err=True)


def _load_for_run(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Eager callback of `run --config`: read the file before the other options are resolved and
    hand its [run] values to click as defaults. No --config: the default path, when it exists."""
    path = value
    if path is None and os.path.exists(rules.DEFAULT_PATH):
        path = rules.DEFAULT_PATH
    if path is None:
        return None
    problems = check(path)
    if problems:
        _print_problems(problems)
        ctx.exit(2)
    config = rules.load(path)
    ctx.default_map = {**(ctx.default_map or {}), **config.run}
    return path


def config_option(f: F) -> F:
    return click.option(
        "--config", "config", type=click.Path(dir_okay=False), default=None, is_eager=True,
        callback=_load_for_run, expose_value=True,
        help=f"Config file: [run] options and per-VF [[rule]]s (default: {rules.DEFAULT_PATH} if it exists).",
    )(f)


@click.group("config", cls=FullHelpGroup)
def command() -> None:
    """The config file: check it before a reload (`systemctl reload vftune` sends SIGHUP)."""


@command.command("check")
@click.argument("path", required=False, default=rules.DEFAULT_PATH)
def check_command(path: str) -> None:
    """Check PATH (default /etc/vftune/vftune.toml): one line per problem, exit 2 if any."""
    problems = check(path)
    if problems:
        _print_problems(problems)
        raise SystemExit(2)
    config = rules.load(path)
    click.echo(f"{path}: ok ({len(config.run)} run option(s), {len(config.rules)} rule(s))")
