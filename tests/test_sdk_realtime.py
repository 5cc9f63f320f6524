"""Realtime through the official clients, unchanged: supabase-js 2.119 (its default protocol,
vsn 2.0.0, binary broadcasts included) in a Node process driven line by line, and supabase-py's
realtime (vsn 1.0.0) in this one. Both hear INSERT, UPDATE and DELETE on yui_messages through
filters, only what their token may read; both renew their token; both broadcast and track
presence, heard by the same person's other sockets and by nobody else.

The cast (`two_people`): A has Alpha (served by host HA) and Loose (no host); B has Bravo (HB).
"Hears nothing" is checked once a later change has reached the same socket (delivery is in
order), or after a second of quiet when no later change can come.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest
from realtime.exceptions import RealtimeHTTPError
from realtime.types import RealtimeChannelConfig
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from relay.gateway.realtime_changes import subscriptions
from relay.keys import mint
from tests.helpers.relay import Host, LocalRelay, Person, TwoPeople, two_people
from tests.helpers.sdk_realtime import QUIET, TABLE, WAIT, Node, py_socket


@pytest.fixture
def node(relay: LocalRelay) -> Iterator[Node]:
    with contextlib.closing(Node(relay)) as harness:
        yield harness


@pytest.fixture(scope="module")
def world(relay: LocalRelay) -> TwoPeople:
    return two_people(relay)


def new_id() -> str:
    return str(uuid.uuid4())


def say(person: Person, agent: dict[str, Any], body: str = "hi") -> str:
    row_id = new_id()
    answer = person.say(agent, body, id=row_id)
    assert answer.status_code == 201, answer.text
    return row_id


def ack(host: Host, row_id: str, column: str) -> None:
    """A host's ack, as the bridges send it: the person's ✓ (delivered) or ✓✓ (handled)."""
    body, where = {column: datetime.now(UTC).isoformat()}, {"id": f"eq.{row_id}"}
    answer = host.relay.rest("PATCH", "yui_messages", host.jwt, params=where, body=body)
    assert answer.status_code in (200, 204), answer.text


def delete(person: Person, row_id: str) -> None:
    where = {"id": f"eq.{row_id}"}
    answer = person.relay.rest("DELETE", "yui_messages", person.token, params=where)
    assert answer.status_code in (200, 204), answer.text


def present(sync: dict[str, Any]) -> list[str]:
    """Who a presence sync says is there (by the `who` each tracked)."""
    return [meta.get("who", "") for metas in sync["state"].values() for meta in metas]


def another_token(relay: LocalRelay, token: str, ttl: int = 3600) -> str:
    """Another token of the same identity, as a refresh mints one."""
    claims = jwt.decode(token, options={"verify_signature": False})
    claims = {k: v for k, v in claims.items() if k not in ("iat", "exp")}
    return mint(relay.jwt_secret, claims, ttl=ttl)


# --- filters, compared as PostgreSQL would (no relay needed) -------------------------------------

TYPES = {"id": "uuid", "body": "text", "created_at": "timestamptz", "meta": "jsonb"}
ID, T0 = "6f1c8a52-0a4e-4d1b-9d6e-2a1f3c4b5d6e", "2026-01-01T00:00:00.5+00:00"


@pytest.mark.parametrize(
    ("text", "record", "holds"),
    [
        ('body=eq."a,b"', {"body": "a,b"}, True),  # quoted, as the clients' builder quotes
        ('body=in.("x,y",z)', {"body": "x,y"}, True),
        ("created_at=gt.2026-01-01T00:00:00Z", {"created_at": T0}, True),  # as times, not text
        ("created_at=lt.2026-01-01T00:00:00.25Z", {"created_at": T0}, False),
        (f"id=eq.{ID.upper()}", {"id": ID}, True),  # as uuids
        ("body=neq.x", {"body": None}, False),  # null matches nothing, as in SQL
        ("body=eq.a,created_at=gte.2026-01-02", {"body": "a", "created_at": T0}, False),  # and
    ],
)
def test_a_filter_compares_values_as_the_columns_type(
    text: str, record: dict[str, Any], holds: bool
) -> None:
    config = {"postgres_changes": [{"event": "*", "schema": "public", "filter": text}]}
    (sub,) = subscriptions(config, TYPES, lambda: 1)
    assert sub.matches(record) is holds


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("meta=eq.{}", r"filters on meta \(jsonb\) are not served"),
        ("nope=eq.1", "no column nope"),
        ("body=in.x", "in takes a list"),
        ("body", "expected column=operator.value"),
        ("body=not.eq.x", "operator 'not' is not served"),
    ],
)
def test_a_filter_that_cant_be_served_is_refused(text: str, reason: str) -> None:
    config = {"postgres_changes": [{"event": "INSERT", "schema": "public", "filter": text}]}
    with pytest.raises(ValueError, match=reason):
        subscriptions(config, TYPES, lambda: 1)


# --- supabase-js (vsn 2.0.0) ---------------------------------------------------------------------


def test_js_person_sees_each_change_of_a_thread_and_the_host_no_delete(
    world: TwoPeople, node: Node
) -> None:
    assert node.do(do="client", client="a", token=world.a.token) == {"vsn": "2.0.0"}
    node.do(do="client", client="ha", token=world.ha.jwt)
    alpha = {"event": "*", **TABLE, "filter": f"agent_id=eq.{world.alpha['id']}"}
    node.join("a", "ticks", changes=[alpha])
    node.join("ha", "work", changes=[{"event": "*", **TABLE}])
    say(world.a, world.loose)  # filtered out for A, unreadable for HA: the next change is Alpha's
    row = say(world.a, world.alpha)
    for channel in ("ticks", "work"):
        heard = node.expect(kind="change", channel=channel)
        assert (heard["type"], heard["row"], heard["new"]["handled_at"]) == ("INSERT", row, None)
    ack(world.ha, row, "delivered_at")
    delivered = node.expect(kind="change", channel="ticks")
    assert (delivered["type"], delivered["old"]) == ("UPDATE", {"id": row})  # the primary key
    assert delivered["new"]["delivered_at"] and delivered["new"]["handled_at"] is None
    ack(world.ha, row, "handled_at")
    handled = node.expect(kind="change", channel="ticks")
    assert (handled["type"], handled["row"]) == ("UPDATE", row) and handled["new"]["handled_at"]
    delete(world.a, row)
    gone = node.expect(kind="change", channel="ticks")
    assert (gone["type"], gone["old"], gone["new"]) == ("DELETE", {"id": row}, {})
    later = say(world.a, world.alpha)
    for channel in ("ticks", "work"):
        node.expect(kind="change", channel=channel, row=later)
    host_heard = [(c["type"], c["row"]) for c in node.heard(channel="work")]
    assert host_heard == [("UPDATE", row), ("UPDATE", row)]  # its own acks; no DELETE


def test_js_filters_each_subscription_by_its_own_filter(world: TwoPeople, node: Node) -> None:
    alpha, loose = world.alpha["id"], world.loose["id"]
    bindings = [
        {"event": "INSERT", **TABLE, "filter": f"agent_id=in.({alpha},{loose})"},
        {"event": "INSERT", **TABLE, "filter": "sender=eq.agent", "select": ["id", "sender"]},
        {"event": "UPDATE", **TABLE, "filter": "handled_at=gte.2000-01-01T00:00:00Z"},
        {"event": "INSERT", **TABLE, "filter": f"agent_id=neq.{alpha}"},
    ]
    node.do(do="client", client="a", token=world.a.token)
    node.join("a", "f", changes=bindings)
    say(world.b, world.bravo)  # A can't read it: no filter makes it heard
    to_alpha, to_loose, reply = say(world.a, world.alpha), say(world.a, world.loose), new_id()
    assert world.ha.reply(world.alpha, id=reply).status_code == 201
    ack(world.ha, to_alpha, "delivered_at")  # handled_at still null: binding 2 doesn't match
    ack(world.ha, to_alpha, "handled_at")
    handled = node.expect(kind="change", binding=2)
    assert handled["row"] == to_alpha and handled["new"]["handled_at"]
    heard: dict[int, list[Any]] = {0: [], 1: [], 2: [], 3: []}
    for change in node.heard(kind="change"):
        heard[change["binding"]].append(change["new"] if change["binding"] == 1 else change["row"])
    assert heard == {
        0: [to_alpha, to_loose, reply],
        1: [{"id": reply, "sender": "agent"}],  # only the columns it selected
        2: [],
        3: [to_loose],
    }


def test_js_isolation_between_people_and_hosts(world: TwoPeople, node: Node) -> None:
    for client, token in (("a", world.a.token), ("b", world.b.token), ("ha", world.ha.jwt)):
        node.do(do="client", client=client, token=token)
        node.join(client, client, changes=[{"event": "*", **TABLE}])
    bravo, loose = say(world.b, world.bravo), say(world.a, world.loose)
    alpha = say(world.a, world.alpha)
    wanted = {"a": [loose, alpha], "b": [bravo], "ha": [alpha]}  # HA doesn't serve Loose
    for client, rows in wanted.items():
        node.expect(kind="change", client=client, row=rows[-1])
    time.sleep(QUIET)
    for client, rows in wanted.items():
        assert [c["row"] for c in node.heard(kind="change", client=client)] == rows[:-1]


def test_js_set_auth_renews_the_token_and_a_lapsed_one_ends(world: TwoPeople, node: Node) -> None:
    short = another_token(world.relay, world.a.token, ttl=2)
    for client in ("renewed", "lapsed"):
        node.do(do="client", client=client, token=short)
        node.join(client, client, changes=[{"event": "INSERT", **TABLE}])
    node.do(do="auth", client="renewed", token=another_token(world.relay, world.a.token))
    time.sleep(2.5)  # past the short token's expiry
    row = say(world.a, world.alpha)
    assert node.expect(kind="change", client="renewed")["row"] == row
    assert node.expect(kind="status", client="lapsed")["status"] in ("CHANNEL_ERROR", "CLOSED")
    assert node.heard(kind="change", client="lapsed") == []


def test_js_broadcast_and_presence_stay_within_one_identity(world: TwoPeople, node: Node) -> None:
    tokens = {
        "a1": world.a.token,
        "a2": another_token(world.relay, world.a.token),  # the same person on another socket
        "b": world.b.token,  # another person on the same topic name
        "ha": world.ha.jwt,  # the host that serves A's agent
    }
    config = {"broadcast": {"self": True, "ack": True}, "presence": {"key": ""}}
    for client, token in tokens.items():
        node.do(do="client", client=client, token=token)
        node.join(client, client, topic="room", config=config, broadcasts=["hi"], presence=True)
    assert node.do(do="send", channel="a1", event="hi", payload={"n": 1}) == "ok"  # acked
    for client in ("a1", "a2"):  # the sender too: it asked for `self`
        assert node.expect(kind="broadcast", client=client)["payload"] == {"n": 1}
    assert node.do(do="send", channel="a1", event="hi", hex="00ff10") == "ok"  # binary payload
    assert node.expect(kind="broadcast", client="a2")["payload"] == {"hex": "00ff10"}
    assert node.do(do="track", channel="a1", payload={"who": "a1"}) == "ok"
    node.expect(lambda sync: present(sync) == ["a1"], kind="presence", client="a2")
    for client in ("b", "ha"):  # each has a room of its own: it hears itself only
        assert node.do(do="send", channel=client, event="hi", payload={"from": client}) == "ok"
        assert node.expect(kind="broadcast", client=client)["payload"] == {"from": client}
        assert node.do(do="track", channel=client, payload={"who": client}) == "ok"
    time.sleep(QUIET)
    for client in ("b", "ha"):
        assert node.heard(kind="broadcast", client=client) == []
        assert all(set(present(s)) <= {client} for s in node.heard(kind="presence", client=client))
    assert node.heard(kind="broadcast", client="a2") == []  # nothing of B's or the host's
    sent = node.do(do="httpSend", channel="a1", event="hi", payload={"n": 2})
    assert sent == f"refused: {REST_UNSERVED}"  # the REST side: said, not a bare 404


REST_UNSERVED = "broadcast over REST is not served by this relay: send on a joined channel"


REFUSALS = {
    "unpublished-table": ({"event": "INSERT", "schema": "public", "table": "yui_agents"}, "a"),
    "unserved-operator": ({"event": "INSERT", **TABLE, "filter": "body=like.*hi*"}, "a"),
    "not-a-uuid": ({"event": "INSERT", **TABLE, "filter": "agent_id=eq.alpha"}, "a"),
    "bad-token": ({"event": "INSERT", **TABLE}, "not-a-jwt"),
}
REASONS = {
    "unpublished-table": "only changes to public.yui_messages are published",
    "unserved-operator": "filter operator 'like' is not served",
    "not-a-uuid": "'alpha' is not a uuid",
    "bad-token": "JWT could not be verified",
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_js_a_join_that_cant_be_served_is_refused_with_its_reason(
    world: TwoPeople, node: Node, case: str
) -> None:
    change, token = REFUSALS[case]
    node.do(do="client", client="c", token=world.a.token if token == "a" else token)
    node.do(do="subscribe", client="c", channel="c", topic="t", changes=[change])
    status = node.expect(kind="status", channel="c")
    assert status["status"] == "CHANNEL_ERROR" and REASONS[case] in status["error"], status


def test_an_unknown_protocol_version_is_refused_at_the_handshake(relay: LocalRelay) -> None:
    url = relay.url.replace("http://", "ws://") + "/realtime/v1/websocket"
    with pytest.raises(InvalidStatus) as refusal:
        connect(f"{url}?apikey={relay.anon_key}&vsn=3.0.0", open_timeout=WAIT)
    assert refusal.value.response.status_code == 403


def test_py_person_sees_each_change_of_a_thread_through_filters(world: TwoPeople) -> None:
    async def scenario() -> None:
        async with py_socket(world.relay, world.a.token) as a:
            await a.join(
                "py-ticks",
                {"event": "*", "filter": f"agent_id=eq.{world.alpha['id']}"},
                {"event": "INSERT", "filter": f"agent_id=in.({world.loose['id']})"},
            )
            assert a.states[0][0] == "SUBSCRIBED", a.states
            row = await asyncio.to_thread(say, world.a, world.alpha)
            inserted = await a.next()
            assert (inserted["type"], inserted["record"]["id"], inserted["n"]) == ("INSERT", row, 0)
            await asyncio.to_thread(ack, world.ha, row, "handled_at")
            handled = await a.next()
            assert (handled["type"], handled["old_record"]) == ("UPDATE", {"id": row})
            assert handled["record"]["handled_at"] is not None
            await asyncio.to_thread(delete, world.a, row)
            gone = await a.next()
            assert (gone["type"], gone["old_record"]) == ("DELETE", {"id": row})
            other = await asyncio.to_thread(say, world.a, world.loose)
            heard = await a.next()
            assert (heard["record"]["id"], heard["n"]) == (other, 1)

    asyncio.run(scenario())


def test_py_isolation_between_people_and_hosts_and_refusals(world: TwoPeople) -> None:
    async def scenario() -> None:
        async with (
            py_socket(world.relay, world.a.token) as a,
            py_socket(world.relay, world.b.token) as b,
            py_socket(world.relay, world.ha.jwt) as ha,
        ):
            for socket in (a, b, ha):
                await socket.join("py-isolation", {"event": "INSERT"})
            await a.join("py-refused", {"event": "INSERT", "filter": "body=like.*hi*"})
            await a.join("py-unpublished", {"event": "UPDATE", "table": "yui_agents"})
            assert [state for state, _ in a.states] == ["SUBSCRIBED", *["CHANNEL_ERROR"] * 2]
            assert REASONS["unserved-operator"] in a.states[1][1]
            assert REASONS["unpublished-table"] in a.states[2][1]
            bravo = await asyncio.to_thread(say, world.b, world.bravo)
            loose = await asyncio.to_thread(say, world.a, world.loose)
            alpha = await asyncio.to_thread(say, world.a, world.alpha)
            for socket, rows in ((a, [loose, alpha]), (b, [bravo]), (ha, [alpha])):
                assert [(await socket.next())["record"]["id"] for _ in rows] == rows
            await asyncio.sleep(QUIET)
            assert [socket.heard.qsize() for socket in (a, b, ha)] == [0, 0, 0]

    asyncio.run(scenario())


def test_py_set_auth_renews_the_token(world: TwoPeople) -> None:
    async def scenario() -> None:
        async with py_socket(world.relay, another_token(world.relay, world.a.token, 2)) as a:
            await a.join("py-renewed", {"event": "INSERT"})
            await a.rt.set_auth(another_token(world.relay, world.a.token))
            await asyncio.sleep(2.5)  # past the short token's expiry
            row = await asyncio.to_thread(say, world.a, world.alpha)
            assert (await a.next())["record"]["id"] == row

    asyncio.run(scenario())


def test_py_and_js_sockets_of_one_person_share_broadcast_and_presence(
    world: TwoPeople, node: Node
) -> None:
    """realtime-py speaks 1.0.0, supabase-js 2.0.0 with binary broadcasts: one room all the
    same. B, on the same topic name, hears none of it."""
    config: RealtimeChannelConfig = {
        "broadcast": {"self": False, "ack": True},
        "presence": {"key": "", "enabled": True},
        "private": False,
    }
    node.do(do="client", client="js", token=world.a.token)
    node.join("js", "js", topic="mixed", config=config, broadcasts=["hi"], presence=True)

    async def js(**command: Any) -> Any:
        return await asyncio.to_thread(node.do, **command)

    async def scenario() -> None:
        async with (
            py_socket(world.relay, world.a.token) as a,
            py_socket(world.relay, world.b.token) as b,
        ):
            mine, theirs = (
                await a.join("mixed", config=config),
                await b.join("mixed", config=config),
            )
            await mine.send_broadcast("hi", {"from": "py"})
            found = await asyncio.to_thread(node.expect, kind="broadcast")
            assert found["payload"] == {"from": "py"}
            assert await js(do="send", channel="js", event="hi", payload={"from": "js"}) == "ok"
            assert await js(do="send", channel="js", event="hi", hex="0102") == "ok"
            assert (await a.next())["payload"] == {"from": "js"}
            await js(do="track", channel="js", payload={"who": "js"})
            await mine.track({"who": "py"})
            both = lambda sync: sorted(present(sync)) == ["js", "py"]  # noqa: E731
            await asyncio.to_thread(node.expect, both, kind="presence")
            await asyncio.sleep(QUIET)  # the bytes can't reach a 1.0.0 socket; B hears nothing
            assert (a.heard.qsize(), b.heard.qsize(), theirs.presence_state()) == (0, 0, {})
            state = json.loads(json.dumps(mine.presence_state()))
            assert sorted(p["who"] for metas in state.values() for p in metas) == ["js", "py"]
            with pytest.raises(RealtimeHTTPError) as refused:
                await mine.http_send("hi", {"over": "rest"})
            assert (refused.value.status, str(refused.value)) == (501, REST_UNSERVED)

    asyncio.run(scenario())


@pytest.mark.parametrize("ending", ["suspended", "revoked"])
def test_a_suspended_or_revoked_host_hears_nothing_more_through_either_client(
    relay: LocalRelay, node: Node, ending: str
) -> None:
    person = relay.person(f"Ending {ending}")
    agent, code = person.add_agent("Ended")
    host = Host.pair(relay, code, f"ended-{ending}")
    for client, token in (("host", host.jwt), ("person", person.token)):
        node.do(do="client", client=client, token=token)
        node.join(client, client, changes=[{"event": "*", **TABLE}])

    def end() -> None:
        if ending == "suspended":
            relay.sql("select public.yui_suspend('connector', %s, true)", (host.connector["id"],))
        else:
            body = {"action": "connector_revoke", "id": host.connector["id"]}
            assert relay.fn("yui-agents", body, person.token).status_code == 200

    async def scenario() -> None:
        async with py_socket(relay, host.jwt) as py_host:
            await py_host.join("py-host", {"event": "*"})
            first = await asyncio.to_thread(say, person, agent)
            assert (await py_host.next())["record"]["id"] == first
            await asyncio.to_thread(node.expect, kind="change", client="host", row=first)
            await asyncio.to_thread(end)
            later = await asyncio.to_thread(say, person, agent)
            await asyncio.to_thread(node.expect, kind="change", client="person", row=later)
            await asyncio.sleep(QUIET)
            assert py_host.heard.empty() and node.heard(kind="change", client="host") == []

    asyncio.run(scenario())
