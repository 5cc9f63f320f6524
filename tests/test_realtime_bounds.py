"""What one client can cost the relay through Realtime and session refreshes (issue 14).

Sockets are opened to a gateway of the test's own, in this process on the session relay's
database, so no other test's socket is counted and the database reads it makes can be counted.
Rows are written through the session relay's gateway, as a person's app writes them.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.sync.connection import Connection

from relay.gateway import realtime_limits as limits
from relay.gateway.db import Database
from relay.keys import mint
from relay.server import settings_for
from tests.helpers.cli import yui
from tests.helpers.phoenix import PhoenixSocket
from tests.helpers.relay import Host, LocalRelay, Person, gateway_in_process

WAIT = 10.0  # seconds to wait for something that should come
CHANGE = {"event": "INSERT", "schema": "public", "table": "yui_messages"}


class Socket(PhoenixSocket):
    """One websocket to a gateway's Realtime, speaking Phoenix (vsn 1.0.0) as a host does."""

    def __init__(self, ws: Connection) -> None:
        super().__init__(ws, WAIT)

    def reply(self, ref: str) -> dict[str, Any]:
        """The payload of the reply to `ref`, skipping anything sent before it."""
        while True:
            frame = self.recv()
            if frame["event"] == "phx_reply" and frame["ref"] == ref:
                return frame["payload"]

    def join(self, token: str, topic: str = "realtime:t", changes: int = 1) -> dict[str, Any]:
        """Join; the reply's payload (a successful join's system message is read too)."""
        config = {"postgres_changes": [CHANGE] * changes}
        payload = self.reply(
            self.send(topic, "phx_join", {"access_token": token, "config": config})
        )
        if payload["status"] == "ok" and changes:
            system = self.recv()
            assert (system["event"], system["payload"]["status"]) == ("system", "ok"), system
        return payload

    def beat(self) -> None:
        assert self.reply(self.send("phoenix", "heartbeat"))["status"] == "ok"

    def closed(self) -> ConnectionClosed:
        """How the server closed this socket, waiting (boundedly) for it to do so."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                self.ws.recv(timeout=deadline - time.monotonic())
            except ConnectionClosed as closed:
                return closed
        raise AssertionError("the server kept the socket open")


def refused(reason: str) -> dict[str, Any]:
    return {"status": "error", "response": {"reason": reason}}


class Gateway:
    """A gateway in this process on the session relay's database, and the sockets opened to it."""

    def __init__(self, relay: LocalRelay, url: str, opened: ExitStack) -> None:
        self.relay = relay
        self.url = url.replace("http://", "ws://", 1) + "/realtime/v1/websocket"
        self.opened = opened

    def socket(self) -> Socket:
        ws = connect(f"{self.url}?apikey={self.relay.anon_key}&vsn=1.0.0", open_timeout=WAIT)
        return Socket(self.opened.enter_context(ws))

    def joined(self, token: str, topic: str = "realtime:t") -> Socket:
        socket = self.socket()
        assert socket.join(token, topic)["status"] == "ok"
        return socket


@pytest.fixture
def gateway(relay: LocalRelay) -> Iterator[Gateway]:
    with gateway_in_process(settings_for(Path(relay.home) / "relay")) as url, ExitStack() as opened:
        yield Gateway(relay, url, opened)


_ttls = itertools.count(3600)


def token_of(relay: LocalRelay, person: Person) -> str:
    """Another app token of `person`, as each refresh mints one (each differs in its expiry)."""
    claims = jwt.decode(person.token, options={"verify_signature": False})
    claims = {k: v for k, v in claims.items() if k not in ("iat", "exp")}
    return mint(relay.jwt_secret, claims, ttl=next(_ttls))


def say(person: Person, agent: dict[str, Any]) -> str:
    row_id = str(uuid.uuid4())
    answer = person.say(agent, "hi", id=row_id)
    assert answer.status_code == 201, answer.text
    return row_id


# --- what a socket may ask for ------------------------------------------------------------------


def test_a_join_with_too_many_subscriptions_is_refused_and_the_socket_stays(
    relay: LocalRelay, gateway: Gateway
) -> None:
    person = relay.person("Greedy")
    socket = gateway.socket()
    too_many = socket.join(person.token, changes=limits.MAX_CHANGES + 1)
    assert too_many == refused(f"at most {limits.MAX_CHANGES} postgres_changes per join")
    socket.beat()  # still open and answering
    fine = socket.join(person.token, changes=limits.MAX_CHANGES)
    assert len(fine["response"]["postgres_changes"]) == limits.MAX_CHANGES


