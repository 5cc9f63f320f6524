"""Sizes, rate buckets and the resend rule: a refusal costs nothing, a resend is never charged."""

from __future__ import annotations

import uuid

import pytest

from tests.helpers.relay import Host, LocalRelay, Person


@pytest.fixture
def thread(relay: LocalRelay) -> tuple[Person, dict, Host]:
    person = relay.person("Limits")
    agent, code = person.add_agent("Limited")
    return person, agent, Host.pair(relay, code, "limited")


def tokens(relay: LocalRelay, key: str) -> float:
    return relay.sql("select tokens from yui_rate_buckets where key = %s", (key,))[0][0]


def test_body_sizes(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    assert person.say(agent, "").status_code == 400
    too_long = person.say(agent, "x" * 32_001)
    assert too_long.status_code == 400 and too_long.json()["code"] == "23514"
    assert person.say(agent, "x" * 32_000).status_code == 201
    assert host.reply(agent, "y" * 32_001).status_code == 400
    assert host.reply(agent, "y" * 32_000).status_code == 201


def test_meta_over_16_kb_is_refused(relay: LocalRelay, thread) -> None:
    person, agent, _ = thread
    big = person.say(agent, "[yui] n1 form", kind="event", meta={"notes": "z" * 20_000})
    assert big.status_code == 400
    fits = person.say(agent, "[yui] n1 form", kind="event", meta={"notes": "z" * 15_000})
    assert fits.status_code == 201


def test_an_empty_bucket_is_429_and_a_resend_is_409_for_free(relay: LocalRelay, thread) -> None:
    person, agent, _ = thread
    with relay.limits(msg_user_burst=2, msg_user_per_min=0):
        first = str(uuid.uuid4())
        assert person.say(agent, "one", id=first).status_code == 201
        assert person.say(agent, "two").status_code == 201
        refused = person.say(agent, "three")
        assert refused.status_code == 429 and refused.json()["message"] == "rate_limited"
        key = f"msg:u:{person.id}"
        left = tokens(relay, key)
        assert 0 <= left < 1
        resend = person.say(agent, "one", id=first)
        assert resend.status_code == 409 and resend.json()["code"] == "23505"
        assert tokens(relay, key) == left  # the resend took nothing
    bodies = [r["body"] for r in person.thread(agent)]
    assert bodies == ["one", "two"]


def test_a_bad_row_costs_no_token(relay: LocalRelay, thread) -> None:
    person, agent, _ = thread
    assert person.say(agent, "warm the bucket").status_code == 201
    key = f"msg:u:{person.id}"
    before = tokens(relay, key)
    assert person.say(agent, "x" * 32_001).status_code == 400
    assert tokens(relay, key) == before


def test_the_hosts_bucket_is_its_own(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    with relay.limits(msg_connector_burst=1, msg_connector_per_min=0):
        assert host.reply(agent, "first").status_code == 201
        refused = host.reply(agent, "second")
        assert refused.status_code == 429 and refused.json()["message"] == "rate_limited"
        assert person.say(agent, "the person is not slowed").status_code == 201


def test_yui_connect_has_its_own_bucket(relay: LocalRelay, thread) -> None:
    _, _, host = thread
    with relay.limits(connect_burst=1, connect_per_min=0):
        relay.sql(
            "delete from yui_rate_buckets where key = %s", (f"connect:c:{host.connector['id']}",)
        )
        assert host.call("heartbeat").status_code == 200
        refused = host.call("heartbeat")
        assert refused.status_code == 429 and refused.json() == {"error": "rate_limited"}


def test_limits_are_public_to_people_and_hosts(relay: LocalRelay, thread) -> None:
    person, _, host = thread
    for token in (person.token, host.jwt):
        answer = relay.rest("GET", "yui_limits", token, params={"select": "name,value"})
        assert answer.status_code == 200
        assert {"name": "msg_user_burst", "value": 120} in answer.json()
    write = relay.rest(
        "PATCH",
        "yui_limits",
        person.token,
        params={"name": "eq.msg_user_burst"},
        body={"value": 100000},
    )
    assert write.status_code in (401, 403)


def test_agents_per_person_cap(relay: LocalRelay) -> None:
    person = relay.person("Collector")
    with relay.limits(agents_per_user=2):
        person.add_agent("One")
        person.add_agent("Two")
        third = relay.fn("yui-agents", {"action": "create", "name": "Three"}, person.token)
        assert third.status_code == 403 and third.json() == {"error": "limit_reached"}
