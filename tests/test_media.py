"""`yui media` against the real relay: the bytes decide the type, refusals cost no upload, and
the message shows the picture through a signed link that serves the very same bytes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from rich.console import Console

from bridges.media.files import MAX_BYTES, media_from, sniff
from state.errors import MediaRefused
from tests.helpers.bridge import Machine
from tests.helpers.cli import ROOT
from tests.helpers.http import LoopbackServer
from tests.helpers.media import (
    GIF,
    HEIC,
    JPEG,
    MOV,
    MP4,
    PNG,
    WEBM,
    WEBP,
    fetch_signed,
    iso_box,
    objects,
)
from tests.helpers.relay import LocalRelay, Person
from yui_cli import media_cmd
from yuilines.fences import find_fences
from yuilines.parser import parse

TYPES = [
    (PNG, "image/png", "png", "image"),
    (JPEG, "image/jpeg", "jpg", "image"),
    (GIF, "image/gif", "gif", "image"),
    (WEBP, "image/webp", "webp", "image"),
    (HEIC, "image/heic", "heic", "image"),
    (MP4, "video/mp4", "mp4", "video"),
    (MOV, "video/quicktime", "mov", "video"),
]


@pytest.fixture
def thread(relay: LocalRelay, machine: Machine) -> tuple[Person, dict[str, Any], str]:
    """A person, their agent paired with the machine, and the agent's media folder."""
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    return person, agent, f"{person.id}/{agent['id']}/"