def test_a_socket_joins_a_bounded_number_of_topics(relay: LocalRelay, gateway: Gateway) -> None:
    person = relay.person("Many topics")
    socket = gateway.socket()
    for n in range(limits.MAX_TOPICS):
        assert socket.join(person.token, f"realtime:t{n}")["status"] == "ok"
    extra = socket.join(person.token, "realtime:one-more")
    assert extra == refused(f"at most {limits.MAX_TOPICS} topics per socket")
    assert socket.join(person.token, "realtime:t0")["status"] == "ok"  # a rejoin replaces


# --- how many sockets ---------------------------------------------------------------------------


def test_sockets_per_token_are_bounded(relay: LocalRelay, gateway: Gateway) -> None:
    person = relay.person("One token")
    held = [gateway.joined(person.token) for _ in range(limits.SOCKETS_PER_TOKEN)]
    extra = gateway.socket()
    assert extra.join(person.token) == refused(
        f"at most {limits.SOCKETS_PER_TOKEN} sockets per token"
    )
    assert held[0].join(person.token, "realtime:t2")["status"] == "ok"  # one socket, counted once
    held.pop().ws.close()
    deadline = time.monotonic() + WAIT  # the gateway counts the closed socket out shortly
    while extra.join(person.token)["status"] != "ok":
        assert time.monotonic() < deadline, "a closed socket still counts"
        time.sleep(0.05)


def test_sockets_per_person_are_bounded_whatever_the_tokens(
    relay: LocalRelay, gateway: Gateway
) -> None:
    person = relay.person("Many tokens")
    _, code = person.add_agent("Bot")
    host = Host.pair(relay, code, "bot")
    for _ in range(limits.SOCKETS_PER_PERSON):
        gateway.joined(token_of(relay, person))
    bound = refused(f"at most {limits.SOCKETS_PER_PERSON} sockets per person")
    assert gateway.socket().join(token_of(relay, person)) == bound
    assert gateway.socket().join(host.jwt) == bound  # the person's hosts count with them
    other = relay.person("Someone else")
    assert gateway.socket().join(other.token)["status"] == "ok"


def test_sockets_per_address_are_bounded(relay: LocalRelay, gateway: Gateway) -> None:
    held = [gateway.joined(relay.anon_key) for _ in range(limits.SOCKETS_PER_ADDRESS)]
    with pytest.raises(InvalidStatus) as refusal:
        gateway.socket()
    assert refusal.value.response.status_code == 429
    assert json.loads(refusal.value.response.body) == {"error": "too_many_sockets"}
    held.pop().ws.close()
    deadline = time.monotonic() + WAIT
    while True:
        try:
            gateway.socket().beat()
            break
        except InvalidStatus:
            assert time.monotonic() < deadline, "a closed socket still counts"
            time.sleep(0.05)


def test_a_socket_without_a_topic_is_closed(relay: LocalRelay, gateway: Gateway) -> None:
    person = relay.person("Idle")
    silent, beating, left, joined = (gateway.socket() for _ in range(4))
    assert left.join(person.token)["status"] == "ok"
    assert left.reply(left.send("realtime:t", "phx_leave"))["status"] == "ok"
    assert joined.join(person.token)["status"] == "ok"
    started = time.monotonic()
    while time.monotonic() - started < limits.JOIN_DEADLINE + 1:
        try:
            beating.beat()
        except ConnectionClosed:
            break
        time.sleep(0.3)
    for socket in (silent, beating, left):
        closed = socket.closed()
        assert closed.rcvd is not None and closed.rcvd.code == 1008
        assert closed.rcvd.reason == f"no topic joined within {limits.JOIN_DEADLINE:g} s"
    joined.beat()  # a socket with a topic stays


