"""`yui lint`: check an agent's reply before a person sees it (for agent authors' CI)."""

from __future__ import annotations

import json
from typing import IO, Any

import click

from bridges.yuilines.fences import find_fences
from bridges.yuilines.gates import MIN_BUILD, draws
from bridges.yuilines.gating import gate_name
from bridges.yuilines.parser import parse
from state.errors import ExitStatus
from yui_cli.output import emit, json_option, progress


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
    text = reply.read()
    name = "<stdin>" if reply.name == "<stdin>" else reply.name
    findings = list(check(text, build))
    if ops:
        for op in reply_ops(text):
            click.echo(json.dumps(op, ensure_ascii=False))
    for finding in findings:
        human = f"{name}:{finding['line']}: {finding['kind']}: {finding['message']}"
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


def reply_ops(text: str) -> list[dict[str, Any]]:
    """The ops of every fence in a reply, in the vectors' shape (no line, no message)."""
    return [
        {k: v for k, v in op.items() if k not in ("line", "message")}
        for fence in find_fences(text)
        for op in parse(fence.body(text))
    ]


def check(text: str, build: int | None) -> list[dict[str, Any]]:
    """Each bad line, and with a build each op it would not draw, with its line in the reply."""
    findings: list[dict[str, Any]] = []
    for fence in find_fences(text):
        for op in parse(fence.body(text)):
            line = op["line"] + fence.first_line - 1
            if op["op"] == "error":
                findings.append({"line": line, "kind": "error", "message": op["message"]})
                continue
            name = gate_name(op)
            if build is not None and name is not None and not draws(name, build):
                first = MIN_BUILD[name].build
                message = f"build {build} does not draw {name} (first drawn by build {first})"
                findings.append({"line": line, "kind": "gated", "message": message, "name": name})
    return findings
