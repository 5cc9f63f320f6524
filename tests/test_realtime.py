"""Realtime over loopback against the real relay, spoken as a host speaks it (reference §4.4).

Two people and two hosts: A has alpha (on host HA) and loose (on no host); B has bravo (on HB).
A socket hears an insert only if its token may read the row, as the database decides at the
moment of the insert. "Hears nothing" is checked a second after a later insert has reached a
control socket, so a leak would have had every chance to arrive.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import jwt
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from relay.gateway import realtime
from relay.keys import mint
from relay.server import settings_for
from tests.helpers.cli import ROOT
from tests.helpers.http import free_port
from tests.helpers.phoenix import PhoenixSocket
from tests.helpers.relay import (
    Host,
    LocalRelay,
    Person,
    TwoPeople,
    gateway_in_process,
    two_people,
    wait_healthy,
)

WAIT = 5.0  # seconds to wait for something that should come
QUIET = 1.0  # seconds of silence that count as "nothing came"
CHANGES = [{"event": "INSERT", "schema": "public", "table": "yui_messages"}]


class Feed(PhoenixSocket):
    """One websocket to a gateway's Realtime, speaking Phoenix (vsn 1.0.0) as a host does."""

    def __init__(self, ws: Connection) -> None:
        super().__init__(ws, WAIT)

    def join(self, token: str, topic: str = "realtime:yui-test") -> dict[str, Any]:
        """Join; return the reply, and on success check the system message that follows."""
        payload = {
            "access_token": token,
            "config": {
                "broadcast": {"self": False},
                "presence": {"key": ""},
                "postgres_changes": CHANGES,
            },
        }
        ref = self.send(topic, "phx_join", payload)
        reply = self.recv()
        assert (reply["topic"], reply["event"], reply["ref"]) == (topic, "phx_reply", ref)
        if reply["payload"]["status"] == "ok":
            system = self.recv()
            assert system["event"] == "system" and system["topic"] == topic
            assert system["payload"] == {
                "status": "ok",
                "message": "Subscribed to PostgreSQL",
                "extension": "postgres_changes",
                "channel": topic.removeprefix("realtime:"),
            }
        return reply

    def change(self) -> dict[str, Any]:
        """The next message, which must be a delivered row; returns its record."""
        message = self.recv()
        assert message["event"] == "postgres_changes", message
        return message["payload"]["data"]["record"]

    def silent(self) -> None:
        with pytest.raises(TimeoutError):
            self.ws.recv(timeout=QUIET)


@pytest.fixture
def feeds(relay: LocalRelay) -> Iterator[Callable[..., Feed]]:
    """Open feeds (to the session's relay unless told otherwise); all closed after the test."""
    with ExitStack() as opened:

        def open_feed(base_url: str = relay.url) -> Feed:
            url = base_url.replace("http://", "ws://", 1) + "/realtime/v1/websocket"
            ws = connect(f"{url}?apikey={relay.anon_key}&vsn=1.0.0", open_timeout=WAIT)
            return Feed(opened.enter_context(ws))

        yield open_feed


World = TwoPeople


@pytest.fixture(scope="module")
def world(relay: LocalRelay) -> World:
    return two_people(relay)


def say(person: Person, agent: dict[str, Any], body: str = "hi") -> str:
    row_id = str(uuid.uuid4())
    answer = person.say(agent, body, id=row_id)
    assert answer.status_code == 201, answer.text
    return row_id


def claims_of(token: str) -> dict[str, Any]:
    found = jwt.decode(token, options={"verify_signature": False})
    return {k: v for k, v in found.items() if k not in ("iat", "exp")}


# --- joining, heartbeats, leaving ---------------------------------------------------------


def test_a_host_joins_with_its_session(world: World, feeds: Callable[..., Feed]) -> None:
    reply = feeds().join(world.ha.jwt)
    assert reply["payload"]["status"] == "ok"
    (change,) = reply["payload"]["response"]["postgres_changes"]
    assert isinstance(change.pop("id"), int)
    assert change == CHANGES[0]


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (lambda r: "not-a-jwt", "JWT could not be verified"),
        (lambda r: mint("x" * 48, {"role": "yui_connector"}), "JWT could not be verified"),
        (lambda r: mint(r.jwt_secret, {"role": "yui_connector"}, ttl=-10), "JWT expired"),
    ],
    ids=["garbage", "wrong-secret", "expired"],
)
def test_a_bad_token_is_refused(
    world: World, feeds: Callable[..., Feed], token: Callable[[LocalRelay], str], reason: str
) -> None:
    feed = feeds()
    reply = feed.join(token(world.relay))
    assert reply["payload"] == {"status": "error", "response": {"reason": reason}}
    say(world.a, world.alpha)
    feed.silent()


