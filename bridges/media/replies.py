"""Media in the bridges' messages, both ways.

Out (`host_media`, run by `write_outbox` just before a row's POST): in every ```yui fence of a
reply, a local media file (an absolute path, `~/…` or `file://…`) anywhere in a line, and a
remote media URL on a media line (image, gallery, video, compare, storyboard, page, card), is
stored in the bucket and swapped for a signed link. A link to a web page stays a link. The
rewritten row is saved back into the outbox before it is sent, so a retry never uploads twice;
objects are named after the row and the source's place in it (`<row id>-<n>.<ext>`), so even a
crash between the upload and that save only finds the object there and signs it. When the relay
can't take an upload the row waits in the outbox (`Unreachable`); a source that can't be used
(missing, not media, too big, a remote host that fails) stays as written and is reported.

In (`localize`, before an agent is asked): a person's photo arrives as a bucket path in an event
(`[yui] c1 camera photo=<user>/<agent>/user/<name>`). It is downloaded into a private cache
(folder 0700, files 0600) and the agent reads the local path instead, in the line and in the
event's value; the row in the relay stays as it is.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bridges.client.host import HostSession
from bridges.client.relay import SIGNED
from bridges.media.bucket import SIGN_SECONDS, host_store, object_path
from bridges.media.files import fetch, local_path, read_file
from bridges.media.remote import where
from state.errors import MediaRefused
from state.host import OutboxItem
from state.paths import ensure_private_dir, yui_home
from yuilines.events import EventLineError, format_event_line, parse_event_line
from yuilines.fences import find_fences, splice
from yuilines.parser import parse
from yuilines.tokens import tokenize

MEDIA_PRESETS = frozenset(("image", "gallery", "video", "compare", "storyboard", "page", "card"))
LOCAL_EXTS = frozenset(("jpg", "jpeg", "png", "webp", "gif", "heic", "mp4", "m4v", "mov"))
# Generated pictures often come without an extension from these hosts.
GENERATOR_HOSTS = ("fal.media", "fal.run", "fal.ai", "replicate.delivery", "oaidalleapiprodscus")
SECRET_FOLDERS = frozenset((".ssh", ".gnupg", ".aws", "gcloud", "Keychains"))
PERSON_PATH = re.compile(r"[0-9a-f-]{36}/[0-9a-f-]{36}/user/[A-Za-z0-9._-]{1,80}")

Emit = Callable[..., None]

log = logging.getLogger("yui.media")


# --- out: replies ---------------------------------------------------------------------------


def host_media(session: HostSession, item: OutboxItem, emit: Emit) -> OutboxItem:
    """The queued row with its media stored and linked (the same item when there is none)."""
    body = item.row.get("body")
    if item.row.get("kind") != "text" or not isinstance(body, str):
        return item
    fences = find_fences(body)
    if not fences:
        return item
    hoster = _Hoster(session, item.row)
    swapped = {}
    for fence in fences:
        inner = fence.body(body)
        new = _rewrite_fence(inner, hoster)
        if new != inner:
            swapped[fence] = (
                body[fence.start : fence.body_start] + new + body[fence.body_end : fence.end]
            )
    if hoster.stored or hoster.left:
        emit("media", id=item.id, stored=hoster.stored, left=hoster.left)
    if not swapped:
        return item
    return dataclasses.replace(item, row={**item.row, "body": splice(body, swapped)})


class _Hoster:
    """Stores each source of one row once, under a name fixed by the row and its place."""

    def __init__(self, session: HostSession, row: dict[str, Any]) -> None:
        self.session = session
        self.row = row
        self.links: dict[str, str | None] = {}
        self.stored: list[str] = []  # object paths
        self.left: list[dict[str, str]] = []  # sources left as written, and why

    def link(self, source: str, local: bool) -> str | None:
        if source not in self.links:
            self.links[source] = self._store(source, local, len(self.links) + 1)
        return self.links[source]

    def _store(self, source: str, local: bool, n: int) -> str | None:
        try:
            media = read_file(local_path(source)) if local else fetch(source)
        except MediaRefused as exc:
            if not local:  # why, for whoever reads the bridge's log (never the URL's query)
                log.warning("remote media left as written: %s", exc.message)
            self.left.append({"source": source if local else where(source), "reason": exc.message})
            return None
        name = f"{self.row['id']}-{n}.{media.type.ext}"
        path = object_path(self.row["user_id"], self.row["agent_id"], "agent", name)
        try:
            link = self.session.bucket.sign(path, SIGN_SECONDS)
            link = link or host_store(self.session, path, media)
        except MediaRefused as exc:  # the relay won't store it (quota, type): the words stay
            self.left.append({"source": media.name, "reason": exc.message})
            return None
        self.stored.append(path)
        return link


def _rewrite_fence(text: str, hoster: _Hoster) -> str:
    media_lines = _media_lines(text)
    lines = text.split("\n")
    return "\n".join(
        _rewrite_line(line, n in media_lines, hoster) for n, line in enumerate(lines, start=1)
    )


def _media_lines(text: str) -> set[int]:
    """The lines (1-based) that add or patch a media preset, as the parser reads them."""
    made: dict[str, str] = {}
    lines = set()
    for op in parse(text):
        if op["op"] == "add":
            made[op["id"]] = op["preset"]
            if op["preset"] in MEDIA_PRESETS:
                lines.add(op["line"])
        elif op["op"] == "patch" and made.get(op["target"], op["target"]) in MEDIA_PRESETS:
            lines.add(op["line"])
    return lines


def _rewrite_line(line: str, media_line: bool, hoster: _Hoster) -> str:
    """The line with each usable source swapped for its link; everything else byte for byte."""
    tokens, _ = tokenize(line)
    edits: list[tuple[int, int, str]] = []
    for token in tokens:
        raw = token.raw
        for text, quoted in token.parts:
            for piece in text.split("|"):
                local = _is_local(piece)
                if not local and not (media_line and _is_remote_media(piece)):
                    continue
                link = hoster.link(piece, local)
                if link is None:
                    continue
                if quoted and len(token.parts) == 1 and text == piece:  # a quoted path alone
                    raw = (f"{token.key}=" if token.key else "") + link
                elif piece in raw:
                    raw = raw.replace(piece, link, 1)
        if raw != token.raw:
            edits.append((token.start, token.start + len(token.raw), raw))
    for start, end, new in reversed(edits):
        line = line[:start] + new + line[end:]
    return line


def _is_local(source: str) -> bool:
    """An existing media file named by an absolute path, `~/…` or `file://…`, outside the
    places secrets live."""
    if not (
        source.startswith(("~/", "file:///"))
        or (source.startswith("/") and not source.startswith("//"))
    ):
        return False
    path = local_path(source)
    if path.suffix.lower().lstrip(".") not in LOCAL_EXTS:
        return False
    return path.is_file() and not SECRET_FOLDERS & set(path.resolve().parts)


def _is_remote_media(source: str) -> bool:
    """An http(s) URL that names a media file (or a picture generator's output), and isn't
    already a link to this bucket."""
    if not source.startswith(("https://", "http://")) or SIGNED in source:
        return False
    parts = urlsplit(source)
    host = parts.hostname or ""
    if any(host == g or host.endswith("." + g) or host.startswith(g) for g in GENERATOR_HOSTS):
        return True
    return parts.path.rpartition(".")[2].lower() in LOCAL_EXTS


# --- in: the person's photos ----------------------------------------------------------------


def cache_dir() -> Path:
    """`$YUI_HOME/cache/media`, 0700 at every level the toolkit made."""
    cache = yui_home() / "cache"
    for folder in (cache, cache / "media"):
        ensure_private_dir(folder)
        folder.chmod(0o700)
    return cache / "media"


def localize(
    session: HostSession, agent_id: str, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The turn's rows with the person's photos its events name downloaded, and their local
    paths in each event's copy (its line and its value); the relay's rows stay as they are."""
    mine = f"{session.user_id}/{agent_id}/user/"
    local_rows = []
    for row in rows:
        meta = row.get("meta")
        if row.get("kind") == "event" and isinstance(meta, dict):
            local: dict[str, str] = {}
            value = _swap(meta.get("value"), mine, local, session)
            if local:
                row = {**row, "meta": {**meta, "value": value}, "body": _line(row, local)}
        local_rows.append(row)
    return local_rows


def _line(row: dict[str, Any], local: dict[str, str]) -> str:
    try:
        element_id, preset, value = parse_event_line(row["body"])
        return format_event_line(element_id, preset, _swap(value, "", local, None))
    except EventLineError:  # not an event line after all: the paths are swapped as words
        body = row["body"]
        for path, file in local.items():
            body = body.replace(path, file)
        return body


def _swap(value: Any, mine: str, local: dict[str, str], session: HostSession | None) -> Any:
    """`value` with each of the person's media paths in it (a whole string) made local."""
    if isinstance(value, dict):
        return {k: _swap(v, mine, local, session) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, mine, local, session) for v in value]
    if not isinstance(value, str) or not PERSON_PATH.fullmatch(value):
        return value
    if value not in local and session is not None and value.startswith(mine):
        file = _fetch_photo(session, value)
        if file is not None:
            local[value] = str(file)
    return local.get(value, value)


def _fetch_photo(session: HostSession, path: str) -> Path | None:
    """The object in the cache (mode 600), downloaded once; None when it is gone."""
    target = cache_dir() / path.replace("/", "-")
    if target.is_file():
        return target
    try:
        data = session.bucket.download(path)
    except MediaRefused:  # the relay won't give it: the agent reads the path as sent
        return None
    if data is None:
        return None
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target
