"""Pairing codes, the pairing throttle, and what a session carries (reference §5.1)."""

from __future__ import annotations

import pytest

from tests.helpers.relay import Host, LocalRelay, fresh_ip

GUIDE_HEADING = "## You are talking to someone in Yui"


def pair(
    relay: LocalRelay,
    code: str,
    ref: str = "bot",
    token: str | None = None,
    ip: str | None = None,
    **extra,
):
    return relay.fn(
        "yui-connect",
        {"action": "pair", "code": code, "remote_ref": ref, "host_name": "Laptop", **extra},
        token=token,
        ip=ip or fresh_ip(),
    )


def test_a_code_works_once(relay: LocalRelay) -> None:
    person = relay.person()
    agent, code = person.add_agent("Once")
    assert len(code) == 6 and code.isdigit()
    first = pair(relay, code)
    assert first.status_code == 200
    data = first.json()
    assert data["connector_token"].startswith("yui_ct_")
    assert data["agent"]["id"] == agent["id"] and data["agent"]["remote_ref"] == "bot"
    again = pair(relay, code)
    assert again.status_code == 401 and again.json() == {"error": "invalid_or_expired_code"}


def test_the_token_is_stored_only_as_a_hash(relay: LocalRelay) -> None:
    person = relay.person()
    _, code = person.add_agent("Hashed")
    token = pair(relay, code).json()["connector_token"]
    stored = relay.sql("select token_hash from yui_connectors where user_id = %s", (person.id,))
    assert len(stored) == 1 and token not in stored[0][0] and len(stored[0][0]) == 64
    assert not relay.sql("select 1 from yui_pairings where code_hash = %s", (code,))


def test_a_code_dies_after_ten_minutes(relay: LocalRelay) -> None:
    person = relay.person()
    _, code = person.add_agent("Late")
    expires = relay.sql(
        "select expires_at - created_at from yui_pairings where user_id = %s", (person.id,)
    )
    assert expires[0][0].total_seconds() == 600
    relay.sql(
        "update yui_pairings set created_at = created_at - interval '10 minutes 1 second',"
        " expires_at = expires_at - interval '10 minutes 1 second' where user_id = %s",
        (person.id,),
    )
    answer = pair(relay, code)
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_or_expired_code"


def test_a_new_code_replaces_the_old_one(relay: LocalRelay) -> None:
    person = relay.person()
    agent, old = person.add_agent("Renewed")
    fresh = relay.fn(
        "yui-agents", {"action": "pair_code", "agent_id": agent["id"]}, person.token
    ).json()["code"]
    assert pair(relay, old).status_code == 401
    assert pair(relay, fresh).status_code == 200


def test_the_eleventh_wrong_code_from_one_address_is_throttled(relay: LocalRelay) -> None:
    person = relay.person()
    _, code = person.add_agent("Guarded")
    wrong = "000000" if code != "000000" else "111111"
    ip = fresh_ip()
    for _ in range(10):
        answer = pair(relay, wrong, ip=ip)
        assert answer.status_code == 401, answer.text
    eleventh = pair(relay, wrong, ip=ip)
    assert eleventh.status_code == 429 and eleventh.json() == {"error": "too_many_attempts"}
    assert pair(relay, code, ip=ip).status_code == 429  # even the right code, from there
    assert pair(relay, code).status_code == 200  # another address is unaffected


def test_pairing_with_an_existing_token_reuses_the_host(relay: LocalRelay) -> None:
    person = relay.person()
    _, code1 = person.add_agent("First")
    _, code2 = person.add_agent("Second")
    host = pair(relay, code1, "first").json()
    again = pair(relay, code2, "second", token=host["connector_token"])
    assert again.status_code == 200
    assert again.json()["connector_token"] is None
    assert again.json()["connector"]["id"] == host["connector"]["id"]
    assert len(relay.sql("select 1 from yui_connectors where user_id = %s", (person.id,))) == 1


