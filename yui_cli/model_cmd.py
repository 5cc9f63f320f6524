"""`yui run-model`: any OpenAI-compatible model server as an agent in Yui."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from bridges.client.host import fetch_guide
from bridges.engine.bridge import BridgeOptions
from bridges.model.client import SERVERS, ChatClient, ModelRefused, ModelUnavailable
from bridges.model.plugin import ModelAgent, ModelOptions, try_model
from state.errors import BadInput, Unreachable, YuiError
from state.host import HostState, Secret
from state.paths import relay_url
from yui_cli.bridge_cmd import run_bridge
from yui_cli.options import (
    OldSpelling,
    allow_private_media_option,
    bridge_agents_option,
    bridge_relay_option,
    json_option,
    poll_options,
    state_option,
)
from yui_cli.output import emit, progress, show


def read_key(key_env: str | None, key_stdin: bool, server: str | None) -> Secret | None:
    """The model server's key, read once at start and kept only in memory: from stdin, from
    the variable `--key-env` names, or from the preset's usual variable."""
    if key_env and key_stdin:
        raise click.UsageError("--key-env and --key-stdin: give one")
    if key_stdin:
        line = sys.stdin.readline().strip()
        if not line:
            raise BadInput("--key-stdin read no key: give it as the first line of stdin")
        return Secret(line)
    var = key_env or (SERVERS[server].key_env if server else None)
    if var is None:
        return None
    value = os.environ.get(var, "").strip()
    if not value:
        raise BadInput(f"${var} is not set", hint="set it, or pass the key with --key-stdin")
    return Secret(value)


def _client(
    model_url: str | None,
    server: str | None,
    model: str,
    key: Secret | None,
    *,
    stream: bool,
    idle: float,
    relays: set[str],
) -> ChatClient:
    url = model_url or (SERVERS[server].url if server else None)
    if url is None:
        raise click.UsageError("give the model server's --model-url, or --server")
    try:
        client = ChatClient(url, model, key=key, stream=stream, idle=idle)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--model-url") from None
    if any(client.url == r or client.url.startswith(r + "/") for r in relays):
        raise click.BadParameter(
            "that is the relay: --model-url names the model server, and --relay the relay",
            param_hint="--model-url",
        )
    return client


def _public_guide(state: HostState, relay: str | None) -> str | None:
    """The relay's channel guide, or None (so the short one) when it can't be fetched."""
    try:
        return fetch_guide(state, relay)["body"]
    except YuiError as exc:
        progress(f"no channel guide from the relay ({exc.message}); using the short guide")
        return None


