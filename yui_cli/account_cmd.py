"""`yui app delete-account`: the person deletes their account on the relay, for good."""

from __future__ import annotations

import sys

import click

from state.errors import BadUsage
from yui_cli.options import as_option, json_option
from yui_cli.output import emit


@click.command(name="delete-account")
@click.option("--yes", is_flag=True, help="Don't ask: delete at once (needed off a terminal).")
@as_option
@json_option
def delete_account(yes: bool, as_: str | None, json_: bool) -> None:
    """Delete the person's account: every agent and thread, host, picture, session and phone
    of theirs on the relay, then the person. It can't be undone.

    \b
    Their hosts are refused from their next call (a bridge stops with exit 4), and this
    machine forgets the person's tokens. Asks first on a terminal; elsewhere give --yes.
    """
    from people import account

    who = account.describe(as_)
    if not yes:
        if not sys.stdin.isatty():
            raise BadUsage(f"deleting {who} needs --yes when no terminal can ask")
        click.confirm(
            f"Delete {who}, with every agent, thread, host and picture? It can't be undone",
            abort=True,
            err=True,
        )
    gone = account.delete_account(as_)
    emit(
        gone,
        f"deleted {gone['name']} on {gone['url']}: {gone['messages']} messages, "
        f"{gone['objects']} media objects, {gone['agents']} agents, {gone['hosts']} hosts",
        json_=json_,
    )
