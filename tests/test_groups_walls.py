"""Group threads (reference §15.4), the walls: making a group (the app build, 50 per person,
12 members), what the person may and may not change, what hosts can't see, the notes hosts
read instead, leaving, archiving."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.groups import Group, make_group, race_week
from tests.helpers.relay import Host, LocalRelay, Person
from tests.helpers.talk import as_host, by_id, new_id, refused, send

DENIED = (401, 403)


@pytest.fixture
def g(relay: LocalRelay) -> Group:
    return race_week(relay)


def rest(person: Person, method: str, table: str, **kwargs: Any) -> Any:
    return person.relay.rest(method, table, person.token, **kwargs)


def new_group(person: Person, lead: dict[str, Any], title: str = "Race week") -> Any:
    body = {"id": new_id(), "user_id": person.id, "title": title, "lead": lead["id"]}
    return rest(person, "POST", "yui_threads", body=body)


# --- making a group --------------------------------------------------------------------------


def test_making_a_group_needs_the_app_build(relay: LocalRelay) -> None:
    person = relay.person()
    coach, _ = person.add_agent("Coach")
    sage, _ = person.add_agent("Sage")

    def phone(build: int) -> None:
        token = new_id().replace("-", "") * 2
        body = {"action": "register", "token": token, "environment": "sandbox", "build": build}
        assert relay.fn("yui-push", body, person.token).status_code == 200

    with relay.limits(group_min_build=500):
        refused_ = new_group(person, coach)
        assert (refused_.status_code, refused_.json()["message"]) == (403, "update_needed")
        phone(499)
        assert new_group(person, coach).status_code == 403
        phone(500)  # the newest phone on the account counts
        made = new_group(person, coach, "  Race   week ")
        assert made.status_code == 201, made.text
    (group,) = rest(person, "GET", "yui_threads").json()
    assert group["title"] == "Race week" and (group["max_hops"], group["max_turns"]) == (3, 8)
    seats = rest(person, "GET", "yui_thread_members").json()
    assert [s["agent_id"] for s in seats] == [coach["id"]]  # the lead is seated
    member = {"thread_id": group["id"], "agent_id": sage["id"], "user_id": person.id}
    assert rest(person, "POST", "yui_thread_members", body=member).status_code == 201
    assert new_group(person, coach, "x" * 61).status_code == 400


def test_what_the_person_may_change(g: Group) -> None:
    where = {"id": f"eq.{g.id}"}
    other = {"thread_id": g.id, "agent_id": g.agents["other"]["id"], "user_id": g.a.id}
    assert rest(g.a, "POST", "yui_thread_members", body=other).status_code in (*DENIED, 409)
    stopped = rest(g.a, "PATCH", "yui_threads", params=where, body={"stopped_at": "now"})
    assert stopped.status_code in DENIED
    lead_leaves = rest(
        g.a, "PATCH", "yui_thread_members",
        params={"thread_id": f"eq.{g.id}", "agent_id": f"eq.{g.agents['coach']['id']}"},
        body={"left_at": "now"},
    )  # fmt: skip
    assert (lead_leaves.status_code, lead_leaves.json()["message"]) == (
        400,
        "group_lead_cannot_leave",
    )
    outsider = rest(
        g.a, "PATCH", "yui_threads", params=where, body={"lead": g.agents["loose"]["id"]}
    )
    assert (outsider.status_code, outsider.json()["message"]) == (400, "group_lead_not_member")
    moved = rest(g.a, "PATCH", "yui_threads", params=where, body={"lead": g.agents["sage"]["id"]})
    assert moved.status_code in (200, 204)
    assert rest(g.a, "DELETE", "yui_threads", params=where).status_code in DENIED
    assert (
        rest(g.a, "DELETE", "yui_thread_members", params={"thread_id": f"eq.{g.id}"}).status_code
        in DENIED
    )


def test_another_person_sees_nothing_and_makes_nothing_for_a(g: Group) -> None:
    assert rest(g.b, "GET", "yui_threads").json() == []
    assert rest(g.b, "GET", "yui_thread_members").json() == []
    body = {"id": new_id(), "user_id": g.a.id, "title": "Mine now", "lead": g.agents["coach"]["id"]}
    assert rest(g.b, "POST", "yui_threads", body=body).status_code in DENIED
    body = {"id": new_id(), "user_id": g.b.id, "title": "Mine now", "lead": g.agents["coach"]["id"]}
    assert rest(g.b, "POST", "yui_threads", body=body).status_code in (*DENIED, 409)


def test_fifty_groups_per_person_archived_ones_included(relay: LocalRelay) -> None:
    person = relay.person()
    lead, _ = person.add_agent("Lead")
    for n in range(50):
        assert new_group(person, lead, f"Group {n}").status_code == 201
    archived = rest(
        person, "PATCH", "yui_threads", params={"title": "eq.Group 0"},
        body={"archived_at": "now"},
    )  # fmt: skip
    assert archived.status_code in (200, 204)
    more = new_group(person, lead, "One more")
    assert (more.status_code, more.json()["message"]) == (403, "limit_reached")


def test_twelve_members_per_group(relay: LocalRelay) -> None:
    person = relay.person()
    agents = [person.add_agent(f"Agent {n}")[0] for n in range(14)]
    group_id = make_group(person, "Big", agents[0], *agents[1:12])
    seat = {"thread_id": group_id, "agent_id": agents[12]["id"], "user_id": person.id}
    full = rest(person, "POST", "yui_thread_members", body=seat)
    assert (full.status_code, full.json()["message"]) == (403, "limit_reached")
    leave = rest(
        person, "PATCH", "yui_thread_members",
        params={"thread_id": f"eq.{group_id}", "agent_id": f"eq.{agents[11]['id']}"},
        body={"left_at": "now"},
    )  # fmt: skip
    assert leave.status_code in (200, 204)
    assert rest(person, "POST", "yui_thread_members", body=seat).status_code == 201
    back = rest(
        person, "PATCH", "yui_thread_members",
        params={"thread_id": f"eq.{group_id}", "agent_id": f"eq.{agents[11]['id']}"},
        body={"left_at": None},
    )  # fmt: skip
    assert (back.status_code, back.json()["message"]) == (403, "limit_reached")


# --- hosts -----------------------------------------------------------------------------------


def test_hosts_see_no_group_tables_and_no_other_members_rows(g: Group) -> None:
    host = g.hosts["coach"]
    for table in ("yui_threads", "yui_thread_members"):
        seen = g.relay.rest("GET", table, host.jwt)
        assert seen.status_code in DENIED or seen.json() == []
    msg = g.say("@Sage hello", to=["sage"])
    assert as_host(host, g.agents["sage"]) == []
    mine = g.relay.rest("GET", "yui_messages", host.jwt, params={"thread_id": f"eq.{g.id}"}).json()
    assert mine == [] and by_id(g.relay, msg)["agent_id"] == g.agents["sage"]["id"]


def test_hosts_cannot_set_the_group(g: Group) -> None:
    host, coach = g.hosts["coach"], g.agents["coach"]
    set_thread = host.reply(coach, "sneaky", thread_id=g.id)
    assert set_thread.status_code in DENIED
    ask = send(g.a, coach, "solo")
    forged = {"thread": g.id, "root": ask, "hop": 0, "mentions": ["sage"]}
    reply = host.reply(coach, "forged", id=(row := new_id()), meta={"turn": [ask], "group": forged})
    assert reply.status_code == 201
    landed = by_id(g.relay, row)
    assert landed["thread_id"] is None and "group" not in landed["meta"]
    solo = send(g.a, coach, "solo too", meta={"group": {"to": [g.agents["sage"]["id"]]}})
    assert "group" not in by_id(g.relay, solo)["meta"]


def test_group_notes_for_hosts(g: Group) -> None:
    since = "2000-01-01T00:00:00Z"
    msg = g.say("Plan my week")
    g.answer("coach", "Five days. @quill cards?", msg, "quill")
    (ask,) = [r for r in g.asks("quill")]
    g.answer("quill", "Cards done.", ask["id"])
    both = g.say("Stretches and cards?", to=["sage", "quill"])
    g.relay.sql("update yui_threads set max_turns = 2 where id = %s", (g.id,))
    g.answer("sage", "Stretches. @coach?", both, "coach")  # held: a guard in sage's look
    assert g.guards()
    assert g.control({"control": "stop"}, "[yui] group stop").status_code == 201

    def notes(host: str, agent: str, token: str | None = None) -> Any:
        body = {"agent": g.agents[agent]["id"], "thread": g.id, "since": since, "upto": None}
        return g.relay.rest("POST", "rpc/yui_group_notes", token or g.hosts[host].jwt, body=body)

    got = notes("quill", "quill")
    assert got.status_code == 200, got.text
    lines = [(n["kind"], n["name"], n["to_names"], n["words"]) for n in got.json()]
    assert lines == [
        ("asked", None, "Coach", "Plan my week"),
        ("answered", "Coach", None, "Five days. @quill cards?"),
        ("answered", "Sage", None, "Stretches. @coach?"),
        ("stopped", None, None, ""),
    ]  # never quill's own rows, the message quill was asked too, guards or status lines
    assert {n["title"] for n in got.json()} == {"Race week"}
    assert notes("quill", "sage").json() == []  # not an agent this host serves
    as_app = notes("quill", "quill", g.a.token)
    assert as_app.status_code in DENIED
    window = {"agent": g.agents["quill"]["id"], "thread": g.id, "since": since,
              "upto": by_id(g.relay, msg)["created_at"]}  # fmt: skip
    upto = g.relay.rest("POST", "rpc/yui_group_notes", g.hosts["quill"].jwt, body=window)
    assert [n["kind"] for n in upto.json()] == ["asked"]

    left = rest(
        g.a, "PATCH", "yui_thread_members",
        params={"thread_id": f"eq.{g.id}", "agent_id": f"eq.{g.agents['quill']['id']}"},
        body={"left_at": "now"},
    )  # fmt: skip
    assert left.status_code in (200, 204)
    assert notes("quill", "quill").json() == []
    meta = {"group": {"to": [g.agents["quill"]["id"]]}}
    assert refused(g.a, g.agents["coach"], "hi", thread_id=g.id, meta=meta) == (
        400,
        "group_agent_not_member",
    )
    fresh = g.say("again")
    g.answer("coach", "@quill?", fresh, "quill")
    assert len(g.asks("quill")) == 2  # the ask and the copy from before it left


def test_an_agent_that_left_hands_nothing_on(g: Group) -> None:
    msg = g.say("@Quill one for you", to=["quill"])
    rest(
        g.a, "PATCH", "yui_thread_members",
        params={"thread_id": f"eq.{g.id}", "agent_id": f"eq.{g.agents['quill']['id']}"},
        body={"left_at": "now"},
    )  # fmt: skip
    reply = g.answer("quill", "Done. @coach over to you", msg, "coach")
    assert by_id(g.relay, reply)["thread_id"] == g.id  # its answer still lands in the group
    assert g.asks("coach") == [] and g.guards() == []


def test_leaving_makes_a_held_ask_gone(g: Group) -> None:
    g.relay.sql("update yui_threads set max_hops = 1 where id = %s", (g.id,))
    msg = g.say("go", to=["sage"])
    g.answer("sage", "@coach", msg, "coach")
    (ask,) = g.asks("coach")
    g.answer("coach", "@quill", ask["id"], "quill")
    (guard,) = g.guards()
    rest(
        g.a, "PATCH", "yui_thread_members",
        params={"thread_id": f"eq.{g.id}", "agent_id": f"eq.{g.agents['quill']['id']}"},
        body={"left_at": "now"},
    )  # fmt: skip
    assert g.guards()[0]["meta"]["group"]["guard"]["state"] == "gone"
    tap = g.control({"control": "continue", "guard": guard["id"]}, "[yui] group continue")
    assert (tap.status_code, tap.json()["message"]) == (400, "group_guard_gone")


def test_unknown_and_archived_groups(g: Group) -> None:
    assert refused(g.a, g.agents["coach"], "hi", thread_id=new_id()) == (400, "group_not_found")
    archived = rest(
        g.a, "PATCH", "yui_threads", params={"id": f"eq.{g.id}"}, body={"archived_at": "now"}
    )
    assert archived.status_code in (200, 204)
    assert refused(g.a, g.agents["coach"], "hi", thread_id=g.id) == (400, "group_archived")


def test_a_host_of_a_member_still_answers_as_before(relay: LocalRelay) -> None:
    """An older host that knows nothing of groups: it reads its queue, acks, and answers with
    meta.turn; the relay puts the answer in the group."""
    g = race_week(relay)
    msg = g.say("hi all")
    host: Host = g.hosts["coach"]
    acked = relay.rest(
        "PATCH", "yui_messages", host.jwt, params={"id": f"eq.{msg}"},
        body={"delivered_at": "now", "handled_at": "now"},
    )  # fmt: skip
    assert acked.status_code in (200, 204)
    reply = g.answer("coach", "hello", msg)
    assert by_id(relay, reply)["thread_id"] == g.id