def test_access_token_renewals_are_rate_limited(
    relay: LocalRelay, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "CHECKS_PER_MIN", 0.0)  # no refill: the count is exact
    person = relay.person("Renewer")
    agent, _ = person.add_agent("Bot")
    socket = gateway.joined(person.token)
    answers = []
    for _ in range(limits.CHECKS_BURST):  # the join took one check
        ref = socket.send("realtime:t", "access_token", {"access_token": token_of(relay, person)})
        answers.append(socket.reply(ref))
    assert answers[:-1] == [{"status": "ok", "response": {}}] * (limits.CHECKS_BURST - 1)
    assert answers[-1]["status"] == "error"
    assert answers[-1]["response"]["reason"].startswith("too many joins and token renewals")
    row_id = say(person, agent)  # the topic still delivers
    message = socket.recv()
    assert message["event"] == "postgres_changes"
    assert message["payload"]["data"]["record"]["id"] == row_id


# --- delivery costs the same however many tokens ------------------------------------------------


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The role of every database transaction this process's gateways open."""
    opened: list[str] = []
    as_role = Database.as_role

    def counted(self: Database, role: str, claims: dict[str, Any]) -> Any:
        opened.append(role)
        return as_role(self, role, claims)

    monkeypatch.setattr(Database, "as_role", counted)
    return opened


def test_a_change_is_read_once_for_a_person_however_many_tokens_they_hold(
    relay: LocalRelay, gateway: Gateway, reads: list[str]
) -> None:
    person = relay.person("Token minter")
    agent, _ = person.add_agent("Bot")
    sockets: list[Socket] = []
    for _ in range(5):
        socket = gateway.socket()
        for n in range(10):
            assert socket.join(token_of(relay, person), f"realtime:t{n}")["status"] == "ok"
        sockets.append(socket)
    reads.clear()
    row_id = say(person, agent)
    for socket in sockets:
        heard = [socket.recv() for _ in range(10)]
        assert sorted(m["topic"] for m in heard) == sorted(f"realtime:t{n}" for n in range(10))
        assert {m["payload"]["data"]["record"]["id"] for m in heard} == {row_id}
    assert reads == ["yui_user"]  # one read for 50 subscribers holding 50 tokens


# --- session refreshes --------------------------------------------------------------------------


def signup(relay: LocalRelay, name: str) -> dict[str, Any]:
    answer = relay.fn("yui-auth", {"grant_type": "signup", "name": name}, token=relay.service_key)
    assert answer.status_code == 200, answer.text
    return answer.json()


def refresh(relay: LocalRelay, token: str) -> requests.Response:
    return relay.fn("yui-auth", {"grant_type": "refresh", "refresh_token": token})


def test_refresh_past_its_rate_is_refused_and_uses_nothing_up(relay: LocalRelay) -> None:
    session = signup(relay, "Refresher")
    burst = int(relay.sql("select value from yui_limits where name = 'refresh_burst'")[0][0])
    token = session["refresh_token"]
    for _ in range(burst):
        answer = refresh(relay, token)
        assert answer.status_code == 200, answer.text
        token = answer.json()["refresh_token"]
    answer = refresh(relay, token)
    assert (answer.status_code, answer.json()) == (429, {"error": "rate_limited"})
    other = signup(relay, "Someone else")  # the bucket is the person's
    assert refresh(relay, other["refresh_token"]).status_code == 200
    relay.sql(
        "delete from yui_rate_buckets where key = %s", (f"refresh:u:{session['user']['id']}",)
    )
    assert refresh(relay, token).status_code == 200  # the refused token was not used up


def sessions_of(relay: LocalRelay, user_id: str) -> int:
    return relay.sql("select count(*) from yui_sessions where user_id = %s", (user_id,))[0][0]


def test_sweep_removes_revoked_sessions(relay: LocalRelay) -> None:
    session = signup(relay, "Rotator")
    user_id, token = session["user"]["id"], session["refresh_token"]
    for _ in range(3):
        token = refresh(relay, token).json()["refresh_token"]
    relay.sql(
        "update yui_sessions set revoked_at = now() - interval '2 days' where id in"
        " (select id from yui_sessions where user_id = %s and revoked_at is not null"
        "  order by created_at limit 2)",
        (user_id,),
    )
    assert sessions_of(relay, user_id) == 4  # the live one and three used up
    home = Path(relay.home)
    dry = json.loads(yui("sweep", "--json", "--url", relay.url, home=home).stdout)
    assert dry["retention"]["sessions"] >= 2
    done = json.loads(yui("sweep", "--json", "--delete", "--url", relay.url, home=home).stdout)
    assert done["retention"]["sessions"] >= 2
    assert sessions_of(relay, user_id) == 2  # revoked a day ago are gone; today's stays a day
    assert refresh(relay, token).status_code == 200


