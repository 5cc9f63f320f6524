"""`yui`: the root command, and the one place errors become messages and exit codes."""

from __future__ import annotations

import os
from typing import Any

import click
from rich.markup import escape

from state.errors import ExitStatus, YuiError
from yui_cli import (
    __version__,
    a2a_cmd,
    app_cmd,
    bridge_cmd,
    host_cmd,
    lint_cmd,
    media_cmd,
    model_cmd,
    ops_cmd,
    relay_cmd,
)
from yui_cli.output import clean, console


class YuiGroup(click.Group):
    """Runs a command and turns the toolkit's errors into `Error: …` and their exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except YuiError as exc:
            console().print(
                f"[red]Error:[/red] {escape(clean(exc.message))}", markup=True, highlight=False
            )
            if exc.hint:
                console().print(
                    f"[dim]{escape(clean(exc.hint))}[/dim]", markup=True, highlight=False
                )
            ctx.exit(int(exc.exit_status))
        except KeyboardInterrupt:
            ctx.exit(int(ExitStatus.INTERRUPTED))


@click.group(cls=YuiGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="yui")
def cli() -> None:
    """Put any agent in Yui, and run the relay it talks through.

    \b
    Host:    yui pair | status | guide | send | media | run-webhook | run-model | run-a2a |
             example-agent
    Relay:   yui relay up | down | status | migrate
    Ops:     yui sweep [--delete] | kill-switch status | suspend | restore
    Person:  yui app signup | add-agent | say | tap | stop | thread | agents | hosts | ...
    Agents:  yui lint [REPLY] [--build N] [--ops]   (check a reply's ```yui screens)

    Output: data on stdout (a line per result, a table for a list; --json for one JSON
    object per line), messages for people on stderr.

    Exit codes: 0 ok, 1 failure, 2 usage, 3 not paired, 4 refused or revoked,
    5 suspended, 6 busy (another bridge holds the state), 75 relay unreachable (try again).
    """


for command in (
    host_cmd.pair,
    host_cmd.status,
    host_cmd.guide,
    host_cmd.send_command,
    media_cmd.media_command,
    bridge_cmd.run_webhook,
    model_cmd.run_model,
    a2a_cmd.run_a2a,
    bridge_cmd.example_agent,
    relay_cmd.relay,
    app_cmd.app,
    lint_cmd.lint,
    ops_cmd.sweep,
    ops_cmd.kill_switch,
):
    cli.add_command(command)


def main() -> None:
    """Console-script entry point."""
    if os.environ.get("NO_COLOR"):
        os.environ.setdefault("TERM", "dumb")
    cli.main(prog_name="yui")  # standalone mode: click exits with the status itself
