"""Where a host's pictures and videos go, and the message that shows one.

Media never travels inside a message row: it is stored in the relay's private bucket at
`<user>/<agent>/<from>/<name>` (`from` is `agent` or `user`) and a message carries a link
signed for 7 days (the app re-signs an expired one with the person's own token).
"""

from __future__ import annotations

from bridges.client.host import HostSession
from bridges.client.storage import Progress
from bridges.media.files import Media
from state.errors import MediaRefused, Unreachable
from yuilines.fences import build_fence

SIGN_SECONDS = 7 * 24 * 3600


def object_path(user_id: str, agent_id: str, side: str, name: str) -> str:
    return f"{user_id}/{agent_id}/{side}/{name}"


def host_store(
    session: HostSession, path: str, media: Media, progress: Progress | None = None
) -> str:
    """Store `media` as the host at `path` (already there is fine: an earlier try) and sign it.
    A refusal first asks the relay whether this host is cut off, so a suspended host stops
    with `Suspended` rather than a refused upload."""
    try:
        session.bucket.upload(path, media.data, media.type.mime, progress, name=media.name)
        link = session.bucket.sign(path, SIGN_SECONDS)
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
