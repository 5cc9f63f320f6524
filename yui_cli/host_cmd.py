"""The host's commands: pair this machine, see its status, read the guide, send a message.

The relay's client, the state file and the output are imported inside each command, so their
help shows at once (`yui status --help` is the one a newcomer runs first)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from yui_cli.options import host_agent_option, host_url_option, json_option, state_option

if TYPE_CHECKING:
    from state.host import HostState

BRIDGES = (
    "yui run-webhook --webhook http://127.0.0.1:8787 (try yui example-agent first), "
    "yui run-model --server ollama --model qwen2.5:7b, or yui run-a2a URL"
)


@click.command(name="pair")
@click.argument("code")
@click.option(
    "--ref",
    default="webhook",
    show_default=True,
    help="The name this machine knows the agent by: 1 to 64 letters, digits, . _ or -, "
    "starting with a letter or digit.",
)
@click.option("--host-name", help="This computer's name in the app (default: the hostname).")
@state_option
@host_url_option
@json_option
def pair(
    code: str, ref: str, host_name: str | None, state_path: str | None, url: str | None, json_: bool
) -> None:
    """Pair this machine with an agent, using the 6-digit code the app shows.

    A second pairing on the same machine joins the same host. Messages sent from the moment
    of pairing reach the agent, even before the bridge runs.
    """
    from bridges.client import host
    from state.host import HostState
    from yui_cli.output import emit, progress

    state = HostState(state_path)
    answer = host.pair(code, ref=ref, host_name=host_name, url=url, state=state)
    agent, connector = answer["agent"], answer["connector"]
    emit(
        {"agent": agent, "connector": connector, "state": str(state.path)},
        f"paired: {agent['name']} (@{agent['handle']}) on {connector['name']}",
        json_=json_,
    )
    progress(_next_step(state, ref))


def _next_step(state: HostState, ref: str) -> str:
    """What to run next: any bridge for a first agent; for another one, a bridge of its own
    with --agent, since a bridge without it serves every agent of the state file."""
    from state.host import HostState

    where = "" if state.path == HostState().path else f" --state {state.path}"
    if len(state.snapshot().floors) < 2:  # a floor per agent paired on this state file
        return f"Next, start a bridge for it{where}: {BRIDGES}"
    return (
        f"Next, a bridge for this agent alone: add --agent {ref}{where} to the bridge you "
        f"start ({BRIDGES}); one running without --agent serves every agent of {state.path}, "
        f"so restart it with --agent for its own"
    )


@click.command(name="status")
@state_option
@host_url_option
@json_option
def status(state_path: str | None, url: str | None, json_: bool) -> None:
    """Show this host, its agents with their presence, and what waits to be written.

    Exits 75 when the relay can't be reached (the agents then shown are the last session's)."""
    from bridges.client import host
    from state.errors import Unreachable
    from state.host import HostState
    from yui_cli.output import emit

    report = host.host_status(HostState(state_path), url)
    agents = ", ".join(f"{a['name']} (@{a['handle']}) {a['presence']}" for a in report["agents"])
    emit(
        report,
        f"host {report['connector'].get('name')} on {report['url']} "
        f"[{report['relay']}]; agents: {agents or 'none'}; "
        f"outbox {report['outbox']}, acks {report['acks']}; state {report['path']}",
        json_=json_,
    )
    if report["relay"] == "unreachable":
        raise Unreachable(
            f"can't reach the relay at {report['url']}: presence unknown",
            hint="is it running? `yui relay status` for the local one",
        )


@click.command(name="guide")
@state_option
@host_url_option
@json_option
def guide(state_path: str | None, url: str | None, json_: bool) -> None:
    """Print the channel guide: what an agent must know to talk in Yui (put it in the
    agent's system prompt)."""
    from bridges.client import host
    from state.host import HostState
    from yui_cli.output import emit

    text = host.fetch_guide(HostState(state_path), url)
    emit(text, f"Yui channel guide {text['version']}\n\n{text['body'].rstrip()}", json_=json_)


@click.command(name="send")
@click.argument("text")
@host_agent_option
@state_option
@host_url_option
@json_option
def send_command(
    text: str, agent: str | None, state_path: str | None, url: str | None, json_: bool
) -> None:
    """Write a message into an agent's thread on its own (a hand-over: the phone buzzes).

    \b
    TEXT "-" reads one message per line from stdin: plain text, or JSON
    {"text": ..., "agent": ...}. When the relay can't be reached the messages wait in the
    outbox (exit 0, and it says so), and the next bridge run (or send) writes them; when it
    refuses them (a suspended or removed host) nothing is kept to send later.
    """
    import io
    import sys

    from bridges import send
    from state.host import HostState
    from yui_cli.output import emit, progress

    if text == "-":
        # surrogateescape whatever the locale: bytes that aren't UTF-8 are then refused with
        # their line number rather than failing half-read with a traceback
        lines = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
        messages = send.read_messages(lines)
        messages = [send.Message(m.text, m.agent or agent) for m in messages]
    else:
        messages = [send.Message(text, agent)]
    for result in send.send(HostState(state_path), messages, url):
        emit(
            result,
            f"{'queued' if result['queued'] else 'sent'} {result['id']} to @{result['agent']}",
            json_=json_,
        )
        if result["queued"]:
            progress(
                "The relay can't be reached: it waits in the outbox and goes out with "
                "the next bridge run."
            )
