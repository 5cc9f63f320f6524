"""Who reads and writes what, decided by the database's policies (reference §15.1).

Two people and two hosts: A has alpha (on host HA) and loose (on no host); B has bravo (on HB).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import jwt
import pytest

from tests.helpers.relay import LocalRelay, TwoPeople, two_people

DENIED = (401, 403)


@dataclass
class World(TwoPeople):
    a_row: str  # a person row in alpha's thread
    loose_row: str
    b_row: str


@pytest.fixture(scope="module")
def world(relay: LocalRelay) -> World:
    cast = two_people(relay)
    rows = []
    for who, agent in ((cast.a, cast.alpha), (cast.a, cast.loose), (cast.b, cast.bravo)):
        row_id = str(uuid.uuid4())
        assert who.say(agent, "hello", id=row_id).status_code == 201
        rows.append(row_id)
    return World(**vars(cast), a_row=rows[0], loose_row=rows[1], b_row=rows[2])


def ids(response: Any) -> set[str]:
    assert response.status_code == 200, response.text
    return {r["id"] for r in response.json()}


def row(relay: LocalRelay, row_id: str) -> dict[str, Any]:
    found = relay.sql(
        "select body, delivered_at, handled_at from yui_messages where id = %s", (row_id,)
    )
    body, delivered, handled = found[0]
    return {"body": body, "delivered_at": delivered, "handled_at": handled}


# --- the person ----------------------------------------------------------------------------


def test_person_reads_only_their_own_threads(world: World) -> None:
    seen = ids(world.relay.rest("GET", "yui_messages", world.a.token))
    assert {world.a_row, world.loose_row} <= seen
    assert world.b_row not in seen
    assert ids(world.relay.rest("GET", "yui_messages", world.b.token)) == {world.b_row}


def test_person_cannot_write_into_someone_elses_thread(world: World) -> None:
    as_self = world.a.say(world.bravo, "sneaky")
    assert as_self.status_code in (*DENIED, 409)
    as_other = world.a.say(world.bravo, "sneaky", user_id=world.b.id)
    assert as_other.status_code in DENIED
    assert not world.relay.sql("select 1 from yui_messages where body = 'sneaky'")


def test_person_cannot_write_as_the_agent(world: World) -> None:
    answer = world.a.say(world.alpha, "I am the agent", sender="agent")
    assert answer.status_code in DENIED
    assert answer.json()["code"] == "42501"


def test_person_cannot_edit_a_row(world: World) -> None:
    for change in ({"body": "rewritten"}, {"handled_at": "2026-01-01T00:00:00Z"}):
        answer = world.relay.rest(
            "PATCH", "yui_messages", world.a.token, params={"id": f"eq.{world.a_row}"}, body=change
        )
        assert answer.status_code in DENIED
    assert row(world.relay, world.a_row)["body"] == "hello"


def test_person_sees_only_their_agents(world: World) -> None:
    names = {a["name"] for a in world.relay.rest("GET", "yui_agents", world.a.token).json()}
    assert names == {"Alpha", "Loose"}


# --- the host ------------------------------------------------------------------------------


def test_host_reads_only_threads_of_agents_bound_to_it(world: World) -> None:
    seen = ids(world.relay.rest("GET", "yui_messages", world.ha.jwt))
    assert world.a_row in seen
    assert world.loose_row not in seen and world.b_row not in seen
    filtered = world.relay.rest(
        "GET", "yui_messages", world.ha.jwt, params={"agent_id": f"eq.{world.loose['id']}"}
    )
    assert ids(filtered) == set()


def test_host_sees_only_the_agents_it_serves(world: World) -> None:
    answer = world.relay.rest("GET", "yui_agents", world.ha.jwt, params={"select": "id,name"})
    assert answer.status_code == 200
    assert answer.json() == [{"id": world.alpha["id"], "name": "Alpha"}]


def test_host_writes_only_agent_text_rows_in_its_threads(world: World) -> None:
    assert world.ha.reply(world.alpha, "an answer").status_code == 201
    assert world.ha.reply(world.alpha, "as the person", sender="user").status_code in DENIED
    assert (
        world.ha.reply(world.alpha, "[yui] n1 ask answer=Yes", kind="event").status_code in DENIED
    )
    assert world.ha.reply(world.loose, "not mine").status_code in DENIED
    other = world.ha.reply(world.bravo, "not my person")
    assert other.status_code in (*DENIED, 409)
    assert not world.relay.sql(
        "select 1 from yui_messages where body in ('as the person', 'not mine', 'not my person')"
    )


def test_host_acks_the_persons_rows_in_its_threads(world: World) -> None:
    now = "2026-11-30T12:00:00Z"
    answer = world.relay.rest(
        "PATCH",
        "yui_messages",
        world.ha.jwt,
        params={"id": f"eq.{world.a_row}"},
        body={"delivered_at": now, "handled_at": now},
        prefer="return=representation",
    )
    assert answer.status_code == 200
    assert [r["id"] for r in answer.json()] == [world.a_row]
    assert row(world.relay, world.a_row)["handled_at"] is not None


def test_host_may_not_patch_anything_but_the_acks(world: World) -> None:
    answer = world.relay.rest(
        "PATCH",
        "yui_messages",
        world.ha.jwt,
        params={"id": f"eq.{world.a_row}"},
        body={"handled_at": "2026-11-30T12:00:00Z", "body": "edited"},
    )
    assert answer.status_code in DENIED
    assert row(world.relay, world.a_row)["body"] == "hello"


def test_host_patch_on_rows_it_cannot_see_changes_nothing(world: World) -> None:
    for hidden in (world.loose_row, world.b_row):
        answer = world.relay.rest(
            "PATCH",
            "yui_messages",
            world.ha.jwt,
            params={"id": f"eq.{hidden}"},
            body={"handled_at": "2026-11-30T12:00:00Z"},
            prefer="return=representation",
        )
        assert answer.status_code == 200 and answer.json() == []
        assert row(world.relay, hidden)["handled_at"] is None


def test_host_cannot_ack_its_own_replies(world: World) -> None:
    reply_id = str(uuid.uuid4())
    assert world.ha.reply(world.alpha, "mine", id=reply_id).status_code == 201
    answer = world.relay.rest(
        "PATCH",
        "yui_messages",
        world.ha.jwt,
        params={"id": f"eq.{reply_id}"},
        body={"handled_at": "2026-11-30T12:00:00Z"},
        prefer="return=representation",
    )
    assert answer.status_code == 200 and answer.json() == []


def test_host_cannot_delete_messages(world: World) -> None:
    answer = world.relay.rest(
        "DELETE", "yui_messages", world.ha.jwt, params={"id": f"eq.{world.a_row}"}
    )
    assert answer.status_code in DENIED
    assert world.relay.sql("select 1 from yui_messages where id = %s", (world.a_row,))


@pytest.mark.parametrize(
    "table",
    [
        "yui_users",
        "yui_connectors",
        "yui_pairings",
        "yui_channel_guides",
        "yui_sessions",
        "yui_agent_list",
        "yui_pair_attempts",
        "yui_pair_strikes",
        "yui_rate_buckets",
    ],
)
def test_host_reads_none_of_the_people_hosts_pairing_or_guide_tables(
    world: World, table: str
) -> None:
    answer = world.relay.rest("GET", table, world.ha.jwt, params={"select": "*"})
    assert answer.status_code in (*DENIED, 404), answer.text


def test_token_hashes_are_never_readable_by_the_person(world: World) -> None:
    answer = world.relay.rest(
        "GET", "yui_connectors", world.a.token, params={"select": "id,token_hash"}
    )
    assert answer.status_code in DENIED
    pairings = world.relay.rest(
        "GET", "yui_pairings", world.a.token, params={"select": "code_hash"}
    )
    assert pairings.status_code in DENIED


# --- outsiders -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table",
    ["yui_messages", "yui_agents", "yui_users", "yui_connectors", "yui_agent_list", "yui_limits"],
)
def test_anon_reads_nothing(world: World, table: str) -> None:
    for apikey in (True, False):
        answer = world.relay.rest("GET", table, None, apikey=apikey)
        assert answer.status_code == 401 or answer.json() == [], answer.text


def test_anon_cannot_write(world: World) -> None:
    row = {"user_id": world.a.id, "agent_id": world.alpha["id"], "sender": "user", "body": "anon"}
    assert world.relay.rest("POST", "yui_messages", None, body=row).status_code == 401


def test_apikey_of_any_project_alone_gives_anon(world: World) -> None:
    foreign = jwt.encode({"role": "service_role", "ref": "someproject"}, "x" * 32)
    answer = world.relay.http(
        "GET", "/rest/v1/yui_messages", apikey=False, headers={"apikey": foreign}
    )
    assert answer.status_code == 401 or answer.json() == []


def test_a_token_signed_with_another_secret_is_401(world: World) -> None:
    forged = jwt.encode(
        {"role": "yui_user", "sub": world.a.id, "exp": 4102444800},
        "not the relay's secret" * 2,
        algorithm="HS256",
    )
    answer = world.relay.rest("GET", "yui_messages", forged)
    assert answer.status_code == 401
    assert answer.json()["code"] == "PGRST301"


def test_an_opaque_connector_token_is_not_a_rest_credential(world: World) -> None:
    assert world.relay.rest("GET", "yui_messages", world.ha.token).status_code == 401