@click.command(name="run-model")
@click.option(
    "--model-url",
    "--url",
    "model_url",
    cls=OldSpelling,
    metavar="URL",
    help="The model server's base URL, e.g. http://127.0.0.1:11434/v1 (a full "
    ".../chat/completions URL works too). The relay is --relay.",
)
@click.option("--model", required=True, metavar="NAME", help="The model, e.g. qwen2.5:7b.")
@click.option(
    "--server",
    type=click.Choice(list(SERVERS)),
    help="The kind of server: its usual URL when --model-url isn't given, and for openai and "
    "openrouter the usual key variable ($OPENAI_API_KEY, $OPENROUTER_API_KEY).",
)
@click.option(
    "--key-env",
    metavar="VAR",
    help="Read the server's key from $VAR at start. A key is never a flag's value.",
)
@click.option("--key-stdin", is_flag=True, help="Read the server's key from stdin's first line.")
@click.option(
    "--system",
    "system_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file of your own instructions, sent after the channel guide.",
)
@click.option(
    "--context",
    default=4096,
    show_default=True,
    type=click.IntRange(min=512),
    help="The model's window in tokens: the thread is cut to fit, and a window under three "
    "times the guide gets a short guide.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    help="The longest answer in tokens (default: the server's; 1024 are kept free).",
)
@click.option("--temperature", type=click.FloatRange(min=0), help="Sampling temperature.")
@click.option("--no-stream", is_flag=True, help="Ask for whole answers instead of a stream.")
@click.option(
    "--idle-timeout",
    default=300.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    help="Seconds the server may stay silent (between stream chunks, or before a whole "
    "answer) before the turn is asked again.",
)
@click.option(
    "--try",
    "try_text",
    metavar="TEXT",
    help="Ask the model TEXT once with the guide, print the answer and whether it drew a Yui "
    "screen; needs no pairing.",
)
@poll_options
@click.option(
    "--no-controls",
    is_flag=True,
    help="Serve no Controls. By default the person may read and edit the --system file from "
    "the app, and read the model and channels in words.",
)
@click.option("--note-after", default=90.0, hidden=True, type=click.FloatRange(min=0))
@allow_private_media_option
@bridge_agents_option
@state_option
@bridge_relay_option
@json_option
def run_model(
    model_url: str | None,
    model: str,
    server: str | None,
    key_env: str | None,
    key_stdin: bool,
    system_file: Path | None,
    context: int,
    max_tokens: int | None,
    temperature: float | None,
    no_stream: bool,
    idle_timeout: float,
    try_text: str | None,
    interval: float,
    poll_only: bool,
    no_controls: bool,
    note_after: float,
    allow_private_media: bool,
    agents: tuple[str, ...],
    state_path: str | None,
    relay: str | None,
    json_: bool,
) -> None:
    """Bridge a model on any OpenAI-compatible server (Ollama, llama.cpp, vLLM, LM Studio,
    OpenAI, OpenRouter): every message reaches it once, in order, with the thread as history.

    \b
    yui run-model --server ollama --model qwen2.5:7b
    yui run-model --model-url http://gpu-box:8000/v1 --model my-model --context 16384
    yui run-model --server openai --model gpt-4o-mini        (key from $OPENAI_API_KEY)
    yui run-model --server ollama --model qwen2.5:7b --try "plan my leg day"
    yui run-model --server ollama --model qwen2.5:7b --agent qwen   (only that agent)
    One line per event on stdout (turn, answer, reply, ack, retry, error); --json for JSON.
    It serves every agent of its state file unless --agent names some.
    """
    state = HostState(state_path)
    paired = state.snapshot().url
    relays = {relay_url(relay), *([paired.rstrip("/")] if paired else [])}
    key = read_key(key_env, key_stdin, server)
    client = _client(
        model_url, server, model, key, stream=not no_stream, idle=idle_timeout, relays=relays
    )
    try:
        system = system_file.read_text(encoding="utf-8") if system_file else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"can't read --system {system_file}: {exc}") from None
    options = ModelOptions(
        context=context,
        max_tokens=max_tokens,
        temperature=temperature,
        system=system,
        system_file=system_file,
        server=server,
        note_after=note_after,
    )
    if try_text is not None:
        _try(client, try_text, state, relay, options, json_)
        return
    progress(f"model {model} at {client.where}, window {context} tokens")
    run_bridge(
        state_path,
        relay,
        lambda session: ModelAgent(client, options, session, controls=not no_controls),
        BridgeOptions(interval=interval, live=not poll_only),
        json_,
        kind="run-model",
        agents=agents,
        allow_private_media=allow_private_media,
    )


def _try(
    client: ChatClient,
    text: str,
    state: HostState,
    relay: str | None,
    options: ModelOptions,
    json_: bool,
) -> None:
    """`--try`: one answer streamed to stdout, then one line on whether it drew a screen."""
    guide = _public_guide(state, relay)
    shown: list[str] = []

    def out(piece: str) -> None:
        if not json_:
            shown.append(piece)
            show(piece, nl=False)

    try:
        tried = try_model(client, text, guide=guide, options=options, out=out)
    except ModelUnavailable as exc:
        raise Unreachable(exc.reason, hint="is the model server running?") from None
    except ModelRefused as exc:
        raise YuiError(f"the model couldn't answer: {exc.reason}") from None
    facts = {
        "model": client.model,
        "seconds": round(tried.seconds, 1),
        "streamed": tried.streamed,
        "finish": tried.finish,
        "guide": "full" if tried.full_guide else "short",
    }
    if json_:
        record = {"text": tried.text, "screen": tried.screen, "verdict": tried.verdict, **facts}
        emit(record, "", json_=True)
        return
    how = "streamed" if tried.streamed else "not streamed"
    start = "" if "".join(shown).endswith("\n") else "\n"
    about = f"{client.model}, {facts['seconds']} s, {how}, {facts['guide']} guide"
    show(f"{start}-- {tried.verdict} ({about})")
