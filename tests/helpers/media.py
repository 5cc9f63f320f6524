"""Small real media files for tests, and a look at what the relay's bucket holds."""

from __future__ import annotations

import base64
import re
import struct

import requests

from tests.helpers.relay import LocalRelay

# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e5273e0c0000000049454e44ae426082"
)
# A 1x1 JPEG.
JPEG = bytes.fromhex(
    "ffd8ffe000104a46494600010101004800480000ffdb004300030202020203020202030303030406040404040408"
    "0606050609080a0a090809090a0c0f0c0a0b0e0b09090d110d0e0f101011100a0c12131210130f101010ffc9000b"
    "080001000101011100ffcc000600101005ffda0008010100003f00d2cf20ffd9"
)
# A 1x1 GIF.
GIF = base64.b64decode("R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")
# A 1x1 lossless WEBP.
WEBP = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
# A webm's EBML header: a real video format the phone can't play.
WEBM = bytes.fromhex("1a45dfa39f4286810142f7810142f2810442f381084282847765626d")


def iso_box(brand: bytes, *compatible: bytes) -> bytes:
    """An ISO base media file's first box (`ftyp`): what tells heic, mp4 and mov apart."""
    body = b"ftyp" + brand + b"\x00\x00\x00\x00" + b"".join(compatible)
    return struct.pack(">I", len(body) + 4) + body + b"\x00\x00\x00\x08free"


HEIC = iso_box(b"heic", b"mif1", b"heic")
MP4 = iso_box(b"isom", b"isom", b"iso2", b"avc1", b"mp41")
MOV = iso_box(b"qt  ", b"qt  ")

SIGNED = re.compile(r"https?://\S+/storage/v1/object/sign/yui-media/(\S+?)\?token=[\w.-]+")


def signed_path(link: str) -> str:
    """The object a signed link points at; the link must be nothing but a signed link."""
    found = SIGNED.fullmatch(link)
    assert found, f"not a signed link: {link}"
    return found.group(1)


def objects(relay: LocalRelay, prefix: str) -> list[tuple[str, str, int]]:
    """(name, mime type, size) of every object under `prefix`, by name."""
    return relay.sql(
        "select name::text, mime_type, size from storage.objects"
        " where bucket_id = 'yui-media' and starts_with(name, %s) order by name",
        (prefix,),
    )


def fetch_signed(url: str) -> requests.Response:
    """A signed link as the app opens it: no key, no token but the link's own."""
    return requests.get(url, timeout=30)