def media(machine: Machine, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """`yui media` as a real process (stdin as bytes)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bin" / "yui"), "media", *args],
        env=machine.env(),
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def sent(result: subprocess.CompletedProcess) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def shown(person: Person, agent: dict[str, Any], message_id: str) -> dict[str, Any]:
    """The props of the one picture or video the message shows, as the app's parser reads it."""
    (row,) = [r for r in person.thread(agent) if r["id"] == message_id]
    (fence,) = find_fences(row["body"])
    (op,) = parse(fence.body(row["body"]))
    return {"preset": op["preset"], **op["props"]}


@pytest.mark.parametrize(("data", "mime", "ext", "kind"), TYPES, ids=[t[2] for t in TYPES])
def test_each_allowed_type_is_known_by_its_bytes(data: bytes, mime: str, ext: str, kind: str):
    found = sniff(data[:16])
    assert found is not None and (found.mime, found.ext, found.kind) == (mime, ext, kind)


@pytest.mark.parametrize(
    "data",
    [b"hello, not a picture", WEBM, iso_box(b"avif", b"avif"), iso_box(b"M4A ", b"M4A "), b""],
    ids=["text", "webm", "avif", "m4a", "empty"],
)
def test_anything_else_is_refused_with_what_would_work(data: bytes) -> None:
    assert sniff(data[:16]) is None
    with pytest.raises(MediaRefused) as refused:
        media_from(data, "x")
    said = f"{refused.value.message} {refused.value.hint}"
    assert "mp4 (H.264) or mov" in said
    assert ("iPhone" in said) == (data is WEBM)


@pytest.mark.parametrize(("data", "mime", "ext", "kind"), TYPES, ids=[t[2] for t in TYPES])
def test_each_type_is_stored_and_shown_by_a_signed_link(
    relay, machine, thread, tmp_path, data: bytes, mime: str, ext: str, kind: str
) -> None:
    person, agent, folder = thread
    file = tmp_path / "upload.bin"  # the name says nothing
    file.write_bytes(data)
    result = sent(media(machine, str(file), "Look at this", "--json"))
    assert result["type"] == mime and not result["queued"]
    assert result["path"].startswith(f"{folder}agent/") and result["path"].endswith(f".{ext}")
    assert objects(relay, folder) == [(result["path"], mime, len(data))]
    props = shown(person, agent, result["id"])
    assert props == {"preset": kind, "src": result["url"], "caption": "Look at this"}
    served = fetch_signed(props["src"])
    assert served.status_code == 200 and served.content == data
    assert served.headers["content-type"] == mime


def test_a_png_named_jpg_goes_as_png(relay, machine, thread, tmp_path) -> None:
    person, agent, _ = thread
    file = tmp_path / "holiday.jpg"
    file.write_bytes(PNG)
    result = sent(media(machine, str(file), "--json"))
    assert result["type"] == "image/png" and result["path"].endswith(".png")
    served = fetch_signed(shown(person, agent, result["id"])["src"])
    assert served.headers["content-type"] == "image/png" and served.content == PNG


def test_refusals_come_before_any_upload(relay, machine, thread, tmp_path) -> None:
    person, agent, folder = thread
    text = tmp_path / "note.png"
    text.write_text("just words")
    webm = tmp_path / "clip.webm"
    webm.write_bytes(WEBM + bytes(64))
    big = tmp_path / "big.bin"
    big.write_bytes(MP4)
    with big.open("r+b") as f:
        f.truncate(MAX_BYTES + 1)  # sparse: 50 MB + 1 byte on disk costs nothing
    for file, says, works in (
        (text, "not a picture or video", "mp4 (H.264) or mov"),
        (webm, "webm", "mp4 (H.264) or mov"),
        (big, "52,428,801 bytes", "smaller"),
    ):
        result = media(machine, str(file))
        error = result.stderr.decode()
        assert result.returncode == 1 and says in error and works in error, error
    assert objects(relay, folder) == []
    assert person.thread(agent) == [] and not machine.state().get("outbox")


def test_stdin_and_a_caption_that_reads_as_words(relay, machine, thread) -> None:
    person, agent, _ = thread
    caption = 'Dinner | mood=great +yum # "best" \\ one'
    result = sent(media(machine, "-", caption, "--json", stdin=JPEG))
    props = shown(person, agent, result["id"])
    assert props == {"preset": "image", "src": result["url"], "caption": caption}
    assert fetch_signed(result["url"]).content == JPEG


@pytest.fixture
def web() -> Iterator[str]:
    """A web server with a video at /clip (no extension) and a page at /page.mp4."""
    pages = {"/clip": (MP4, "video/mp4"), "/page.mp4": (b"<html>hi</html>", "text/html")}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body, kind = pages.get(self.path, (b"", "text/plain"))
            self.send_response(200 if body else 404)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with LoopbackServer(Handler) as server:
        yield server.url


def test_a_remote_video_is_downloaded_and_stored_here(relay, machine, thread, web) -> None:
    person, agent, folder = thread
    result = sent(media(machine, f"{web}/clip", "Reel", "--json", "--allow-private-media"))
    assert result["type"] == "video/mp4" and result["path"].endswith(".mp4")
    props = shown(person, agent, result["id"])
    assert props["preset"] == "video" and props["src"] == result["url"] and web not in props["src"]
    assert fetch_signed(props["src"]).content == MP4
    for url in (f"{web}/page.mp4", f"{web}/missing.png"):
        refused = media(machine, url, "--allow-private-media")
        assert refused.returncode == 1, refused.stderr.decode()
    assert len(objects(relay, folder)) == 1


def test_the_message_is_a_hand_over(relay, machine, thread) -> None:
    person = thread[0]
    phone = relay.fn("yui-push", {"action": "register", "token": "ab" * 32}, person.token)
    assert phone.status_code == 200
    result = sent(media(machine, "-", "--json", stdin=PNG))
    pushes = relay.rest(
        "GET",
        "yui_notifications",
        person.token,
        params={"select": "body", "message_id": f"eq.{result['id']}"},
    ).json()
    assert pushes == [{"body": "Coach has something for you in Yui"}]


def test_no_progress_bar_off_a_terminal(relay, machine, thread) -> None:
    result = media(machine, "-", "--json", stdin=PNG + bytes(3 * 1024 * 1024))
    assert result.returncode == 0 and result.stderr == b""


def test_a_progress_bar_on_a_terminal_for_a_large_file(monkeypatch) -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    monkeypatch.setattr(media_cmd, "console", lambda: terminal)
    with media_cmd.upload_bar(100) as small:
        assert small is None
    with media_cmd.upload_bar(4 * media_cmd.BAR_FROM) as bar:
        assert bar is not None
        bar(2 * media_cmd.BAR_FROM)
    assert "uploading" in screen.getvalue()