def test_the_same_ref_twice_on_one_host_is_refused_and_the_code_survives(relay: LocalRelay) -> None:
    person = relay.person()
    _, code1 = person.add_agent("One")
    _, code2 = person.add_agent("Two")
    host = pair(relay, code1, "same").json()
    clash = pair(relay, code2, "same", token=host["connector_token"])
    assert clash.status_code == 409 and clash.json()["error"] == "profile_already_added"
    assert pair(relay, code2, "other", token=host["connector_token"]).status_code == 200


def test_another_persons_token_gets_a_new_host(relay: LocalRelay) -> None:
    a, b = relay.person("A"), relay.person("B")
    _, code_a = a.add_agent("Mine")
    _, code_b = b.add_agent("Theirs")
    token_a = pair(relay, code_a).json()["connector_token"]
    answer = pair(relay, code_b, token=token_a)
    assert answer.status_code == 200 and answer.json()["connector_token"].startswith("yui_ct_")


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"code": "12345"}, "invalid_code"),
        ({"code": "12345a"}, "invalid_code"),
        ({"code": "123456", "remote_ref": "no spaces"}, "invalid_remote_ref"),
        ({"code": "123456", "kind": "fax"}, "invalid_kind"),
    ],
)
def test_pair_validates_its_input(relay: LocalRelay, body: dict, error: str) -> None:
    answer = relay.fn("yui-connect", {"action": "pair", "remote_ref": "ok", **body}, ip=fresh_ip())
    assert answer.status_code == 400 and answer.json() == {"error": error}


def test_the_session_lists_exactly_the_hosts_agents_and_carries_the_guide(
    relay: LocalRelay,
) -> None:
    person = relay.person()
    one, code1 = person.add_agent("Uno")
    two, code2 = person.add_agent("Dos")
    person.add_agent("Elsewhere")
    host = Host.pair(relay, code1, "uno")
    assert pair(relay, code2, "dos", token=host.token).status_code == 200
    session = host.session()
    assert {a["id"] for a in session["agents"]} == {one["id"], two["id"]}
    assert session["user_id"] == person.id
    assert session["connector"] == {"id": host.connector["id"], "name": "Test host"}
    guide = session["guide"]
    assert guide["version"].startswith("v1+") and len(guide["version"]) == 11
    assert guide["body"].startswith(GUIDE_HEADING)
    public = relay.fn("yui-connect", {"action": "guide"})
    assert public.status_code == 200 and public.json()["guide"] == guide


def test_session_refuses_bad_tokens(relay: LocalRelay) -> None:
    person = relay.person()
    assert relay.fn("yui-connect", {"action": "session"}, "yui_ct_nope").status_code == 401
    assert relay.fn("yui-connect", {"action": "session"}, person.token).status_code == 401
    assert relay.fn("yui-connect", {"action": "session"}).status_code == 401


def test_add_creates_an_agent_on_a_paired_host(relay: LocalRelay) -> None:
    person = relay.person()
    _, code = person.add_agent("Base")
    host = Host.pair(relay, code, "base")
    made = host.call("add", remote_ref="sean-rush")
    assert made.status_code == 200 and made.json()["created"] is True
    assert made.json()["agent"]["name"] == "Sean Rush"
    again = host.call("add", remote_ref="sean-rush")
    assert again.json()["created"] is False
    assert again.json()["agent"]["id"] == made.json()["agent"]["id"]


def test_functions_answer_their_shared_errors(relay: LocalRelay) -> None:
    assert relay.http("GET", "/functions/v1/yui-connect").status_code == 405
    bad = relay.http("POST", "/functions/v1/yui-connect", headers={"content-type": "text/plain"})
    assert bad.status_code == 400 and bad.json() == {"error": "invalid_request"}
    unknown = relay.fn("yui-connect", {"action": "dance"})
    assert unknown.status_code == 400 and unknown.json() == {"error": "unknown_action"}
