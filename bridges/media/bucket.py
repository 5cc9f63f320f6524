"""The yui-media bucket: where pictures and videos are stored, and the message that shows one.

Media never travels inside a message row: it is stored in the relay's private bucket at
`<user>/<agent>/<from>/<name>` (`from` is `agent` or `user`) and a message carries a link
signed for 7 days (the app re-signs an expired one with the person's own token).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from urllib.parse import quote

import requests

from bridges.client.host import HostSession
from bridges.client.relay import raise_for_status, retryable
from bridges.media.files import Media, MediaRefused
from state.errors import Unreachable
from yuilines.fences import build_fence

BUCKET = "yui-media"
SIGN_SECONDS = 7 * 24 * 3600
UPLOAD_TIMEOUT = 120.0  # seconds per socket operation of an upload

Progress = Callable[[int], None]  # bytes sent so far
StorageCall = Callable[..., requests.Response]  # (method, path, *, body, data, headers, timeout)


def object_path(user_id: str, agent_id: str, side: str, name: str) -> str:
    return f"{user_id}/{agent_id}/{side}/{name}"


class _Upload(io.BytesIO):
    """The bytes being sent, telling `progress` how far the upload has got."""

    def __init__(self, data: bytes, progress: Progress | None) -> None:
        super().__init__(data)
        self._progress = progress

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if self._progress is not None:
            self._progress(self.tell())
        return chunk


def _check(response: requests.Response, what: str) -> None:
    """A Storage answer: fine, try again later (`Unreachable`), or refused for good."""
    status = response.status_code
    if status < 300:
        return
    if status == 401 or retryable(status):
        raise_for_status(response, what)
    try:
        reason = response.json().get("message") or response.reason
    except (ValueError, AttributeError):
        reason = response.reason
    raise MediaRefused(f"{what}: the relay refused it: {status} {reason}", status=status)


def upload(call: StorageCall, path: str, media: Media, progress: Progress | None = None) -> bool:
    """Store `media` at `path`. False when it was already there: a path is never reused, so
    that is an earlier try that landed."""
    response = call(
        "POST",
        f"/{BUCKET}/{quote(path)}",
        data=_Upload(media.data, progress),
        headers={"content-type": media.type.mime},
        timeout=UPLOAD_TIMEOUT,
    )
    if response.status_code == 409:
        return False
    _check(response, f"uploading {media.name}")
    return True


def sign(call: StorageCall, base_url: str, path: str) -> str | None:
    """A link to the object for 7 days, or None when there is no such object (to this caller)."""
    response = call("POST", f"/sign/{BUCKET}/{quote(path)}", body={"expiresIn": SIGN_SECONDS})
    if response.status_code == 404:
        return None
    _check(response, f"signing {path}")
    return f"{base_url}/storage/v1{response.json()['signedURL']}"


def download(call: StorageCall, path: str) -> bytes | None:
    """The object's bytes, or None when it is gone (or not visible to this caller)."""
    response = call("GET", f"/authenticated/{BUCKET}/{quote(path)}", timeout=UPLOAD_TIMEOUT)
    if response.status_code in (400, 404):
        return None
    _check(response, f"downloading {path}")
    return response.content


def host_store(
    session: HostSession, path: str, media: Media, progress: Progress | None = None
) -> str:
    """Store `media` as the host at `path` (already there is fine: an earlier try) and sign it.
    A refusal first asks the relay whether this host is cut off, so a suspended host stops
    with `Suspended` rather than a refused upload."""
    try:
        upload(session.storage, path, media, progress)
        link = sign(session.storage, session.client.url, path)
    except MediaRefused as exc:
        if exc.status == 403:
            session.connect("heartbeat")  # raises Suspended or Refused when cut off
        raise
    if link is None:
        raise Unreachable(f"{path} was stored but can't be signed yet")
    return link


def media_line(kind: str, url: str, caption: str | None = None) -> str:
    """`image <url> "caption"` (or `video …`): the caption quoted, so no word of it can read
    as a flag, a key or a comment."""
    line = f"{kind} {url.replace(' ', '%20')}"
    words = " ".join((caption or "").split())
    if words:
        line += ' "' + words.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return line


def media_message(kind: str, url: str, caption: str | None = None) -> str:
    """A message that shows one picture or video: a ```yui fence holding its line."""
    return build_fence([media_line(kind, url, caption)]).rstrip("\n")
