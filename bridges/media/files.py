"""Pictures and videos (YUI-21): what the bytes are and where they come from.

The bytes decide the type, never the name: extensions lie, and the bucket trusts the
content-type it is sent. The 50 MB cap and the type are checked before a byte is uploaded
(`bridges.media.bucket`), so a refusal costs nothing and leaves nothing behind. Remote media
comes from public addresses only (`bridges.media.remote`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

import urllib3

from bridges.media.remote import opened, where
from state.errors import MediaRefused

MAX_BYTES = 50 * 1024 * 1024  # the bucket's cap
FETCH_TIMEOUT = 60.0  # seconds a remote picture gets to arrive, whole
WHAT_WORKS = "send a jpg, png, webp, gif or heic picture, or an mp4 (H.264) or mov video"


@dataclass(frozen=True)
class MediaType:
    mime: str
    ext: str
    kind: str  # the Yui Lines preset that shows it: image or video


JPEG = MediaType("image/jpeg", "jpg", "image")
PNG = MediaType("image/png", "png", "image")
GIF = MediaType("image/gif", "gif", "image")
WEBP = MediaType("image/webp", "webp", "image")
HEIC = MediaType("image/heic", "heic", "image")
MP4 = MediaType("video/mp4", "mp4", "video")
MOV = MediaType("video/quicktime", "mov", "video")

HEIC_BRANDS = (b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1")
NOT_VIDEO_BRANDS = (b"avif", b"avis", b"M4A ", b"M4B ", b"M4P ", b"crx ")  # AVIF, audio, raw
EBML = b"\x1a\x45\xdf\xa3"  # webm and mkv


def sniff(head: bytes) -> MediaType | None:
    """The type the first bytes say, or None for anything Yui doesn't show."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return WEBP
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in HEIC_BRANDS:
            return HEIC
        if brand == b"qt  ":
            return MOV
        if brand not in NOT_VIDEO_BRANDS and len(brand) == 4:
            return MP4
    return None


def refusal(head: bytes, name: str) -> MediaRefused:
    """Why `name` can't be sent, and what would work."""
    if head.startswith(EBML):
        return MediaRefused(
            f"{name} is webm (or mkv) video, which doesn't play on iPhone",
            hint="send mp4 (H.264) or mov instead: ffmpeg -i in.webm -c:v libx264 -c:a aac out.mp4",
        )
    return MediaRefused(f"{name} is not a picture or video Yui can show", hint=WHAT_WORKS)


def too_big(name: str, size: int) -> MediaRefused:
    return MediaRefused(
        f"{name} is {size:,} bytes; the limit is {MAX_BYTES:,} (50 MB)",
        status=413,
        hint="send a smaller or shorter version",
    )


@dataclass(frozen=True)
class Media:
    """Bytes ready to store: their type known and under the cap."""

    data: bytes
    type: MediaType
    name: str  # where they came from, for messages


def media_from(data: bytes, name: str) -> Media:
    """`data` checked: under the cap, and a type Yui shows."""
    if len(data) > MAX_BYTES:
        raise too_big(name, len(data))
    found = sniff(data[:16])
    if found is None:
        raise refusal(data[:16], name)
    return Media(data, found, name)


def read_file(path: Path) -> Media:
    """A local file, refused for its size before it is read."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise MediaRefused(f"{path} is not a file")
        if size > MAX_BYTES:
            raise too_big(str(path), size)
        with path.open("rb") as f:
            return media_from(f.read(MAX_BYTES + 1), str(path))
    except FileNotFoundError:
        raise MediaRefused(f"no file {path}") from None
    except OSError as exc:
        raise MediaRefused(f"can't read {path}: {exc.strerror}") from None


def read_stream(stream: BinaryIO, name: str = "stdin") -> Media:
    """Bytes from a pipe: one byte over the cap is enough to refuse."""
    return media_from(stream.read(MAX_BYTES + 1), name)


def local_path(source: str) -> Path:
    """The file a path, `~/…` or `file://…` names."""
    if source.startswith("file://"):
        return Path(unquote(urlsplit(source).path))
    return Path(source).expanduser()


def load(source: str, stdin: BinaryIO) -> Media:
    """What `yui media` was given: `-` (stdin), an http(s) URL (downloaded) or a local file."""
    if source == "-":
        return read_stream(stdin)
    if source.startswith(("http://", "https://")):
        return fetch(source)
    return read_file(local_path(source))


def fetch(url: str, *, timeout: float = FETCH_TIMEOUT) -> Media:
    """A remote picture or video, downloaded to be stored in the bucket: from a public address
    (every redirect too), bounded in size and in time; anything that isn't media Yui shows is
    refused."""
    deadline = time.monotonic() + timeout
    try:
        with opened(url, timeout=min(timeout, 20.0)) as response:
            if response.status != 200:
                raise MediaRefused(f"{where(url)} answered {response.status}")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BYTES:
                raise too_big(where(url), int(declared))
            chunks, size = [], 0
            for chunk in response.stream(65536):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_BYTES:
                    raise too_big(where(url), size)
                if time.monotonic() > deadline:
                    raise MediaRefused(f"{where(url)} took over {timeout:g} s")
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        raise MediaRefused(f"can't fetch {where(url)} ({type(exc).__name__})") from None
    return media_from(b"".join(chunks), where(url))