def test_a_join_for_something_not_served_is_refused(
    world: World, feeds: Callable[..., Feed]
) -> None:
    feed = feeds()
    unserved = [{"event": "INSERT", "schema": "public", "table": "yui_agents"}]
    ref = feed.send(
        "realtime:x",
        "phx_join",
        {"access_token": world.ha.jwt, "config": {"postgres_changes": unserved}},
    )
    reply = feed.recv()
    assert reply["ref"] == ref and reply["payload"]["status"] == "error"
    assert "public.yui_messages" in reply["payload"]["response"]["reason"]


def test_a_join_without_postgres_changes_hears_no_rows(
    world: World, feeds: Callable[..., Feed]
) -> None:
    feed = feeds()
    ref = feed.send("realtime:quiet", "phx_join", {"access_token": world.ha.jwt, "config": {}})
    reply = feed.recv()
    assert reply["ref"] == ref
    assert reply["payload"] == {"status": "ok", "response": {"postgres_changes": []}}
    say(world.a, world.alpha)
    feed.silent()


def test_heartbeats_are_answered(feeds: Callable[..., Feed]) -> None:
    feed = feeds()
    for _ in range(2):
        ref = feed.send("phoenix", "heartbeat")
        assert feed.recv() == {
            "topic": "phoenix",
            "event": "phx_reply",
            "payload": {"status": "ok", "response": {}},
            "ref": ref,
            "join_ref": None,
        }


def test_after_leaving_nothing_comes(world: World, feeds: Callable[..., Feed]) -> None:
    feed, control = feeds(), feeds()
    feed.join(world.ha.jwt, "realtime:left")
    control.join(world.ha.jwt)
    ref = feed.send("realtime:left", "phx_leave")
    reply = feed.recv()
    assert (reply["ref"], reply["payload"]["status"]) == (ref, "ok")
    row_id = say(world.a, world.alpha)
    assert control.change()["id"] == row_id
    feed.silent()


# --- what each token hears ------------------------------------------------------------------


def test_a_host_hears_its_own_thread_with_the_whole_row(
    world: World, feeds: Callable[..., Feed]
) -> None:
    feed = feeds()
    reply = feed.join(world.ha.jwt, "realtime:yui-alpha")
    sub_id = reply["payload"]["response"]["postgres_changes"][0]["id"]
    row_id = say(world.a, world.alpha, "hello there")
    message = feed.recv()
    assert (message["topic"], message["event"], message["ref"]) == (
        "realtime:yui-alpha",
        "postgres_changes",
        None,
    )
    assert message["payload"]["ids"] == [sub_id]
    data = message["payload"]["data"]
    assert (data["schema"], data["table"], data["eventType"], data["type"]) == (
        "public",
        "yui_messages",
        "INSERT",
        "INSERT",
    )
    assert data["errors"] is None
    datetime.fromisoformat(data["commit_timestamp"])
    (stored,) = [r for r in world.a.thread(world.alpha) if r["id"] == row_id]
    assert data["record"] == data["new"] == stored
    assert data["record"]["body"] == "hello there"
    assert {"name": "body", "type": "text"} in data["columns"]


def test_each_token_hears_only_what_it_may_read(world: World, feeds: Callable[..., Feed]) -> None:
    ha, hb, person_a = feeds(), feeds(), feeds()
    for feed, token in ((ha, world.ha.jwt), (hb, world.hb.jwt), (person_a, world.a.token)):
        feed.join(token)
    loose = say(world.a, world.loose)  # another agent of the same person, on no host
    bravo = say(world.b, world.bravo)  # another person
    alpha = say(world.a, world.alpha)
    assert ha.change()["id"] == alpha
    assert hb.change()["id"] == bravo
    assert [person_a.change()["id"], person_a.change()["id"]] == [loose, alpha]
    for feed in (ha, hb, person_a):
        feed.silent()


