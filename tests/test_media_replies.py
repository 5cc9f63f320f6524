"""Media in the bridges' replies: local files and remote media on media lines are stored in the
relay and swapped for signed links before the reply goes out; anything else stays as written;
a reply whose upload fails waits in the outbox and goes once the relay takes it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from bridges.client.host import HostSession
from bridges.media import remote
from bridges.media.files import media_from
from bridges.media.replies import host_media
from state.host import HostState, OutboxItem
from tests.helpers.bridge import FakeWebhook, Machine, reply
from tests.helpers.http import LoopbackServer
from tests.helpers.media import GIF, JPEG, PNG, SIGNED, fetch_signed, objects, signed_path
from tests.helpers.relay import LocalRelay, Person
from yuilines.fences import find_fences
from yuilines.parser import parse


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The agent's home folder: `~` for the bridge process."""
    folder = tmp_path / "agent-home"
    folder.mkdir()
    return folder


def say(person: Person, agent: dict[str, Any], body: str = "show me") -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id).status_code == 201
    return row_id


def agent_rows(person: Person, agent: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in person.thread(agent) if r["sender"] == "agent"]


def ops(body: str) -> list[dict[str, Any]]:
    (fence,) = find_fences(body)
    return parse(fence.body(body))


def test_local_media_reaches_the_person_as_signed_links(relay, machine, home, tmp_path) -> None:
    (home / "pic.png").write_bytes(PNG)
    photo = tmp_path / "shots" / "a.jpeg"
    photo.parent.mkdir()
    photo.write_bytes(JPEG)
    (tmp_path / "shots" / "b.gif").write_bytes(GIF)
    lines = [
        'image ~/pic.png "Dinner"',
        f"gallery Two {photo}|First file://{tmp_path}/shots/b.gif",
        'list "Links" https://example.com/page https://example.com/a.png',
    ]
    text = "Here:\n```yui\n" + "\n".join(lines) + "\n```\nThe file was ~/pic.png"
    hook = FakeWebhook(lambda call: reply(text))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url, HOME=str(home))
    bridge.wait("start")
    asked = say(person, agent)
    bridge.acked([asked])
    (row,) = agent_rows(person, agent)
    body = row["body"]
    assert body.startswith("Here:\n```yui\n") and body.endswith("```\nThe file was ~/pic.png")
    assert body.splitlines()[4] == lines[2]  # a web page, on a list line: untouched
    image, gallery, listing = ops(body)
    assert image["props"]["caption"] == "Dinner" and gallery["props"]["caps"] == ["First", ""]
    links = [image["props"]["src"], *gallery["props"]["items"]]
    folder = f"{person.id}/{agent['id']}/agent/{row['id']}"
    assert [signed_path(link) for link in links] == [
        f"{folder}-1.png",
        f"{folder}-2.jpg",
        f"{folder}-3.gif",
    ]
    assert [fetch_signed(link).content for link in links] == [PNG, JPEG, GIF]
    assert listing["props"]["items"][1:] == [
        "https://example.com/page",
        "https://example.com/a.png",
    ]
    (media,) = [e for e in bridge.seen if e["event"] == "media"]
    assert media["stored"] == [f"{folder}-1.png", f"{folder}-2.jpg", f"{folder}-3.gif"]
    hook.close()


def test_a_reply_whose_upload_fails_waits_in_the_outbox(relay, machine, home) -> None:
    (home / "pic.png").write_bytes(PNG)
    text = "```yui\nimage ~/pic.png\n```"
    hook = FakeWebhook(lambda call: reply(text))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    name = f"refuse_{uuid.uuid4().hex[:8]}"
    relay.sql(
        f"create function storage.{name}() returns trigger language plpgsql as $$ begin"
        f" if starts_with(new.name, '{person.id}/') then raise exception 'disk on fire'; end if;"
        f" return new; end $$;"
        f" create trigger {name} before insert on storage.objects"
        f" for each row execute function storage.{name}()"
    )
    try:
        bridge = machine.bridge(hook.url, HOME=str(home))
        bridge.wait("start")
        asked = say(person, agent)
        bridge.wait("retry", what="relay")
        bridge.wait("retry", what="relay")  # and again: it waits, it isn't dropped
        (waiting,) = machine.state()["outbox"]
        assert waiting["row"]["body"] == text and waiting["ack"] == [asked]
        assert agent_rows(person, agent) == []
    finally:
        relay.sql(f"drop trigger {name} on storage.objects; drop function storage.{name}()")
    bridge.acked([asked], timeout=90)
    (row,) = agent_rows(person, agent)
    link = ops(row["body"])[0]["props"]["src"]
    assert fetch_signed(link).content == PNG
    assert [o[0] for o in objects(relay, f"{person.id}/")] == [signed_path(link)]
    hook.close()


