"""`yui run-a2a`: any A2A agent in Yui (Google's ADK, LangGraph, CrewAI, Microsoft's agent
framework, the A2A SDK, ...), read from its card."""

from __future__ import annotations

import click
import requests

from bridges.a2a.card import Card, fetch_card
from bridges.a2a.client import A2AClient, AgentRefused, AgentUnavailable, RpcError
from bridges.a2a.plugin import A2AAgent
from bridges.a2a.tryout import try_agent
from bridges.client.host import fetch_guide
from bridges.engine.bridge import BridgeOptions
from bridges.media import remote
from state.errors import BadInput, Unreachable, YuiError
from state.host import HostState, Secret
from yui_cli.bridge_cmd import run_bridge
from yui_cli.model_cmd import read_key
from yui_cli.options import (
    allow_private_media_option,
    bridge_agents_option,
    bridge_relay_option,
    json_option,
    poll_options,
    state_option,
)
from yui_cli.output import emit, progress, show


def _card(
    url: str, session: requests.Session, key: Secret | None, *, needed: bool, stream: bool
) -> Card | None:
    """The agent's card, checked against the key; None when it can't be read now and the
    bridge can read it at its first turn instead (`needed` is False)."""
    try:
        card = fetch_card(url, session)
    except Unreachable as exc:
        if needed:
            raise
        progress(f"{exc.message}; the card is read again at the first message")
        return None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="URL") from None
    if card.needs_key and card.auth is None:
        raise BadInput(
            f"{card.name} asks for {' or '.join(card.cannot)}, which yui run-a2a can't give",
            hint="it sends a bearer token or an API key in a header",
        )
    if card.needs_key and key is None:
        raise BadInput(
            f"{card.name} asks for a key ({card.auth.words if card.auth else 'a key'})",
            hint="give it with --key-env VAR or --key-stdin",
        )
    if key is not None and card.auth is None:
        progress("the card names no security scheme: the key goes as a bearer token")
    how = "streaming" if card.streaming and stream else "polling its tasks"
    progress(f"{card.name}: {card.protocol} at {card.where}, {how}")
    return card


@click.command(name="run-a2a")
@click.argument("url", metavar="URL")
@click.option(
    "--key-env",
    metavar="VAR",
    help="Read the agent's key from $VAR at start (sent as the card's security scheme says: "
    "a bearer token or an API-key header). A key is never a flag's value.",
)
@click.option("--key-stdin", is_flag=True, help="Read the agent's key from stdin's first line.")
@click.option(
    "--stream/--no-stream",
    default=True,
    show_default=True,
    help="Stream each answer when the card says the agent can; --no-stream sends, then polls "
    "the task.",
)
@click.option(
    "--timeout",
    default=300.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds the agent may stay silent before the turn is asked again (which resumes its "
    "task, never sends it twice).",
)
@click.option(
    "--try",
    "try_text",
    metavar="TEXT",
    help="Send TEXT once (after the channel guide), print what Yui would show; needs no pairing.",
)
@poll_options
@allow_private_media_option
@bridge_agents_option
@state_option
@bridge_relay_option
@json_option
def run_a2a(
    url: str,
    key_env: str | None,
    key_stdin: bool,
    stream: bool,
    timeout: float,
    try_text: str | None,
    interval: float,
    poll_only: bool,
    allow_private_media: bool,
    agents: tuple[str, ...],
    state_path: str | None,
    relay: str | None,
    json_: bool,
) -> None:
    """Bridge an A2A agent (protocol 1.0 or 0.3, over JSON-RPC): every message reaches it
    once, in order, each Yui thread one A2A context.

    \b
    yui run-a2a http://127.0.0.1:9999                  (its base URL, or its card's URL)
    yui run-a2a https://agent.example --key-env AGENT_KEY
    yui run-a2a http://127.0.0.1:9999 --try "hi"
    One line per event on stdout (turn, answer, reply, ack, retry, error); --json for JSON.
    It serves every agent of its state file unless --agent names some.
    """
    key = read_key(key_env, key_stdin, None)
    session = requests.Session()
    if try_text is not None:
        card = _card(url, session, key, needed=True, stream=stream)
        assert card is not None
        client = A2AClient(card, key=key, timeout=timeout, session=session)
        if allow_private_media:
            remote.allow_private_media()
        _try(client, try_text, HostState(state_path), relay, stream, json_)
        return
    state = HostState(state_path)
    state.pairing()  # not paired: say so before anything else
    found = _card(url, session, key, needed=False, stream=stream)
    run_bridge(
        state_path,
        relay,
        lambda host: A2AAgent(
            url, host.state, card=found, key=key, timeout=timeout, stream=stream, session=session
        ),
        BridgeOptions(interval=interval, live=not poll_only),
        json_,
        kind="run-a2a",
        agents=agents,
        allow_private_media=allow_private_media,
    )


def _try(
    client: A2AClient,
    text: str,
    state: HostState,
    relay: str | None,
    stream: bool,
    json_: bool,
) -> None:
    """`--try`: the answer on stdout, then one line on how it went."""
    try:
        guide = fetch_guide(state, relay)
    except YuiError as exc:
        progress(f"no channel guide from the relay ({exc.message}); sending without it")
        guide = None
    try:
        tried = try_agent(client, text, guide=guide, stream=stream)
    except AgentUnavailable as exc:
        raise Unreachable(exc.reason, hint="is the agent running?") from None
    except AgentRefused as exc:
        raise YuiError(f"the agent refused ({exc.status}): {exc.reason}") from None
    except RpcError as exc:
        raise YuiError(f"the agent answered an error: {exc.message} ({exc.code})") from None
    card = client.card
    facts = {
        "agent": card.name,
        "protocol": card.protocol,
        "state": tried.state or "message",
        "task": tried.task,
        "streamed": tried.streamed,
        "seconds": round(tried.seconds, 1),
        "guide": guide is not None,
    }
    if json_:
        emit({"text": tried.text, **facts}, "", json_=True)
        return
    if tried.text:
        show(tried.text)
    how = "streamed" if tried.streamed else "polled"
    show(f"-- {facts['state']} ({card.name}, {card.protocol}, {how}, {facts['seconds']} s)")
