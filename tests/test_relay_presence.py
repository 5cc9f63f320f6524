"""Honest presence: from heartbeats and goodbyes, per computer or per agent (reference §6)."""

from __future__ import annotations

from tests.helpers.relay import Host, LocalRelay


def presence(person, name: str) -> str:
    return person.listing()[name]["presence"]


def age(relay: LocalRelay, table: str, column: str, row_id: str, minutes: int) -> None:
    relay.sql(
        f"update {table} set {column} = now() - make_interval(mins => %s) where id = %s",
        (minutes, row_id),
    )


def test_per_computer_presence(relay: LocalRelay) -> None:
    person = relay.person()
    _, code = person.add_agent("Solo")
    assert presence(person, "Solo") == "pending"
    host = Host.pair(relay, code, "solo")
    assert presence(person, "Solo") == "online"
    assert person.listing()["Solo"]["status"] == "connected"

    age(relay, "yui_connectors", "last_seen_at", host.connector["id"], 3)
    assert presence(person, "Solo") == "asleep"
    assert host.call("heartbeat").status_code == 200
    assert presence(person, "Solo") == "online"

    bye = host.call("bye")
    assert bye.status_code == 200 and bye.json()["stopped_at"] is not None
    assert presence(person, "Solo") == "offline"
    assert person.listing()["Solo"]["status"] == "offline"
    assert host.call("heartbeat").status_code == 200
    assert presence(person, "Solo") == "online"


def test_presence_per_agent_when_the_computer_reports_serving(relay: LocalRelay) -> None:
    person = relay.person()
    alpha, code_a = person.add_agent("Alpha")
    _, code_b = person.add_agent("Bravo")
    host = Host.pair(relay, code_a, "alpha", serving=[])
    pair_b = relay.fn(
        "yui-connect",
        {"action": "pair", "code": code_b, "remote_ref": "bravo", "serving": []},
        host.token,
    )
    assert pair_b.status_code == 200
    assert presence(person, "Alpha") == "not_listening"
    assert presence(person, "Bravo") == "not_listening"

    assert host.call("heartbeat", serving=["alpha"]).status_code == 200
    assert presence(person, "Alpha") == "online"
    assert presence(person, "Bravo") == "not_listening"
    assert person.listing()["Bravo"]["status"] == "connected"

    assert host.call("session", serving=["bravo", "not a ref!"]).status_code == 200
    assert presence(person, "Alpha") == "online"
    assert presence(person, "Bravo") == "online"

    bye_b = host.call("bye", serving=["bravo"])
    assert bye_b.status_code == 200 and bye_b.json() == {"stopped_at": None}
    assert presence(person, "Bravo") == "offline"
    assert presence(person, "Alpha") == "online"

    age(relay, "yui_agents", "served_at", alpha["id"], 5)
    assert presence(person, "Alpha") == "offline"  # the computer is up, its bridge is not

    assert host.call("heartbeat", serving=["alpha"]).status_code == 200
    last = host.call("bye", serving=["alpha"])
    assert last.json()["stopped_at"] is not None
    assert presence(person, "Alpha") == "offline"
    assert person.listing()["Alpha"]["status"] == "offline"


def test_rebinding_an_agent_starts_its_presence_over(relay: LocalRelay) -> None:
    person = relay.person()
    agent, code = person.add_agent("Moved")
    host = Host.pair(relay, code, "first", serving=["first"])
    assert presence(person, "Moved") == "online"
    fresh = relay.fn(
        "yui-agents", {"action": "pair_code", "agent_id": agent["id"]}, person.token
    ).json()["code"]
    again = relay.fn(
        "yui-connect",
        {"action": "pair", "code": fresh, "remote_ref": "second", "serving": []},
        host.token,
    )
    assert again.status_code == 200
    assert presence(person, "Moved") == "not_listening"


def test_another_person_sees_nothing_of_it(relay: LocalRelay) -> None:
    owner, other = relay.person(), relay.person()
    _, code = owner.add_agent("Private")
    Host.pair(relay, code, "private")
    assert other.listing() == {}