@pytest.fixture
def session(relay_env: LocalRelay, machine: Machine) -> tuple[HostSession, Person, dict]:
    """The machine's host, in this process."""
    person = relay_env.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    host = HostSession(HostState(machine.home / "state.json"), relay_env.url)
    host.open()
    return host, person, agent


def queued(host: HostSession, agent: dict[str, Any], body: str) -> OutboxItem:
    row = {
        "id": str(uuid.uuid4()),
        "user_id": host.user_id,
        "agent_id": agent["id"],
        "sender": "agent",
        "kind": "text",
        "body": body,
        "meta": {},
    }
    return OutboxItem(row)


def test_a_crash_between_upload_and_save_only_signs(relay_env, session, tmp_path) -> None:
    host, person, agent = session
    (tmp_path / "pic.png").write_bytes(PNG)
    item = queued(host, agent, f"```yui\nimage {tmp_path}/pic.png\n```")
    first = host_media(host, item, lambda *a, **k: None)
    again = host_media(host, item, lambda *a, **k: None)  # the outbox still held the original
    links = [ops(done.row["body"])[0]["props"]["src"] for done in (first, again)]
    path = f"{person.id}/{agent['id']}/agent/{item.id}-1.png"
    assert [signed_path(link) for link in links] == [path, path]
    assert objects(relay_env, f"{person.id}/") == [(path, "image/png", len(PNG))]
    assert all(fetch_signed(link).content == PNG for link in links)
    picture = media_from(PNG, "pic.png")
    assert host.bucket.upload(path, picture.data, picture.type.mime) is False  # an earlier try
    assert host_media(host, first, lambda *a, **k: None) is first  # nothing left to do


@pytest.fixture
def web() -> Iterator[str]:
    pages = {
        "/cat.jpg": (JPEG, "image/jpeg"),
        "/page.png": (b"<html>a page</html>", "text/html"),
    }

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


def test_remote_media_on_media_lines_only(relay_env, session, web, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(remote.POLICY, "private", True)  # the web server is on loopback
    host, person, agent = session
    (tmp_path / "note.png").write_text("not a picture")
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "key.png").write_bytes(PNG)  # a picture, but where secrets live
    lines = [
        f"card Cat img={web}/cat.jpg url=https://example.com/cats",
        f"image {web}/page.png",
        f"image {web}/gone.gif",
        f"list Links {web}/cat.jpg",
        f"image {tmp_path}/note.png",
        "image /no/such/file.png",
        f"image {tmp_path}/.ssh/key.png",
    ]
    seen: list[dict[str, Any]] = []
    item = queued(host, agent, "```yui\n" + "\n".join(lines) + "\n```")
    done = host_media(host, item, lambda event, **fields: seen.append({"event": event, **fields}))
    card, *rest = done.row["body"].splitlines()[1:-1]
    link = SIGNED.search(card)
    assert link and link.group(1) == f"{person.id}/{agent['id']}/agent/{item.id}-1.jpg"
    assert card == f"card Cat img={link.group(0)} url=https://example.com/cats"
    assert fetch_signed(link.group(0)).content == JPEG
    assert rest == lines[1:]  # a page, a dead link, a list line, not media, no file, .ssh
    (event,) = seen
    assert event["stored"] == [link.group(1)]
    assert len(event["left"]) == 3 and "not a picture" in json.dumps(event["left"])


def test_a_path_outside_a_fence_is_only_words(relay, machine, home) -> None:
    hook = FakeWebhook(lambda call: reply("no fence ~/pic.png here"))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    (home / "pic.png").write_bytes(PNG)
    bridge = machine.bridge(hook.url, HOME=str(home))
    bridge.wait("start")
    bridge.acked([say(person, agent)])
    assert [r["body"] for r in agent_rows(person, agent)] == ["no fence ~/pic.png here"]
    assert objects(relay, f"{person.id}/") == []
    hook.close()
