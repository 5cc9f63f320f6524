"""Click options that several commands share, declared once so their help stays the same.

`--state` and the host's `--url` (the paired relay first) live in host_cmd; `--json` in output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def person_option(help: str) -> Callable[[F], F]:
    """`--as NAME`: the person a command acts as (`yui app controls` words it shorter)."""
    return click.option("--as", "as_", metavar="NAME", help=help)


as_option = person_option("Act as this person (default: the last one signed up).")

url_option = click.option("--url", help="The relay (default: $YUI_URL or the local relay).")
"""`--url` for the person's and the operator's commands (no paired relay to fall back on)."""

host_agent_option = click.option(
    "--agent",
    metavar="A",
    help="The agent's id, handle, ref or name (default: the host's first agent).",
)
"""`--agent` on the host's commands: which of its agents (default: the first)."""


def poll_options(poll_only_help: str) -> Callable[[F], F]:
    """`--interval` and `--poll-only`, in that order; each bridge words `--poll-only` itself."""
    interval = click.option(
        "--interval",
        default=2.0,
        show_default=True,
        help="Seconds between reads of the relay with --poll-only.",
    )
    poll_only = click.option("--poll-only", is_flag=True, help=poll_only_help)

    def decorate(func: F) -> F:
        return interval(poll_only(func))

    return decorate
