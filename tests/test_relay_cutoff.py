"""Removing a host or pulling the kill switch bites at the very next request, even for a
session token that has not expired."""

from __future__ import annotations

import pytest

from tests.helpers.relay import Host, LocalRelay, Person


@pytest.fixture
def paired(relay: LocalRelay) -> tuple[Person, dict, Host, str]:
    person = relay.person("Cutoff")
    agent, code = person.add_agent("Bot")
    host = Host.pair(relay, code, "bot")
    answer = person.say(agent, "before")
    assert answer.status_code == 201
    return person, agent, host, code


def visible(relay: LocalRelay, host: Host) -> list:
    answer = relay.rest("GET", "yui_messages", host.jwt)
    assert answer.status_code == 200
    return answer.json()


def test_removing_a_host_cuts_it_off_at_once(relay: LocalRelay, paired) -> None:
    person, agent, host, _ = paired
    assert len(visible(relay, host)) == 1
    answer = relay.fn(
        "yui-agents", {"action": "connector_revoke", "id": host.connector["id"]}, person.token
    )
    assert answer.status_code == 200 and answer.json() == {"revoked": True}

    assert visible(relay, host) == []  # the same, unexpired session token
    assert host.reply(agent, "too late").status_code in (401, 403)
    assert host.call("session").status_code == 401
    assert host.call("heartbeat").status_code == 401
    assert person.listing()["Bot"]["presence"] == "offline"


def test_revoking_someone_elses_host_is_not_found(relay: LocalRelay, paired) -> None:
    _, _, host, _ = paired
    stranger = relay.person("Stranger")
    answer = relay.fn(
        "yui-agents", {"action": "connector_revoke", "id": host.connector["id"]}, stranger.token
    )
    assert answer.status_code == 404
    assert len(visible(relay, host)) == 1


def test_suspending_a_host(relay: LocalRelay, paired) -> None:
    person, agent, host, _ = paired
    relay.sql("select yui_suspend('connector', %s, true, 'abuse')", (host.connector["id"],))
    try:
        assert visible(relay, host) == []
        assert host.reply(agent, "blocked").status_code in (401, 403)
        for action in ("session", "heartbeat", "bye"):
            answer = host.call(action)
            assert answer.status_code == 403 and answer.json() == {"error": "suspended"}
        assert person.say(agent, "the person can still write").status_code == 201
    finally:
        relay.sql("select yui_suspend('connector', %s, false)", (host.connector["id"],))
    assert host.call("session").status_code == 200
    assert len(visible(relay, host)) == 2


def test_suspending_a_person(relay: LocalRelay, paired) -> None:
    person, agent, host, _ = paired
    relay.sql("select yui_suspend('user', %s, true, 'abuse')", (person.id,))
    try:
        answer = person.say(agent, "blocked")
        assert answer.status_code == 403 and answer.json()["message"] == "account_suspended"
        listed = relay.fn("yui-agents", {"action": "list"}, person.token)
        assert listed.status_code == 403 and listed.json() == {"error": "account_suspended"}
        session = host.call("session")
        assert session.status_code == 403 and session.json() == {"error": "suspended"}
        assert visible(relay, host) == []
    finally:
        relay.sql("select yui_suspend('user', %s, false)", (person.id,))
    assert person.say(agent, "back").status_code == 201
    assert host.call("session").status_code == 200


def test_kill_switch_refuses_an_unknown_target(relay: LocalRelay) -> None:
    answer = relay.rest(
        "POST",
        "rpc/yui_suspend",
        relay.service_key,
        body={"kind": "connector", "target": "00000000-0000-0000-0000-000000000000", "on_": True},
    )
    assert answer.status_code == 404


def test_only_the_service_role_may_pull_the_kill_switch(relay: LocalRelay, paired) -> None:
    person, _, host, _ = paired
    for token in (person.token, host.jwt):
        answer = relay.rest(
            "POST",
            "rpc/yui_suspend",
            token,
            body={"kind": "user", "target": person.id, "on_": True},
        )
        assert answer.status_code in (401, 403, 404)
    assert relay.sql("select suspended_at from yui_users where id = %s", (person.id,)) == [(None,)]
