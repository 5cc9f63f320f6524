"""`yui lint`: check an agent's reply before a person sees it (for agent authors' CI)."""

from __future__ import annotations

from typing import IO

import click

from state.errors import BadInput, ExitStatus
from yui_cli.options import json_option
from yui_cli.output import emit, json_line, progress
from yuilines.lint import check, parse_fences, reply_ops


@click.command(name="lint")
@click.argument("reply", type=click.File("r", encoding="utf-8"), default="-")
@click.option("--build", type=int, metavar="N", help="Also name what app build N can't draw.")
@click.option("--ops", is_flag=True, help="Print the ops the phone will read, as JSON lines.")
@json_option
def lint(reply: IO[str], build: int | None, ops: bool, json_: bool) -> None:
    """Check the ```yui fences of a reply (FILE, or - for stdin).

    \b
    Prints each bad line (its line in the reply and why) and, with --build, each preset that
    build would not draw. Exit 1 when a line is bad; what a build can't draw only warns (the
    bridge turns it into words). --ops prints the parsed ops instead, one JSON object per line,
    in the conformance vectors' shape, and the findings go to stderr.
    """
    try:
        text = reply.read()
    except UnicodeDecodeError:
        raise BadInput(f"{reply.name} is not UTF-8 text") from None
    if "\x00" in text:  # valid UTF-8, but a binary file: no reply has a NUL in it
        raise BadInput(f"{reply.name} is a binary file (it has NUL bytes), not a reply")
    parsed = parse_fences(text)
    findings = check(text, build, parsed)
    if ops:
        for op in reply_ops(text, parsed):
            click.echo(json_line(op))
    for finding in findings:
        human = f"{reply.name}:{finding['line']}: {finding['kind']}: {finding['message']}"
        if ops:
            progress(human)
        else:
            emit(finding, human, json_=json_)
    errors = sum(1 for f in findings if f["kind"] == "error")
    gated = len(findings) - errors
    if findings:
        drawn = f", {gated} line(s) build {build} would not draw" if build is not None else ""
        progress(f"{errors} error(s){drawn}")
    if errors:
        click.get_current_context().exit(int(ExitStatus.ERROR))
