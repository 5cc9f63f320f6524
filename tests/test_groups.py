"""Group threads (reference §15.4), against the real relay over REST: who answers, copies,
handoffs and the hop budget, the guard row, Let it, the turn budget, Stop, status lines."""

from __future__ import annotations

import pytest

from tests.helpers.groups import Group, race_week
from tests.helpers.relay import LocalRelay
from tests.helpers.talk import as_host, by_id, queue, refused, send


@pytest.fixture
def g(relay: LocalRelay) -> Group:
    return race_week(relay)


# --- who answers ---------------------------------------------------------------------------


def test_an_unaddressed_message_goes_to_the_lead(g: Group) -> None:
    words = "Plan my week before Saturday's 10k"
    msg = g.say(words)
    row = by_id(g.relay, msg)
    assert row["agent_id"] == g.agents["coach"]["id"] and row["thread_id"] == g.id
    assert row["meta"]["group"] == {
        "thread": g.id, "root": msg, "hop": 0, "to": [g.agents["coach"]["id"]], "words": words,
    }  # fmt: skip
    assert row["body"].startswith(
        f'[yui] group "Race week" thread={g.id} with=coach,sage,quill lead=coach hop=0'
        f" from=person msg={msg}\n"
    )
    assert row["body"].endswith("\n" + words)
    assert [r["id"] for r in queue(g.hosts["coach"], g.agents["coach"])] == [msg]
    assert queue(g.hosts["sage"], g.agents["sage"]) == []
    assert queue(g.hosts["quill"], g.agents["quill"]) == []

    reply = by_id(g.relay, g.answer("coach", "Five days, easy then sharp.", msg))
    assert reply["thread_id"] == g.id
    assert reply["meta"]["group"] == {"thread": g.id, "root": msg, "hop": 0}


def test_addressees_get_the_message_and_a_copy(g: Group) -> None:
    first = g.say("Plan my week")
    g.answer("coach", "Five days, easy then sharp.", first)
    msg = g.say("Can you two fit in stretching and flash cards?", to=["sage", "quill"])
    assert by_id(g.relay, msg)["agent_id"] == g.agents["sage"]["id"]
    (copy,) = queue(g.hosts["quill"], g.agents["quill"])
    assert copy["meta"]["group"] == {"thread": g.id, "root": msg, "hop": 0, "copy_of": msg}
    assert "\n> The person: Plan my week\n> Coach: Five days, easy then sharp.\n" in copy["body"]
    assert copy["body"].endswith("\nCan you two fit in stretching and flash cards?")
    assert [r["id"] for r in queue(g.hosts["sage"], g.agents["sage"])] == [msg]
    # the lead wasn't asked
    assert [r["id"] for r in queue(g.hosts["coach"], g.agents["coach"])] == [first]


def test_a_reply_goes_to_the_author_of_the_message(g: Group) -> None:
    msg = g.say("@Sage stretches?", to=["sage"])
    bubble = g.answer("sage", "Four minutes each night.", msg)
    line = f'[yui] reply to={bubble} from=agent quote="Four minutes each night."'
    meta = {"reply_to": {"msg": bubble, "from": "agent", "quote": "Four minutes each night."}}
    again = g.say(f"{line}\nWhich ones?", meta=meta)
    row = by_id(g.relay, again)
    assert row["agent_id"] == g.agents["sage"]["id"]
    assert row["meta"]["group"]["words"] == "Which ones?"
    assert row["meta"]["reply_to"]["from"] == "agent"


@pytest.mark.parametrize(
    ("to", "code"),
    [
        (["other"], "group_agent_not_member"),  # another person's agent
        (["loose"], "group_agent_not_member"),  # an own agent outside the group
        (["coach", "sage", "quill", "loose"], "group_too_many"),
    ],
)
def test_addressee_refusals(g: Group, to: list[str], code: str) -> None:
    meta = {"group": {"to": [g.agents[h]["id"] for h in to]}}
    assert refused(g.a, g.agents["coach"], "hi", thread_id=g.id, meta=meta) == (400, code)


def test_group_row_refusals(g: Group) -> None:
    meta = {"mention": {"to": g.agents["sage"]["id"]}}
    assert refused(g.a, g.agents["coach"], "hi", thread_id=g.id, meta=meta) == (
        400,
        "group_uses_to",
    )
    # another person can't write into A's group, whichever way they try
    status, _ = refused(g.b, g.agents["other"], "hi", thread_id=g.id)
    assert status == 400
    status, _ = refused(g.b, g.agents["coach"], "hi", thread_id=g.id, user_id=g.a.id)
    assert status in (401, 403)
    control = {"group": {"control": "dance"}}
    assert refused(g.a, g.agents["coach"], "x", thread_id=g.id, meta=control) == (
        400,
        "group_control_unknown",
    )