def test_tokens_are_told_apart_only_by_what_policies_read() -> None:
    """Tokens of one host differ in iat/exp only; those are not part of its identity."""
    claims = {"role": "yui_connector", "sub": "u", "cid": "c", "iss": "x", "exp": 1, "iat": 0}
    later = {**claims, "exp": 2, "iat": 1}
    assert limits.identity_key(claims) == limits.identity_key(later)
    assert limits.identity_key(claims) != limits.identity_key({**claims, "cid": "d"})


# --- broadcast and presence -------------------------------------------------------------------


def in_room(gateway: Gateway, token: str, presence: bool = False) -> Socket:
    """A socket on `realtime:room` that acks broadcasts (and hears presence if asked)."""
    socket = gateway.socket()
    config = {"broadcast": {"ack": True}, "presence": {"key": "", "enabled": presence}}
    ref = socket.send("realtime:room", "phx_join", {"access_token": token, "config": config})
    assert socket.reply(ref)["status"] == "ok"
    return socket


def cast(socket: Socket, payload: Any) -> dict[str, Any]:
    body = {"type": "broadcast", "event": "e", "payload": payload}
    return socket.reply(socket.send("realtime:room", "broadcast", body))


def test_broadcasts_are_rate_limited_per_socket(
    relay: LocalRelay, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MESSAGES_PER_SEC", 0.0)  # no refill: the count is exact
    person = relay.person("Chatty")
    sender, listener = in_room(gateway, person.token), in_room(gateway, person.token)
    answers = [cast(sender, {"n": n}) for n in range(limits.MESSAGES_BURST + 1)]
    assert answers[:-1] == [{"status": "ok", "response": {}}] * limits.MESSAGES_BURST
    assert answers[-1]["response"]["reason"].startswith("too many broadcast and presence")
    heard = [listener.recv()["payload"]["payload"]["n"] for _ in range(limits.MESSAGES_BURST)]
    assert heard == list(range(limits.MESSAGES_BURST))
    assert cast(in_room(gateway, person.token), {"n": "another socket"})["status"] == "ok"


def test_a_broadcast_past_its_size_is_refused(relay: LocalRelay, gateway: Gateway) -> None:
    person = relay.person("Loud")
    sender, listener = in_room(gateway, person.token), in_room(gateway, person.token)
    big = {"x": "a" * limits.MAX_BROADCAST_BYTES}
    assert cast(sender, big) == refused(
        f"a broadcast's payload is at most {limits.MAX_BROADCAST_BYTES} bytes"
    )
    assert cast(sender, {"x": "small"})["status"] == "ok"
    assert listener.recv()["payload"]["payload"] == {"x": "small"}  # the big one never came


def test_presence_entries_per_channel_are_bounded(
    relay: LocalRelay, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_PRESENCES", 2)
    person = relay.person("Everywhere")
    sockets = [in_room(gateway, token_of(relay, person)) for _ in range(3)]

    def track(socket: Socket, payload: Any) -> dict[str, Any]:
        body = {"type": "presence", "event": "track", "payload": payload}
        return socket.reply(socket.send("realtime:room", "presence", body))

    assert [track(s, {"n": n})["status"] for n, s in enumerate(sockets[:2])] == ["ok", "ok"]
    assert track(sockets[2], {"n": 2}) == refused("at most 2 presence entries per channel")
    assert track(sockets[0], {"n": "again"})["status"] == "ok"  # replacing its own entry
    too_big = {"x": "a" * limits.MAX_PRESENCE_BYTES}
    assert track(sockets[1], too_big) == refused(
        f"a presence entry is at most {limits.MAX_PRESENCE_BYTES} bytes"
    )
    other = relay.person("Someone else")  # another person's room is another room
    assert track(in_room(gateway, other.token), {"n": 0})["status"] == "ok"


def test_the_anon_key_has_no_room(relay: LocalRelay, gateway: Gateway) -> None:
    """Everyone holds the anon key: a room for it would be a room for the whole internet."""
    socket = in_room(gateway, relay.anon_key)
    assert cast(socket, {"n": 1}) == refused(
        "broadcast and presence need a token that names someone"
    )
