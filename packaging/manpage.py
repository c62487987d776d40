"""Render vftune(1) in roff from the CLI's own click help, so the man page never drifts from `--help`.

Usage: python packaging/manpage.py [OUTPUT]   (stdout without OUTPUT; the date is SOURCE_DATE_EPOCH's)
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import time
from importlib.metadata import version

import click

from vftune.cli import cli

FILES = [
    ("/etc/default/vftune", "Extra arguments for the service's \\fBvftune run\\fR (VFTUNE_ARGS)."),
    ("/etc/vftune/", "Configuration directory."),
    ("/var/lib/vftune/vftune.db", "The service's SQLite history: samples, decisions, guest events."),
    ("/lib/systemd/system/vftune.service", "The systemd unit; stopping it restores every port."),
    ("/etc/libvirt/hooks/qemu.d/vftune", "The libvirt hook that runs \\fBvftune hook\\fR on guest starts and stops."),
]


def text(s: str) -> str:
    """Escape running text for roff: backslashes, option-like dashes, `code` spans in bold."""
    s = s.replace("\\", "\\e")
    # Dashes of options and code spans are minus signs (copy-pasteable); hyphens in words stay.
    s = re.sub(r"(?<![\w-])(-{1,2})(?=[\w\[])", lambda m: "\\-" * len(m.group(1)), s)
    s = re.sub(r"`([^`]+)`", lambda m: "\\fB" + m.group(1).replace("-", "\\-") + "\\fR", s)
    return s


def line(s: str) -> str:
    """One source line: a leading '.' or quote would be read as a request."""
    return "\\&" + s if s[:1] in (".", "'") else s


def paragraphs(help_text: str | None) -> list[str]:
    out: list[str] = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(help_text or "")):
        if not para.strip():
            continue
        if para.startswith("\b"):  # click's "do not rewrap" marker: keep the lines as they are
            out += [".PP", ".nf", *(line(text(x)) for x in para[1:].strip("\n").splitlines()), ".fi"]
        else:
            out += [".PP", line(text(" ".join(para.split())))]
    return out


def options(cmd: click.Command, ctx: click.Context) -> list[str]:
    out: list[str] = []
    for param in cmd.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or (isinstance(param, click.Argument) and not record[1]):
            continue
        names, help_text = record
        out += [".TP", line("\\fB" + names.replace("-", "\\-") + "\\fR"), line(text(help_text or ""))]
    return out


def usage(cmd: click.Command, ctx: click.Context) -> str:
    pieces = " ".join(cmd.collect_usage_pieces(ctx))
    return f"{ctx.command_path} {pieces}".strip()


def commands(group: click.Group, ctx: click.Context) -> list[str]:
    out: list[str] = []
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
        out += [".SS " + '"' + usage(sub, sub_ctx).replace("-", "\\-") + '"']
        out += paragraphs(sub.help)
        out += options(sub, sub_ctx)
        if isinstance(sub, click.Group):
            out += commands(sub, sub_ctx)
    return out


def render() -> str:
    # make_context applies context_settings (-h as well as --help) the way a real run does.
    ctx = cli.make_context("vftune", [], resilient_parsing=True)
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    date = time.strftime("%Y-%m-%d", time.gmtime(epoch))
    summary = inspect.cleandoc(cli.help or "").splitlines()[0].rstrip(".")
    out = [
        f'.TH VFTUNE 1 "{date}" "vftune {version("vftune")}" "User Commands"',
        ".nh",  # no hyphenation: options and paths must stay copy-pasteable
        ".SH NAME",
        "vftune \\- " + text(summary[0].lower() + summary[1:]),
        ".SH SYNOPSIS",
        ".B vftune",
        "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".SH DESCRIPTION",
        *paragraphs(cli.help),
        ".PP",
        "A host agent for KVM hosts whose Intel 82599 NICs pass SR\\-IOV virtual functions to guests.",
        "It runs as the systemd service \\fBvftune.service\\fR; \\fBvftune status\\fR reports",
        "what the running agent sees and has set.",
        ".SH OPTIONS",
        *options(cli, ctx),
        ".SH COMMANDS",
        *commands(cli, ctx),
        ".SH ENVIRONMENT",
        "Every option can also be set as \\fBVFTUNE_\\fR\\fICOMMAND\\fR\\fB_\\fR\\fIOPTION\\fR,",
        "for example \\fBVFTUNE_RUN_INTERVAL=2\\fR; a flag on the command line wins.",
        ".SH EXIT STATUS",
        "0 on success, 2 for a usage error (one line names the problem and the value),",
        "1 for other failures such as an API address already in use.",
        ".SH FILES",
    ]
    for path, what in FILES:
        out += [".TP", "\\fI" + path.replace("-", "\\-") + "\\fR", what]
    out += [
        ".SH SHELL COMPLETION",
        "The package installs completion for bash, zsh and fish. Without it, add",
        '\\fBeval "$(_VFTUNE_COMPLETE=bash_source vftune)"\\fR to \\fI~/.bashrc\\fR',
        "(\\fBzsh_source\\fR for \\fI~/.zshrc\\fR).",
        ".SH SEE ALSO",
        "\\fBsystemctl\\fR(1), \\fBjournalctl\\fR(1), \\fBvirsh\\fR(1), \\fBethtool\\fR(8)",
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    page = render()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            f.write(page)
    else:
        sys.stdout.write(page)


if __name__ == "__main__":
    main()
