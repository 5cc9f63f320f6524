"""The bridges: `run-webhook` (any agent that answers an HTTP POST), and the example agent.

A secret never comes from a command line, which every local user reads in `ps`: the webhook's
comes from $YUI_WEBHOOK_SECRET or a file only its owner can read (`--secret-file`).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import click
from rich.logging import RichHandler

from bridges.client.relay import is_http_url
from bridges.engine.bridge import BridgeOptions
from bridges.engine.serve import PluginFactory, serve
from bridges.media import remote
from state.errors import BadInput, YuiError
from state.host import HostState
from yui_cli.options import (
    allow_private_media_option,
    bridge_agents_option,
    host_url_option,
    json_option,
    poll_options,
    state_option,
)
from yui_cli.output import CleanLogs, console, emit

SECRET_ENV = "YUI_WEBHOOK_SECRET"


def _short(ids: Any) -> str:
    return ",".join(str(i)[:8] for i in ids or [])


HUMAN: dict[str, Callable[[dict[str, Any]], str]] = {
    "start": lambda e: (
        f"serving {', '.join('@' + a for a in e['agents']) or 'no agent yet'} as {e['connector']}"
    ),
    "agent": lambda e: f"now serving @{e['agent']}",
    "turn": lambda e: f"turn    @{e['agent']}  {len(e['turn'])} row(s) {_short(e['turn'])}",
    "command": lambda e: f"command @{e['agent']}  {e['body'][:60]}",
    "answer": lambda e: f"answer  @{e['agent']}  {len(e['replies'])} reply(ies)",
    "answered": lambda e: f"already answered before a restart: @{e['agent']} {_short(e['ids'])}",
    "reply": lambda e: (
        f"reply   {e['id'][:8]} written" + (" (an earlier try had landed)" if e["resent"] else "")
    ),
    "ack": lambda e: f"ack     {len(e['ids'])} row(s) handled",
    "stop": lambda e: f"stop    @{e['agent']}  {e['dropped']} row(s) dropped",
    "discarded": lambda e: f"late answer discarded (stopped): @{e['agent']}",
    "retry": lambda e: (
        f"retry   {e['what']}{' @' + e['agent'] if e.get('agent') else ''} "
        f"in {e['wait']} s: {e['reason']}"
    ),
    "error": lambda e: f"error   {e['reason']}",
    "bye": lambda e: "bye",
    "gated": lambda e: (
        f"gated   @{e['agent']}  the app can't draw {', '.join(e['presets'])} yet: sent as words"
    ),
    "status": lambda e: f"status  @{e['agent']}  {e['body']}",
    "controls": lambda e: (
        f"controls @{e['agent']}  serves {', '.join(e['sections']) or 'no Controls'}"
    ),
    "control": lambda e: (
        f"control @{e['agent']}  {e.get('op') or '?'} {e.get('section') or ''} "
        + ("ok" if e["ok"] else f"refused: {e['error']}")
    ),
    "media": lambda e: (
        f"media   {e['id'][:8]} {len(e['stored'])} stored"
        + "".join(f"; left as written: {left['reason']}" for left in e["left"])
    ),
    "live": lambda e: (
        "live feed up"
        if e["up"]
        else f"live feed down ({e['reason']}); catching up every few seconds"
    ),
}


def _printer(json_: bool) -> Callable[[dict[str, Any]], None]:
    def show(event: dict[str, Any]) -> None:
        if json_:
            emit(event, "", json_=True)
        else:
            line = HUMAN.get(event["event"], lambda e: json.dumps(e, default=str))(event)
            emit(event, f"{event['at'][11:19]}  {line}", json_=False)

    return show


def run_bridge(
    state_path: str | None,
    url: str | None,
    make_plugin: PluginFactory,
    options: BridgeOptions,
    json_: bool,
    *,
    kind: str = "",
    agents: tuple[str, ...] = (),
    allow_private_media: bool = False,
) -> None:
    """Run one bridge of `kind` on this state file, for the `agents` named or every one,
    until SIGTERM or Ctrl-C (a clean stop and a bye; Ctrl-C then exits 130), its events on
    stdout and its logs on stderr (every record cleaned of control sequences: they quote what
    agents and the relay sent)."""
    if console().is_terminal:
        handler: logging.Handler = RichHandler(console=console(), show_path=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:  # a log file or journald: whole lines, easy to grep
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(CleanLogs())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    if allow_private_media:
        remote.allow_private_media()
    serve(HostState(state_path), url, make_plugin, _printer(json_), options, kind=kind, only=agents)


class SecretOnCommandLine(click.UsageError):
    """A secret given as a flag's value: one line saying what to do instead (the usage
    around it would bury that line)."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True, file=file)


