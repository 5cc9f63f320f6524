"""`yui`: the root command, and the one place errors become messages and exit codes.

A command's module is imported only when that command runs or its own help or completion is
asked for, so `yui --help`, `yui status --help` and TAB completion never pay for psycopg,
requests or the relay. The root's list takes each command's one-line help from a table here
instead of importing (or even reading) its module.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import click
from click.shell_completion import CompletionItem

from state.errors import ExitStatus, YuiError
from yui_cli import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "pair": (
        "host_cmd:pair",
        "Pair this machine with an agent, using the 6-digit code the app shows.",
    ),
    "status": (
        "host_cmd:status",
        "Show this host, its agents with their presence, and what waits to be written.",
    ),
    "guide": (
        "host_cmd:guide",
        "Print the channel guide: what an agent must know to talk in Yui (put it in the "
        "agent's system prompt).",
    ),
    "send": (
        "host_cmd:send_command",
        "Write a message into an agent's thread on its own (a hand-over: the phone buzzes).",
    ),
    "media": (
        "media_cmd:media_command",
        "Send a picture or video into an agent's thread (a hand-over: the phone buzzes).",
    ),
    "run-webhook": (
        "bridge_cmd:run_webhook",
        "Bridge an agent that answers an HTTP POST: every message reaches it once, in order.",
    ),
    "run-model": (
        "model_cmd:run_model",
        "Bridge a model on any OpenAI-compatible server (Ollama, llama.cpp, vLLM, LM Studio, "
        "OpenAI, OpenRouter): every message reaches it once, in order, with the thread as "
        "history.",
    ),
    "run-a2a": (
        "a2a_cmd:run_a2a",
        "Bridge an A2A agent (protocol 1.0 or 0.3, over JSON-RPC): every message reaches it "
        "once, in order, each Yui thread one A2A context.",
    ),
    "hermes": (
        "hermes_cmd:hermes",
        "Serve Hermes agents in Yui: install the plug-in into a profile and pair it.",
    ),
    "example-agent": (
        "bridge_cmd:example_agent",
        'Run the example webhook agent: it answers "hi" with three buttons and names your tap.',
    ),
    "relay": (
        "relay_cmd:relay",
        "Run the local relay: a real PostgreSQL with row-level security, behind a gateway "
        "that speaks the hosted backend's HTTP contract.",
    ),
    "app": (
        "app_cmd:app",
        "Be the person: sign up, add agents, talk to them, read the thread.",
    ),
    "lint": (
        "lint_cmd:lint",
        "Check the ```yui fences of a reply (FILE, or - for stdin).",
    ),
    "sweep": (
        "ops_cmd:sweep",
        "Apply the relay's retention and remove orphaned media (for relay operators).",
    ),
    "kill-switch": (
        "ops_cmd:kill_switch",
        "Suspend or restore a host (connector) or a person on a relay (for relay operators).",
    ),
}
"""Every command of `yui`, in the order its help lists them: where its click object lives, and
the first paragraph of its help (a test holds each to the command's own docstring), so the
root's help lists them all without importing or parsing one."""


def short_help(name: str, limit: int = 45) -> str:
    """The one-line help of command `name`, as click would show it."""
    return click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit)


class YuiGroup(click.Group):
    """Runs a command and turns the toolkit's errors into `Error: …` and their exit code;
    loads the commands named in `lazy` ({name: ("module:attribute", help)}) only when one is
    used."""

    def __init__(
        self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = {name: target for name, (target, _) in (lazy or {}).items()}

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
