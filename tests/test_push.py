"""yui-push (YUI-8) against the real relay: phones, presence, and a push per agent message.

The relay's default is the sink: nothing leaves the machine, each push is a row of
yui_notifications. The APNs path is in test_push_apns.py.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from relay.gateway.push import preview
from tests.helpers.push import devices, new_thread, notify, phone, push, rows, written
from tests.helpers.relay import Host, LocalRelay, Person

DENIED = (401, 403)
UA = "Yui/142 CFNetwork/1490.0.4 Darwin/24.0.0"


@contextmanager
def limits(relay: LocalRelay, **values: float) -> Iterator[None]:
    """Lower some limits for the length of a test (the limits table is data)."""
    names = list(values)
    before = relay.sql("select name, value from yui_limits where name = any(%s)", (names,))
    for name, value in values.items():
        relay.sql("update yui_limits set value = %s where name = %s", (value, name))
    try:
        yield
    finally:
        for name, value in before:
            relay.sql("update yui_limits set value = %s where name = %s", (value, name))


@pytest.fixture
def thread(relay: LocalRelay) -> tuple[Person, dict[str, Any], Host]:
    return new_thread(relay)


# --- the app's side -----------------------------------------------------------------------


def test_register_records_the_phone_and_its_build(relay: LocalRelay) -> None:
    person = relay.person("Phones")
    token = secrets.token_hex(32).upper()
    answer = push(relay, person.token, "register", token=token, name="  My\n iPhone ", build="131")
    assert answer.status_code == 200, answer.text
    device = devices(person)[token.lower()]
    assert device["name"] == "My iPhone" and device["environment"] == "production"
    assert device["app_build"] == 131 and device["app_build_at"] is not None

    # Without `build`, the user agent every build sends names it; a test build's dot is ignored.
    sandbox = secrets.token_hex(40)
    answer = push(
        relay,
        person.token,
        "register",
        ua="Yui/150.2 CFNetwork/1",
        token=sandbox,
        environment="sandbox",
    )
    assert answer.status_code == 200, answer.text
    assert devices(person)[sandbox]["app_build"] == 150
    assert devices(person)[sandbox]["environment"] == "sandbox"

    # Registering again keeps what the phone doesn't repeat.
    assert push(relay, person.token, "register", token=token).status_code == 200
    assert devices(person)[token.lower()]["name"] == "My iPhone"
    assert devices(person)[token.lower()]["app_build"] == 131


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"token": "abc"}, "invalid_token"),
        ({"token": "g" * 64}, "invalid_token"),
        ({"token": 7}, "invalid_token"),
        ({"token": "a" * 201}, "invalid_token"),
        ({"token": "a" * 64, "environment": "staging"}, "invalid_environment"),
        ({"token": "a" * 64, "name": 5}, "invalid_name"),
    ],
)
def test_register_refuses_bad_fields(relay: LocalRelay, body: dict, code: str) -> None:
    person = relay.person("Typo")
    answer = push(relay, person.token, "register", **body)
    assert answer.status_code == 400 and answer.json() == {"error": code}


def test_app_actions_need_a_persons_app_token(relay: LocalRelay, thread) -> None:
    _, _, host = thread
    for token in (None, "nonsense", host.token, host.jwt, relay.anon_key, relay.service_key):
        for action in ("register", "unregister", "presence"):
            answer = push(relay, token, action, token="a" * 64, active=True)
            assert answer.status_code == 401 and answer.json() == {"error": "unauthorized"}


def test_a_phone_moves_to_the_account_that_registers_it(relay: LocalRelay) -> None:
    first, second = relay.person("First"), relay.person("Second")
    token = phone(first, name="Shared phone", build=99)
    agent, _ = first.add_agent("Mine")
    push(relay, first.token, "presence", token=token, active=True, agent_id=agent["id"])
    assert push(relay, second.token, "register", token=token).status_code == 200
    assert devices(first) == {}
    moved = devices(second)[token]
    # Nothing the phone told the first account stays with it.
    assert moved["name"] is None and moved["app_build"] is None
    assert moved["active_at"] is None and moved["active_agent_id"] is None


def test_unregister_removes_only_the_callers_phone(relay: LocalRelay) -> None:
    owner, other = relay.person("Owner"), relay.person("Other")
    token = phone(owner)
    assert push(relay, other.token, "unregister", token=token).json() == {"ok": True}
    assert token in devices(owner)
    assert push(relay, owner.token, "unregister", token=token).json() == {"ok": True}
    assert devices(owner) == {}


def test_presence_tracks_the_open_thread(relay: LocalRelay) -> None:
    person, stranger = relay.person("Present"), relay.person("Stranger")
    mine, _ = person.add_agent("Mine")
    theirs, _ = stranger.add_agent("Theirs")
    token = phone(person)

    answer = push(
        relay, person.token, "presence", ua=UA, token=token, active=True, agent_id=mine["id"]
    )
    assert answer.status_code == 200 and answer.json() == {"ok": True, "tracked": True}
    device = devices(person)[token]
    assert device["active_at"] is not None and device["active_agent_id"] == mine["id"]
    assert device["app_build"] == 142

    # Someone else's agent is no thread of this phone's: open, but on no agent.
    push(relay, person.token, "presence", token=token, active=True, agent_id=theirs["id"])
    device = devices(person)[token]
    assert device["active_at"] is not None and device["active_agent_id"] is None

    push(relay, person.token, "presence", token=token, active=False)
    device = devices(person)[token]
    assert device["active_at"] is None and device["active_agent_id"] is None

    unknown = push(relay, person.token, "presence", token=secrets.token_hex(32), active=True)
    assert unknown.json() == {"ok": True, "tracked": False}
    elsewhere = push(relay, stranger.token, "presence", token=token, active=True)
    assert elsewhere.json() == {"ok": True, "tracked": False}

    bad = push(relay, person.token, "presence", token=token, active="yes")
    assert bad.status_code == 400 and bad.json() == {"error": "invalid_active"}
    bad = push(relay, person.token, "presence", token=token, active=True, agent_id="x")
    assert bad.status_code == 400 and bad.json() == {"error": "invalid_agent_id"}


def test_devices_per_user_is_capped(relay: LocalRelay) -> None:
    person = relay.person("Many phones")
    with limits(relay, devices_per_user=2):
        first = phone(person)
        phone(person)
        refused = push(relay, person.token, "register", token=secrets.token_hex(32))
        assert refused.status_code == 403 and refused.json() == {"error": "limit_reached"}
        assert push(relay, person.token, "register", token=first).status_code == 200


def test_hosts_and_strangers_read_no_devices_or_notifications(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    phone(person)
    assert notify(host, written(host, agent)).status_code == 200
    stranger = relay.person("Nosy")
    for table in ("yui_devices", "yui_notifications"):
        assert rows(stranger, table) == []
        answer = relay.rest("GET", table, host.jwt)
        assert answer.status_code in DENIED, answer.text
        answer = relay.rest("GET", table, None)
        assert answer.status_code == 401 or answer.json() == [], answer.text


# --- the host's side: what gets pushed ----------------------------------------------------


def test_a_reply_is_pushed_to_every_phone(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    first, second = phone(person), phone(person, environment="sandbox")
    message_id = written(host, agent, "Here is   your\nplan for today.")
    answer = notify(host, message_id)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert {k: data[k] for k in ("ok", "devices", "delivered", "skipped")} == {
        "ok": True,
        "devices": 2,
        "delivered": 2,
        "skipped": 0,
    }
    assert "muted" not in data
    by_device = {r["device"]: r for r in data["results"]}
    phones = devices(person)
    assert set(by_device) == {phones[first]["id"], phones[second]["id"]}
    assert by_device[phones[second]["id"]]["environment"] == "sandbox"
    assert all(r["ok"] and r["status"] == 200 and r["reason"] == "sunk" for r in data["results"])
    assert first not in answer.text and second not in answer.text  # hosts never see tokens

    sunk = rows(person, "yui_notifications")
    assert {n["device_id"] for n in sunk} == set(by_device)
    expected = {
        "aps": {
            "alert": {"title": "Coach", "body": "Here is your plan for today."},
            "sound": "default",
            "thread-id": agent["id"],
            "mutable-content": 1,
        },
        "agent_id": agent["id"],
        "message_id": message_id,
        "url": f"yui://agent/{agent['id']}/thread",
    }
    for n in sunk:
        assert (n["title"], n["body"], n["status"], n["reason"]) == (
            "Coach",
            "Here is your plan for today.",
            "sunk",
            None,
        )
        assert n["payload"] == expected and n["message_id"] == message_id
        assert n["agent_id"] == agent["id"] and n["user_id"] == person.id
    assert all(d["last_push_at"] is not None for d in devices(person).values())


def test_a_muted_agent_pushes_nothing_handoffs_included(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    phone(person)
    relay.sql("update yui_agents set push_muted = true where id = %s", (agent["id"],))
    muted = {"ok": True, "muted": True, "devices": 0, "delivered": 0, "skipped": 0, "results": []}
    assert notify(host, written(host, agent)).json() == muted
    assert notify(host, written(host, agent), handoff=True, **{"from": "Ops"}).json() == muted
    assert rows(person, "yui_notifications") == []


def test_a_phone_open_on_the_thread_is_skipped(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    other, code = person.add_agent("Other")
    Host.pair(relay, code, "other")
    watching, elsewhere, stale, closed = (phone(person) for _ in range(4))
    for token, on in ((watching, agent), (elsewhere, other), (stale, agent)):
        answer = push(relay, person.token, "presence", token=token, active=True, agent_id=on["id"])
        assert answer.json()["tracked"] is True
    relay.sql(
        "update yui_devices set active_at = now() - interval '91 seconds' where apns_token = %s",
        (stale,),
    )
    data = notify(host, written(host, agent)).json()
    assert (data["devices"], data["delivered"], data["skipped"]) == (4, 3, 1)
    phones = devices(person)
    assert {r["device"] for r in data["results"]} == {
        phones[t]["id"] for t in (elsewhere, stale, closed)
    }


def test_only_rows_written_in_the_last_ten_minutes(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    phone(person)
    message_id = written(host, agent)
    relay.sql(
        "update yui_messages set created_at = now() - interval '601 seconds' where id = %s",
        (message_id,),
    )
    answer = notify(host, message_id)
    assert answer.status_code == 409 and answer.json() == {"error": "too_old"}
    recent = written(host, agent)
    relay.sql(
        "update yui_messages set created_at = now() - interval '9 minutes' where id = %s",
        (recent,),
    )
    assert notify(host, recent).status_code == 200


def _bodies(person: Person) -> list[str]:
    return [n["body"] for n in rows(person, "yui_notifications")]


def test_a_handoff_names_who_has_something(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    phone(person)
    notify(host, written(host, agent, "Your report is ready"), handoff=True)
    push(relay, host.token, "notify", message_id=written(host, agent, "Plan"), **{"from": "Ops"})
    notify(host, written(host, agent, "```yui\nsketch\n```"))
    assert _bodies(person) == [
        "Coach has something for you in Yui",
        "Ops has something for you in Yui",
        "Coach has something for you in Yui",
    ]
    not_a_name: dict[str, Any] = {"from": 3}  # `from` is a keyword: only ** can send it
    bad = push(relay, host.token, "notify", message_id=written(host, agent), **not_a_name)
    assert bad.status_code == 400 and bad.json() == {"error": "invalid_from"}


def test_the_preview_leaves_yui_fences_out(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    phone(person)
    notify(host, written(host, agent, "Before\n```yui\nsketch a\n```\nafter ```yui\nnever closed"))
    assert _bodies(person) == ["Before after"]


def test_preview() -> None:
    assert preview("a\n```yui\nx\n```\nb") == "a b"
    assert preview("a ```yui x ``` b ```yui y ``` c") == "a b c"
    assert preview("keep ```python\ncode\n``` this") == "keep ```python code ``` this"
    assert preview("open ```yui\nrest of it") == "open"
    assert preview("```yui-ish stays") == "```yui-ish stays"
    assert preview("  many \t\n spaces  ") == "many spaces"
    long = preview("word " * 100)
    assert len(long) == 160 and long.endswith("…")
    assert preview("x" * 160) == "x" * 160


# --- the host's side: refusals ------------------------------------------------------------


def test_notify_checks_in_order(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    phone(person)
    cases = [
        (None, 400, "invalid_message_id"),
        ("not-a-uuid", 400, "invalid_message_id"),
        (str(uuid.uuid4()), 404, "not_found"),
    ]
    own_row = str(uuid.uuid4())
    assert person.say(agent, "from the person", id=own_row).status_code == 201
    cases.append((own_row, 400, "not_an_agent_message"))
    stopped = written(host, agent, "Stopped.", kind="control", meta={"op": "stop", "for": own_row})
    cases.append((stopped, 400, "control_row"))
    for message_id, status, code in cases:
        answer = notify(host, message_id)
        assert (answer.status_code, answer.json()) == (status, {"error": code}), message_id


def test_someone_elses_message_is_not_found(relay: LocalRelay, thread) -> None:
    _, _, host = thread
    other = relay.person("Else")
    theirs, code = other.add_agent("Theirs")
    their_host = Host.pair(relay, code, "theirs")
    phone(other)
    their_row = written(their_host, theirs)
    answer = notify(host, their_row)
    assert answer.status_code == 404 and answer.json() == {"error": "not_found"}
    # An agent of the same person on another computer is not this host's either.
    person = relay.person("Two computers")
    first, first_code = person.add_agent("First")
    second, second_code = person.add_agent("Second")
    first_host = Host.pair(relay, first_code, "first")
    second_host = Host.pair(relay, second_code, "second")
    assert notify(first_host, written(second_host, second)).status_code == 404
    assert notify(second_host, written(first_host, first)).status_code == 404
    assert rows(other, "yui_notifications") == []


def test_notify_needs_a_live_connector_token(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    message_id = written(host, agent)
    for token in (None, "yui_ct_" + "x" * 43, host.jwt, person.token, relay.service_key):
        answer = push(relay, token, "notify", message_id=message_id)
        assert answer.status_code == 401 and answer.json() == {"error": "unauthorized"}
    relay.sql("update yui_connectors set revoked_at = now() where id = %s", (host.connector["id"],))
    assert notify(host, message_id).status_code == 401


def test_a_suspended_host_or_person_is_403(relay: LocalRelay, thread) -> None:
    person, agent, host = thread
    message_id = written(host, agent)
    for kind, target in (("connector", host.connector["id"]), ("user", person.id)):
        relay.sql("select yui_suspend(%s, %s, true)", (kind, target))
        try:
            answer = notify(host, message_id)
            assert answer.status_code == 403 and answer.json() == {"error": "suspended"}
            if kind == "user":  # and a suspended person adds no phone
                added = push(relay, person.token, "register", token=secrets.token_hex(32))
                assert (added.status_code, added.json()) == (403, {"error": "account_suspended"})
        finally:
            relay.sql("select yui_suspend(%s, %s, false)", (kind, target))
    assert notify(host, message_id).status_code == 200


def test_the_push_bucket_is_per_host(relay: LocalRelay, thread) -> None:
    _, agent, host = thread
    message_id = written(host, agent)
    with limits(relay, push_burst=2, push_per_min=0):
        assert notify(host, message_id).status_code == 200
        assert notify(host, "not-a-uuid").status_code == 400  # a refused push still counts
        refused = notify(host, message_id)
        assert refused.status_code == 429 and refused.json() == {"error": "rate_limited"}
    assert relay.sql(
        "select value from yui_limits where name in ('push_burst', 'push_per_min') order by name"
    ) == [(60,), (10,)]