def _refuse_secret(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        raise SecretOnCommandLine(
            f"--secret takes no value: every local user can read a command line in ps; "
            f"set ${SECRET_ENV} or use --secret-file PATH"
        )


def webhook_secret(path: Path | None) -> str | None:
    """The secret that signs every POST: the file's (`--secret-file`, read once, its trailing
    newline stripped), else $YUI_WEBHOOK_SECRET, else none. A file other users may read or
    write is refused, as ssh refuses such a key: they could read the secret or plant theirs."""
    if path is None:
        return os.environ.get(SECRET_ENV) or None
    try:
        with path.open("rb") as f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            if mode & 0o077:
                raise BadInput(
                    f"--secret-file {path} is open to other users (mode {mode:04o}): "
                    f"chmod 600 {path}"
                )
            raw = f.read()
    except OSError as exc:
        raise BadInput(f"can't read --secret-file {path}: {exc.strerror}") from None
    try:
        secret = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise BadInput(f"--secret-file {path} is not UTF-8 text") from None
    if not secret:
        raise BadInput(f"--secret-file {path} is empty")
    return secret


def _webhook_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The webhook's URL, refused as it is taken when it has no http(s) scheme or no host
    (`127.0.0.1:8787`): a usage error of one line, not a traceback."""
    if not is_http_url(value):
        raise click.BadParameter(
            f"{value!r} is not an http:// or https:// URL with a host, e.g. http://127.0.0.1:8787",
            param_hint="--webhook",
        )
    return value


@click.command(name="run-webhook")
@click.option(
    "--webhook",
    envvar="YUI_WEBHOOK_URL",
    callback=_webhook_url,
    required=True,
    metavar="URL",
    help="Your agent's endpoint ($YUI_WEBHOOK_URL): one POST per turn.",
)
@click.option(
    "--secret-file",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help=f"Sign every POST with the secret in this file (mode 600, read once; else "
    f"${SECRET_ENV}): x-yui-signature and Standard Webhooks headers.",
)
@click.option("--secret", hidden=True, expose_value=False, callback=_refuse_secret)
@click.option(
    "--timeout", default=300.0, show_default=True, help="Seconds your agent gets per turn."
)
@poll_options
@click.option(
    "--controls",
    is_flag=True,
    help="Serve Controls: ask the webhook for its report (GET with x-yui-kind: controls) and "
    "forward each checked request as its own signed POST (x-yui-kind: control).",
)
@allow_private_media_option
@bridge_agents_option
@state_option
@host_url_option
@json_option
def run_webhook(
    webhook: str,
    secret_file: Path | None,
    timeout: float,
    interval: float,
    poll_only: bool,
    controls: bool,
    allow_private_media: bool,
    agents: tuple[str, ...],
    state_path: str | None,
    url: str | None,
    json_: bool,
) -> None:
    """Bridge an agent that answers an HTTP POST: every message reaches it once, in order.

    \b
    Each turn is POSTed as JSON (agent, turn, text, messages, guide) with an x-yui-turn key.
    Answer {"reply": ...}, {"replies": [...]}, a JSON array or plain text; an empty 2xx is
    a handled turn with no reply; anything else is retried with growing waits.
    One line per event on stdout (turn, answer, reply, ack, retry, error); --json for JSON.
    It serves every agent of its state file unless --agent names some.
    """
    from bridges.webhook.plugin import WebhookAgent

    secret = webhook_secret(secret_file)
    try:
        plugin = WebhookAgent(webhook, secret=secret, timeout=timeout, controls=controls)
    except ValueError as exc:  # the secret's shape (the URL's was checked as it was taken)
        raise BadInput(str(exc)) from None
    options = BridgeOptions(interval=interval, live=not poll_only)
    run_bridge(
        state_path,
        url,
        lambda session: plugin,
        options,
        json_,
        kind="run-webhook",
        agents=agents,
        allow_private_media=allow_private_media,
    )


@click.command(name="example-agent")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8787,
    show_default=True,
    help="Port the example listens on.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address the example listens on."
)
def example_agent(port: int, host: str) -> None:
    """Run the example webhook agent: it answers "hi" with three buttons and names your tap.

    Then, in another terminal: yui run-webhook --webhook http://127.0.0.1:8787
    """
    from bridges.webhook.example import make_server, run

    try:  # bound before saying it runs: a busy port is one line, not a banner and a traceback
        server = make_server(port, host)
    except OSError as exc:
        raise YuiError(
            f"the example agent can't listen on {host}:{port}: {exc.strerror or exc}",
            hint="is another one running? pick a free port with --port",
        ) from None
    console().print(f"example agent on http://{host}:{server.server_port}", markup=False)
    run(server)