def test_a_revoked_host_hears_nothing_more(relay: LocalRelay, feeds: Callable[..., Feed]) -> None:
    person = relay.person("Revoker")
    agent, code = person.add_agent("Revoked")
    host = Host.pair(relay, code, "revoked")
    feed, control = feeds(), feeds()
    feed.join(host.jwt)
    control.join(person.token)
    first = say(person, agent)
    assert feed.change()["id"] == first
    assert control.change()["id"] == first
    answer = relay.fn(
        "yui-agents", {"action": "connector_revoke", "id": host.connector["id"]}, person.token
    )
    assert answer.status_code == 200, answer.text
    later = say(person, agent, "after the revoke")
    assert control.change()["id"] == later
    feed.silent()


# --- renewed and ended sessions ---------------------------------------------------------------


def test_a_renewed_session_keeps_delivering(world: World, feeds: Callable[..., Feed]) -> None:
    short = mint(world.relay.jwt_secret, claims_of(world.ha.jwt), ttl=2)
    renewed, lapsed = feeds(), feeds()
    renewed.join(short)
    lapsed.join(short)
    ref = renewed.send("realtime:yui-test", "access_token", {"access_token": world.ha.jwt})
    assert renewed.recv()["ref"] == ref
    time.sleep(2.5)  # past the short token's expiry
    row_id = say(world.a, world.alpha)
    assert renewed.change()["id"] == row_id
    system, close = lapsed.recv(), lapsed.recv()
    assert system["event"] == "system" and system["payload"]["status"] == "error"
    assert "expired" in system["payload"]["message"]
    assert close["event"] == "phx_close"
    lapsed.silent()


def test_an_invalid_renewal_ends_the_topic(world: World, feeds: Callable[..., Feed]) -> None:
    feed, control = feeds(), feeds()
    feed.join(world.ha.jwt)
    control.join(world.ha.jwt)
    feed.send("realtime:yui-test", "access_token", {"access_token": "not-a-jwt"})
    system, close = feed.recv(), feed.recv()
    assert (system["event"], system["payload"]["status"]) == ("system", "error")
    assert close["event"] == "phx_close"
    row_id = say(world.a, world.alpha)
    assert control.change()["id"] == row_id
    feed.silent()


# --- the feed comes from PostgreSQL -------------------------------------------------------------


def test_a_second_gateway_hears_inserts_made_through_the_first(
    world: World, feeds: Callable[..., Feed]
) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    folder = Path(world.relay.home) / "relay"
    child = subprocess.Popen(
        [sys.executable, "-m", "relay.gateway", "--dir", str(folder), "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    second = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(second)
        feed = feeds(second)
        feed.join(world.ha.jwt)
        row_id = say(world.a, world.alpha)  # through the first gateway
        assert feed.change()["id"] == row_id
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(5)


def test_the_feed_survives_losing_its_postgres_connection(
    world: World, feeds: Callable[..., Feed]
) -> None:
    feed = feeds()
    feed.join(world.ha.jwt)
    killed = world.relay.sql(
        "select pg_terminate_backend(pid) from pg_stat_activity "
        "where application_name = 'yui-realtime'"
    )
    assert killed
    down, back = feed.recv(), feed.recv(timeout=15)
    assert (down["event"], down["payload"]["status"]) == ("system", "error")
    assert (back["event"], back["payload"]["status"]) == ("system", "ok")
    row_id = say(world.a, world.alpha)
    assert feed.change()["id"] == row_id


@pytest.fixture
def quick_idle_gateway(relay: LocalRelay, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A gateway in this process (so a constant can be lowered) that drops silent sockets
    after one second."""
    monkeypatch.setattr(realtime, "IDLE_TIMEOUT", 1.0)
    with gateway_in_process(settings_for(Path(relay.home) / "relay")) as url:
        yield url


def test_a_silent_socket_is_closed(quick_idle_gateway: str, feeds: Callable[..., Feed]) -> None:
    silent, beating = feeds(quick_idle_gateway), feeds(quick_idle_gateway)
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        ref = beating.send("phoenix", "heartbeat")
        assert beating.recv()["ref"] == ref
        time.sleep(0.3)
    with pytest.raises(ConnectionClosed):
        silent.recv(timeout=WAIT)
