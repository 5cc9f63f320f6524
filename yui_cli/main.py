"""`yui`: the root command, and the one place errors become messages and exit codes.

A command's module is imported only when that command runs or its own help or completion is
asked for, so `yui --help`, `yui status --help` and TAB completion never pay for psycopg,
requests or the relay. The root's list reads each command's one-line help from its module's
source (its docstring) instead of importing it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import os
from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from state.errors import ExitStatus, YuiError
from yui_cli import __version__

HERE = Path(__file__).resolve().parent

COMMANDS: dict[str, str] = {
    "pair": "host_cmd:pair",
    "status": "host_cmd:status",
    "guide": "host_cmd:guide",
    "send": "host_cmd:send_command",
    "media": "media_cmd:media_command",
    "run-webhook": "bridge_cmd:run_webhook",
    "run-model": "model_cmd:run_model",
    "run-a2a": "a2a_cmd:run_a2a",
    "hermes": "hermes_cmd:hermes",
    "example-agent": "bridge_cmd:example_agent",
    "relay": "relay_cmd:relay",
    "app": "app_cmd:app",
    "lint": "lint_cmd:lint",
    "sweep": "ops_cmd:sweep",
    "kill-switch": "ops_cmd:kill_switch",
}
"""Every command of `yui`, in the order its help lists them: where its click object lives."""


@functools.cache
def _docstrings(module: str) -> dict[str, str]:
    """The docstrings of a command module's functions, read from its source, not imported."""
    tree = ast.parse((HERE / f"{module}.py").read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = ast.get_docstring(node) or ""
    return found


def short_help(name: str, limit: int = 45) -> str:
    """The one-line help of command `name`, as click would show it, without importing it
    (unless its source can't be read: an install without the .py files)."""
    module, attr = COMMANDS[name].split(":")
    try:
        doc = _docstrings(module).get(attr, "")
    except (OSError, SyntaxError):
        command = getattr(importlib.import_module(f"yui_cli.{module}"), attr)
        return str(command.get_short_help_str(limit))
    return click.Command(name, help=doc).get_short_help_str(limit)


class YuiGroup(click.Group):
    """Runs a command and turns the toolkit's errors into `Error: …` and their exit code;
    loads the commands named in `lazy` ({name: "module:attribute"}) only when one is used."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.lazy, *sorted(n for n in self.commands if n not in self.lazy)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, attr = self.lazy[cmd_name].split(":")
        command = getattr(importlib.import_module(f"yui_cli.{module}"), attr)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of commands with their one-line help, none of them imported."""
        names = [n for n in self.list_commands(ctx) if n in self.lazy or not self._hidden(n)]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = [(n, self._short(ctx, n, limit)) for n in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names complete from `lazy` without importing a command module."""
        items = [
            CompletionItem(n, help=self._short(ctx, n, 45))
            for n in self.list_commands(ctx)
            if n.startswith(incomplete) and (n in self.lazy or not self._hidden(n))
        ]
        if not incomplete or incomplete.startswith("-"):
            items += click.Command.shell_complete(self, ctx, incomplete)
        return items

    def _hidden(self, name: str) -> bool:
        return self.commands[name].hidden

    def _short(self, ctx: click.Context, name: str, limit: int) -> str:
        if name in self.lazy and name not in self.commands:
            return short_help(name, limit)
        command = self.get_command(ctx, name)
        return command.get_short_help_str(limit) if command else ""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except YuiError as exc:
            from rich.markup import escape

            from yui_cli.output import clean, console

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


@click.group(cls=YuiGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="yui")
def cli() -> None:
    """Put any agent in Yui, and run the relay it talks through.

    \b
    Host:    yui pair | status | guide | send | media | run-webhook | run-model | run-a2a |
             example-agent
    Relay:   yui relay up | down | status | migrate | list | destroy | serve
    Ops:     yui sweep [--delete] | kill-switch status | suspend | restore
    Person:  yui app signup | add-agent | say | tap | stop | thread | agents | hosts | ...
    Agents:  yui lint [REPLY] [--build N] [--ops]   (check a reply's ```yui screens)

    Output: data on stdout (a line per result, a table for a list; --json for one JSON
    object per line), messages for people on stderr.

    Exit codes: 0 ok, 1 failure, 2 usage, 3 not paired, 4 refused or revoked,
    5 suspended, 6 busy (another bridge holds the state), 75 relay unreachable (try again),
    130 interrupted (Ctrl-C).

    Shell completion: eval "$(_YUI_COMPLETE=bash_source yui)" (zsh_source, fish_source).
    """


def main() -> None:
    """Console-script entry point."""
    if os.environ.get("NO_COLOR"):
        os.environ.setdefault("TERM", "dumb")
    cli.main(prog_name="yui")  # standalone mode: click exits with the status itself