# --- handoffs, the hop budget, the guard, Let it --------------------------------------------


def test_handoffs_hop_by_hop_until_the_guard(g: Group) -> None:
    msg = g.say("@Sage plan the wind-downs", to=["sage"])
    g.answer("sage", "Four minutes each night. @coach can you fit them in?", msg, "coach")
    (ask,) = queue(g.hosts["coach"], g.agents["coach"])
    group = ask["meta"]["group"]
    assert (group["hop"], group["from"], group["from_name"], group["root"]) == (
        1, g.agents["sage"]["id"], "Sage", msg,
    )  # fmt: skip
    assert "hop=1 from=sage " in ask["body"].splitlines()[0]
    assert ask["body"].endswith("\nFour minutes each night. @coach can you fit them in?")
    # no depth-1 mention copy in a group
    assert not [r for r in g.a.thread(g.agents["coach"]) if "mentioned" in r["meta"]]

    g.answer("coach", "Yes. @quill make cards", ask["id"], "quill")
    (ask,) = queue(g.hosts["quill"], g.agents["quill"])
    assert ask["meta"]["group"]["hop"] == 2
    g.answer("quill", "Cards done. @sage check them", ask["id"], "sage")
    ask = queue(g.hosts["sage"], g.agents["sage"])[-1]
    assert ask["meta"]["group"]["hop"] == 3
    held = g.answer("sage", "Good. @quill turn the plan into flash cards", ask["id"], "quill")

    (guard,) = g.guards()
    assert guard["sender"] == "agent" and guard["agent_id"] == g.agents["sage"]["id"]
    assert guard["body"] == (
        'Sage wants to hand this to Quill: "Good. @quill turn the plan into flash cards"\n'
        "Already 3 handoffs since your last message."
    )
    assert guard["meta"]["group"]["guard"] == {
        "to": g.agents["quill"]["id"], "to_name": "Quill", "from": g.agents["sage"]["id"],
        "msg": held, "hop": 4, "reason": "hops", "state": "held",
    }  # fmt: skip
    assert "turn" not in guard["meta"]
    assert len(g.asks("quill")) == 1  # quill was not asked again

    # Let it: handled in the lead's thread; the held ask goes on a fresh budget, once
    tap = g.control({"control": "continue", "guard": guard["id"]}, "[yui] group continue")
    assert tap.status_code == 201, tap.text
    (tapped,) = [r for r in g.rows() if r["meta"]["group"].get("control") == "continue"]
    assert tapped["agent_id"] == g.agents["coach"]["id"] and tapped["handled_at"]
    ask = queue(g.hosts["quill"], g.agents["quill"])[-1]
    assert ask["meta"]["group"]["root"] == tapped["id"] and ask["meta"]["group"]["hop"] == 1
    assert ask["meta"]["group"]["msg"] == held
    state = g.guards()[0]["meta"]["group"]["guard"]
    assert (state["state"], state["by"]) == ("continued", tapped["id"])
    again = g.control({"control": "continue", "guard": guard["id"]}, "[yui] group continue")
    assert (again.status_code, again.json()["message"]) == (400, "group_guard_gone")


def test_the_turn_budget(g: Group) -> None:
    bad = g.relay.rest(
        "PATCH", "yui_threads", g.a.token, params={"id": f"eq.{g.id}"}, body={"max_hops": 9}
    )
    assert bad.status_code == 400
    ok = g.relay.rest(
        "PATCH", "yui_threads", g.a.token, params={"id": f"eq.{g.id}"}, body={"max_turns": 2}
    )
    assert ok.status_code in (200, 204), ok.text
    msg = g.say("go")  # turn 1: coach
    g.answer("coach", "@sage yours", msg, "sage")  # turn 2: sage
    (ask,) = queue(g.hosts["sage"], g.agents["sage"])
    g.answer("sage", "@quill yours", ask["id"], "quill")  # a third turn: held
    (guard,) = g.guards()
    assert guard["meta"]["group"]["guard"]["reason"] == "turns"
    assert guard["body"].endswith("\nAlready 2 agent turns since your last message.")
    assert g.asks("quill") == []


def test_ping_pong_spends_one_budget(g: Group) -> None:
    turn = g.say("@Sage @Quill sort it out between you", to=["sage"])
    for n in range(3):
        g.answer("sage", f"@quill round {n}", turn, "quill")
        turn = queue(g.hosts["quill"], g.agents["quill"])[-1]["id"]
        g.answer("quill", f"@sage round {n}", turn, "sage")
        if g.guards():
            break
        turn = queue(g.hosts["sage"], g.agents["sage"])[-1]["id"]
    assert len(g.guards()) == 1 and g.guards()[0]["meta"]["group"]["guard"]["hop"] == 4


