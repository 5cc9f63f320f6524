"""Controls in the relay (reference §12.1, §15.6): the control kind's rules, the capability
report through yui-connect, and the agent list returning it.

Two people: A owns Alpha (served by host HA); B owns Bravo (served by HB).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.helpers.relay import Host, LocalRelay, Person, TwoPeople, two_people

DENIED = (401, 403)
REPORT = {"v": 1, "sections": {"soul": "rw", "model": "r", "channels": "r"}}


World = TwoPeople


@pytest.fixture(scope="module")
def world(relay: LocalRelay) -> World:
    return two_people(relay)


def request(person: Person, agent: dict[str, Any], **meta: Any) -> tuple[str, Any]:
    row_id = str(uuid.uuid4())
    meta = {"v": 1, "req": "c-" + row_id[:8], "op": "list", "section": "soul", **meta}
    answer = person.say(agent, "controls: list soul", id=row_id, kind="control", meta=meta)
    return row_id, answer


def answer(host: Host, agent: dict[str, Any], meta: dict[str, Any], **row: Any) -> Any:
    return host.reply(agent, "controls: list soul", kind="control", meta=meta, **row)


def landed(relay: LocalRelay, row_id: str) -> bool:
    return bool(relay.sql("select 1 from yui_messages where id = %s", (row_id,)))


# --- the schema --------------------------------------------------------------------------------


def test_the_schema_has_the_control_kind_and_an_owner_only_policy(world: World) -> None:
    ((check,),) = world.relay.sql(
        "select pg_get_constraintdef(oid) from pg_constraint"
        " where conname = 'yui_messages_kind_check'"
    )
    assert "'control'" in check
    policies = world.relay.sql(
        "select policyname, permissive, roles::text[] from pg_policies"
        " where tablename = 'yui_messages' and permissive = 'RESTRICTIVE' and cmd = 'INSERT'"
    )
    assert ("yui_messages_control_owner", "RESTRICTIVE", ["yui_user"]) in policies
    assert ("yui_messages_control_host", "RESTRICTIVE", ["yui_connector"]) in policies
    ((can_update, can_host_read),) = world.relay.sql(
        "select has_column_privilege('yui_user', 'public.yui_agents', 'controls', 'UPDATE'),"
        " has_column_privilege('yui_connector', 'public.yui_agents', 'controls', 'SELECT')"
    )
    assert not can_update and not can_host_read


# --- the capability report ----------------------------------------------------------------------


def test_the_report_is_stored_cleaned_and_listed(world: World) -> None:
    assert "controls" in world.a.listing()["Alpha"]
    assert world.a.listing()["Alpha"]["controls"] is None
    sent = {
        "v": 1,
        "sections": {"soul": "rw", "model": "rwd", "memory": "rwd", "secrets": "rw", "skills": 3},
    }
    stored = world.ha.call("controls", remote_ref="alpha", controls=sent)
    assert stored.status_code == 200, stored.text
    assert stored.json()["agents"] == 1 and stored.json()["sections"] == ["memory", "soul"]
    assert stored.json()["at"]
    listed = world.a.listing()["Alpha"]["controls"]
    assert listed == {"v": 1, "sections": {"soul": "rw", "memory": "rwd"}}
    ((at,),) = world.relay.sql(
        "select controls_at from yui_agents where id = %s", (world.alpha["id"],)
    )
    assert at is not None

    via_api = world.relay.fn("yui-agents", {"action": "list"}, world.a.token)
    assert via_api.status_code == 200, via_api.text
    (alpha,) = [x for x in via_api.json()["agents"] if x["id"] == world.alpha["id"]]
    assert alpha["controls"] == listed

    cleared = world.ha.call("controls", remote_ref="alpha", controls=None)
    assert cleared.status_code == 200 and cleared.json()["sections"] == []
    assert world.a.listing()["Alpha"]["controls"] is None
    assert world.ha.call("controls", remote_ref="alpha", controls=REPORT).status_code == 200


@pytest.mark.parametrize(
    "controls",
    [{"v": 2, "sections": {"soul": "rw"}}, {"sections": {}}, "soul", [1], {"v": 1, "sections": []}],
)
def test_a_report_the_relay_cant_read_is_refused(world: World, controls: Any) -> None:
    refused = world.ha.call("controls", remote_ref="alpha", controls=controls)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_controls"


def test_a_report_needs_the_hosts_token_and_touches_only_its_agents(world: World) -> None:
    no_token = world.relay.fn(
        "yui-connect", {"action": "controls", "remote_ref": "alpha", "controls": REPORT}
    )
    assert no_token.status_code == 401
    bad_ref = world.ha.call("controls", remote_ref="../alpha", controls=REPORT)
    assert bad_ref.status_code == 400 and bad_ref.json()["error"] == "invalid_remote_ref"
    before = world.b.listing()["Bravo"]["controls"]
    other = world.ha.call("controls", remote_ref="bravo", controls=REPORT)
    assert other.status_code == 200 and other.json()["agents"] == 0
    assert world.b.listing()["Bravo"]["controls"] == before


def test_a_host_cannot_read_the_agent_list(world: World) -> None:
    assert world.relay.rest("GET", "yui_agent_list", world.ha.jwt).status_code in DENIED


# --- control rows ------------------------------------------------------------------------------


def test_the_owner_asks_and_the_host_answers_once_with_meta_for(world: World) -> None:
    row_id, sent = request(world.a, world.alpha)
    assert sent.status_code == 201, sent.text
    seen = world.relay.rest(
        "GET",
        "yui_messages",
        world.ha.jwt,
        params={"kind": "eq.control", "agent_id": f"eq.{world.alpha['id']}"},
    )
    assert row_id in {r["id"] for r in seen.json()}
    meta = {"v": 1, "req": "c-" + row_id[:8], "ok": True, "section": "soul", "items": []}
    replied = answer(world.ha, world.alpha, {**meta, "for": row_id})
    assert replied.status_code == 201, replied.text

    found = world.relay.rest(
        "GET",
        "yui_messages",
        world.a.token,
        params={"kind": "eq.control", "sender": "eq.agent", "meta->>req": f"eq.{meta['req']}"},
    )
    assert [r["meta"]["for"] for r in found.json()] == [row_id]
    thread = world.relay.rest(
        "GET",
        "yui_messages",
        world.a.token,
        params={"kind": "neq.control", "agent_id": f"eq.{world.alpha['id']}"},
    )
    assert all(r["kind"] != "control" for r in thread.json())


@pytest.mark.parametrize(
    "meta",
    [
        {"ok": True},  # no meta.for
        {"ok": True, "for": 12},
        {"ok": True, "for": "x", "turn": ["x"]},  # a turn would wake mentions and groups
    ],
)
def test_an_answer_names_its_request_and_never_a_turn(world: World, meta: dict) -> None:
    refused = answer(world.ha, world.alpha, meta)
    assert refused.status_code == 400, refused.text
    assert refused.json()["message"] == "control_answer_needs_for"


def test_another_person_cannot_write_a_control_row(world: World) -> None:
    row_id, as_self = request(world.b, world.alpha)
    assert as_self.status_code in (*DENIED, 409)
    row_id_2, as_owner = request(world.b, world.alpha, user_id=world.a.id)
    assert as_owner.status_code in (*DENIED, 409)
    assert not landed(world.relay, row_id) and not landed(world.relay, row_id_2)


def test_a_host_answers_only_in_the_threads_it_serves(world: World) -> None:
    meta = {"ok": True, "for": str(uuid.uuid4())}
    into_b = answer(world.ha, world.bravo, meta)
    assert into_b.status_code in (*DENIED, 409)
    as_b = answer(world.ha, world.bravo, meta, user_id=world.b.id)
    assert as_b.status_code in DENIED


def test_a_control_row_holds_64_kb_of_meta_and_a_text_row_16(world: World) -> None:
    big = "x" * 30_000
    fits = answer(world.ha, world.alpha, {"ok": True, "for": "r", "item": {"text": big}})
    assert fits.status_code == 201, fits.text
    _, sent = request(world.a, world.alpha, value={"text": big})
    assert sent.status_code == 201, sent.text
    too_big = answer(world.ha, world.alpha, {"ok": True, "for": "r", "item": {"text": big * 3}})
    assert too_big.status_code == 400
    text_row = world.ha.reply(world.alpha, "hi", meta={"note": big})
    assert text_row.status_code == 400


def test_a_control_answer_is_never_pushed(world: World) -> None:
    row_id = str(uuid.uuid4())
    assert answer(world.ha, world.alpha, {"ok": True, "for": "r"}, id=row_id).status_code == 201
    push = world.relay.fn("yui-push", {"action": "notify", "message_id": row_id}, world.ha.token)
    assert push.status_code == 400 and push.json()["error"] == "control_row"


def test_the_sweep_deletes_control_rows_after_seven_days(world: World) -> None:
    if not world.relay.sql("select 1 from pg_proc where proname = 'yui_retention'"):
        pytest.skip("yui_retention (migration 0010, the sweep's part) is not in this checkout")
    old = [str(uuid.uuid4()) for _ in range(3)]
    kept = str(uuid.uuid4())
    for row_id in old:
        assert answer(world.ha, world.alpha, {"ok": True, "for": "r"}, id=row_id).status_code == 201
    assert world.ha.reply(world.alpha, "an old text", id=kept).status_code == 201
    world.relay.sql(
        "update yui_messages set created_at = now() - interval '8 days' where id = any(%s)",
        ([*old, kept],),
    )
    dry = dict(world.relay.sql("select * from yui_retention(true)"))
    assert dry["control_rows"] >= 3
    world.relay.sql("select * from yui_retention(false)")
    assert not any(landed(world.relay, row_id) for row_id in old)
    assert landed(world.relay, kept)


def test_the_report_travels_as_json_not_text(world: World) -> None:
    ((kind,),) = world.relay.sql(
        "select jsonb_typeof(controls) from yui_agents where id = %s", (world.alpha["id"],)
    )
    assert kind == "object"
    assert json.dumps(world.a.listing()["Alpha"]["controls"]) == json.dumps(REPORT)
