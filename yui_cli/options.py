"""Every click option that more than one command takes, declared once so its help reads the
same wherever it appears.

Two flags mean different things on the two sides, and so have two declarations: the host's
`--relay` falls back on the relay it paired with (the person's and the operator's have none to
fall back on), and the host's `--agent` picks one of its agents (the person's, one of theirs).
The relay is `--relay` in every command; `--url`, its old spelling, is still taken but not
shown (in `run-model` it is the old spelling of `--model-url`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.shell_completion import CompletionItem

if TYPE_CHECKING:
    from pathlib import Path

F = TypeVar("F", bound=Callable[..., Any])

PAIRED_RELAY = "the paired one, $YUI_URL, or the local relay"
"""Where the host's commands find the relay when none is named."""

CONTROLS_TIMEOUT = 10.0
"""Seconds `yui app controls` waits for the host's answer."""


class OldSpelling(click.Option):
    """An option whose names after the first are old spellings: still taken, never shown in
    help, so scripts written before a rename keep working."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        names = self.opts
        self.opts = names[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = names


def _relay_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A `--relay` checked as it is taken: a malformed one is a usage error (exit 2), never a
    relay that can't be reached (75, which a script retries forever)."""
    if value is None:
        return None
    from bridges.client.relay import checked_url  # only when given: `yui --help` stays light

    return checked_url(value, "--relay")


def relay_option(help: str, dest: str = "url", *, old: bool = True) -> Callable[[F], F]:
    """`--relay URL` (with `old`, also its old spelling `--url`), checked as it is taken."""
    names = ("--relay", "--url") if old else ("--relay",)
    return click.option(
        *names, dest, cls=OldSpelling, metavar="URL", callback=_relay_url, help=help
    )


def file_completion(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """TAB completes file names here (the shell lists them)."""
    return [CompletionItem(incomplete, type="file")]


# --- output ---------------------------------------------------------------------------------

json_option = click.option("--json", "json_", is_flag=True, help="Print one JSON object per line.")

table_option = click.option(
    "--table",
    "table_",
    is_flag=True,
    help="Print the list as a table even when stdout isn't a terminal (a pipe gets JSON lines).",
)

# --- the host's side ------------------------------------------------------------------------

state_option = click.option(
    "--state",
    "state_path",
    metavar="PATH",
    shell_complete=file_completion,
    help="The state file (default: $YUI_STATE, $YUI_WEBHOOK_STATE or $YUI_HOME/state.json).",
)

host_url_option = relay_option(f"The relay (default: {PAIRED_RELAY}).")

bridge_relay_option = relay_option(f"The relay (default: {PAIRED_RELAY}).", dest="relay", old=False)
"""The same, in the model's and the A2A bridge's commands, which always called it --relay
(`run-model`'s old --url is its model server's)."""

bridge_agents_option = click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="A",
    help="Serve only this agent (its handle, ref, name or id; repeat for more), so bridges of "
    "two kinds can serve two agents of one state file. Default: every agent in it.",
)

host_agent_option = click.option(
    "--agent",
    metavar="A",
    help="The agent's id, handle, ref or name (default: the host's first agent).",
)

_interval_option = click.option(
    "--interval",
    default=2.0,
    show_default=True,
    help="Seconds between reads of the relay with --poll-only.",
)
_poll_only_option = click.option(
    "--poll-only",
    is_flag=True,
    help="Don't subscribe to the live feed; read every --interval seconds instead (for a relay "
    "without Realtime).",
)


def poll_options(func: F) -> F:
    """`--interval` and `--poll-only`, in that order: how a bridge hears of new messages."""
    return _interval_option(_poll_only_option(func))


allow_private_media_option = click.option(
    "--allow-private-media",
    is_flag=True,
    help="Fetch remote pictures and videos from loopback and private addresses too, for local "
    "testing (by default only public addresses are fetched, checked again on every redirect).",
)

# --- the person's and the operator's side ---------------------------------------------------

url_option = relay_option("The relay (default: $YUI_URL or the local relay).")

as_option = click.option(
    "--as", "as_", metavar="NAME", help="Act as this person (default: the last one signed up)."
)

agent_option = click.option(
    "--agent", metavar="A", help="The agent's id, handle or name (default: the default agent)."
)

group_option = click.option(
    "--group", "-g", metavar="G", help="The group's id or title (default: the newest)."
)

rev_option = click.option(
    "--rev", help="The rev your change is based on (default: the host's current one)."
)

controls_timeout_option = click.option(
    "--timeout",
    type=float,
    help=f"Seconds to wait for the host's answer (default: {CONTROLS_TIMEOUT:g}).",
)

# --- the relay ------------------------------------------------------------------------------


def _as_path(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """A folder option's value as a Path (pathlib imported only when one is given)."""
    from pathlib import Path

    return None if value is None else Path(value)


dir_option = click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False),
    callback=_as_path,
    help="The relay's folder (default: $YUI_HOME/relay).",
)