# --- Stop ----------------------------------------------------------------------------------


def test_stop_cancels_what_is_not_picked_up(g: Group) -> None:
    msg = g.say("@Coach go", to=["coach"])
    g.answer("coach", "@sage and @quill, over to you", msg, "sage", "quill")
    (to_sage,) = queue(g.hosts["sage"], g.agents["sage"])
    (to_quill,) = queue(g.hosts["quill"], g.agents["quill"])
    picked = g.relay.rest(
        "PATCH", "yui_messages", g.hosts["sage"].jwt, params={"id": f"eq.{to_sage['id']}"},
        body={"delivered_at": "now"},
    )  # fmt: skip
    assert picked.status_code in (200, 204), picked.text

    stop = g.control({"control": "stop"}, "[yui] group stop")
    assert stop.status_code == 201, stop.text
    cancelled = by_id(g.relay, to_quill["id"])
    assert cancelled["handled_at"] and cancelled["meta"]["group"]["cancelled"] is True
    assert queue(g.hosts["quill"], g.agents["quill"]) == []
    assert [r["id"] for r in queue(g.hosts["sage"], g.agents["sage"])] == [to_sage["id"]]
    (line,) = [r for r in g.rows() if r["meta"]["group"].get("status") == "stopped"]
    assert line["agent_id"] == g.agents["coach"]["id"] and line["sender"] == "agent"
    assert line["body"] == "Stopped. Coach's ask won't reach Quill."
    assert line["meta"]["group"]["cancelled"] == [to_quill["id"]]
    assert g.relay.sql("select stopped_at is not null from yui_threads where id = %s", (g.id,))[0][
        0
    ]

    # the turn running at Stop finishes, but its @s go nowhere
    g.answer("sage", "Done. @quill one more thing", to_sage["id"], "quill")
    assert queue(g.hosts["quill"], g.agents["quill"]) == [] and g.guards() == []

    # a new message starts a fresh chain
    fresh = g.say("@Coach again", to=["coach"])
    g.answer("coach", "@quill now you", fresh, "quill")
    (ask,) = queue(g.hosts["quill"], g.agents["quill"])
    assert ask["meta"]["group"]["root"] == fresh


def test_stop_stops_held_guards(g: Group) -> None:
    g.relay.sql("update yui_threads set max_hops = 1 where id = %s", (g.id,))
    msg = g.say("go", to=["sage"])
    g.answer("sage", "@quill", msg, "quill")
    (ask,) = queue(g.hosts["quill"], g.agents["quill"])
    g.answer("quill", "@coach", ask["id"], "coach")
    (guard,) = g.guards()
    assert g.control({"control": "stop"}, "[yui] group stop").status_code == 201
    assert g.guards()[0]["meta"]["group"]["guard"]["state"] == "stopped"
    tap = g.control({"control": "continue", "guard": guard["id"]}, "[yui] group continue")
    assert (tap.status_code, tap.json()["message"]) == (400, "group_guard_gone")


# --- status lines --------------------------------------------------------------------------


def test_status_lines_sort_under_the_message(g: Group) -> None:
    g.relay.sql("update yui_agents set push_muted = true where id = %s", (g.agents["sage"]["id"],))
    assert g.hosts["quill"].call("bye").status_code == 200
    msg = g.say("@Sage @Quill evening plans?", to=["sage", "quill"])
    rows = g.rows()
    ids = [r["id"] for r in rows]
    muted = rows[ids.index(msg) + 1]
    assert muted["agent_id"] == g.agents["sage"]["id"] and muted["sender"] == "agent"
    assert muted["meta"]["group"] == {
        "thread": g.id, "root": msg, "about": g.agents["sage"]["id"], "status": "muted",
    }  # fmt: skip
    assert muted["body"].startswith("Sage is muted. ")
    (copy,) = [r for r in rows if r["meta"]["group"].get("copy_of") == msg]
    offline = rows[ids.index(copy["id"]) + 1]
    assert offline["agent_id"] == g.agents["quill"]["id"]
    assert offline["body"] == "Quill is offline. This waits for it and goes through when it's back."
    assert [r["id"] for r in as_host(g.hosts["quill"], g.agents["quill"], sender="eq.user")] == [
        copy["id"]
    ]  # still delivered


def test_solo_threads_are_unchanged(g: Group) -> None:
    ask = send(g.a, g.agents["coach"], "solo hello")
    reply = by_id(g.relay, g.answer("coach", "Ask @sage about that.", ask, "sage"))
    assert reply["thread_id"] is None and "group" not in reply["meta"]
    (copy,) = [r for r in g.a.thread(g.agents["sage"]) if "mentioned" in r["meta"]]
    assert copy["thread_id"] is None and copy["meta"]["mentioned"]["by"] == "agent"
