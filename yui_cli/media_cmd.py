"""`yui media`: a picture or video in an agent's thread, from a file, stdin or a URL."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

import click

from state.host import HostState
from yui_cli.options import (
    allow_private_media_option,
    file_completion,
    host_agent_option,
    host_url_option,
    json_option,
    state_option,
)
from yui_cli.output import console, emit, progress

BAR_FROM = 1024 * 1024  # bytes: smaller uploads are over before a bar would be read


@contextlib.contextmanager
def upload_bar(total: int) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr for a large upload; none for a small one or off a terminal."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    if total < BAR_FROM or not console().is_terminal:
        yield None
        return
    columns = (
        TextColumn("uploading"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console(), transient=True) as bar:
        task = bar.add_task("upload", total=total)
        yield lambda sent: bar.update(task, completed=sent)


@click.command(name="media")
@click.argument("source", metavar="FILE|URL", shell_complete=file_completion)
@click.argument("caption", required=False)
@host_agent_option
@allow_private_media_option
@state_option
@host_url_option
@json_option
def media_command(
    source: str,
    caption: str | None,
    agent: str | None,
    allow_private_media: bool,
    state_path: str | None,
    url: str | None,
    json_: bool,
) -> None:
    """Send a picture or video into an agent's thread (a hand-over: the phone buzzes).

    \b
    The bytes decide the type, not the name: jpg, png, webp, gif or heic pictures, mp4
    (H.264) or mov video; anything else (webm included) is refused before any upload, and so
    is a file over 50 MB. FILE "-" reads stdin; an http(s) URL is downloaded and stored here.
    The message links to it for 7 days (the app renews the link after that).
    """
    from bridges import send
    from bridges.media import files, remote

    remote.allow_private_media(allow_private_media)
    loaded = files.load(source, sys.stdin.buffer)
    with upload_bar(len(loaded.data)) as bar:
        result = send.send_media(HostState(state_path), loaded, caption, agent, url, bar)
    emit(
        result,
        f"{'queued' if result['queued'] else 'sent'} {result['type']} ({result['bytes']:,} "
        f"bytes) {result['id']} to @{result['agent']}",
        json_=json_,
    )
    if result["queued"]:
        progress("The picture is stored; its message waits in the outbox for the next bridge run.")
