"""Mentions (reference §15.3), against the real relay over REST: the routing, each refusal with
its code, the resend, the status lines and the depth-1 guard.

A has alpha and bravo, each on its own host, and "Loose", on none; B has charlie.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers.relay import Host, LocalRelay, Person
from tests.helpers.talk import (
    answer,
    as_host,
    by_id,
    new_id,
    queue,
    refused,
    send,
    thread_rows,
)


@dataclass
class World:
    relay: LocalRelay
    a: Person
    b: Person
    alpha: dict[str, Any]
    bravo: dict[str, Any]
    loose: dict[str, Any]
    charlie: dict[str, Any]
    ha: Host
    hb: Host
    hc: Host
    ask: str  # the person's first row in alpha's thread
    screen: str  # alpha's answer to it, with a screen


@pytest.fixture
def world(relay: LocalRelay) -> World:
    a, b = relay.person("A"), relay.person("B")
    alpha, alpha_code = a.add_agent("Alpha", handle="alpha")
    bravo, bravo_code = a.add_agent("Bravo", handle="bravo")
    loose, _ = a.add_agent("Loose", handle="loose")
    charlie, charlie_code = b.add_agent("Charlie", handle="charlie")
    ha = Host.pair(relay, alpha_code, "alpha")
    hb = Host.pair(relay, bravo_code, "bravo")
    hc = Host.pair(relay, charlie_code, "charlie")
    ask = send(a, alpha, "Plan a leg day for Saturday")
    screen = answer(ha, alpha, "Here it is\n```yui\ntitle Leg day\ncheck Squats\n```", [ask])
    return World(relay, a, b, alpha, bravo, loose, charlie, ha, hb, hc, ask, screen)


def mention(world: World, to: dict[str, Any], words: str, **row: Any) -> str:
    body = f"[yui] mention to={to['handle']}\n{words}"
    return send(world.a, world.alpha, body, meta={"mention": {"to": to["id"]}}, **row)


def copies(person: Person, agent: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in thread_rows(person, agent, "user") if "mentioned" in r["meta"]]


def mirrors(world: World) -> list[dict[str, Any]]:
    rows = thread_rows(world.a, world.alpha, "agent")
    return [r for r in rows if "mention_reply" in r["meta"]]


# --- the person's mention ------------------------------------------------------------------


def test_the_mention_lands_handled_and_alpha_is_never_asked(world: World) -> None:
    src = mention(world, world.bravo, "@Bravo does this fit my knee?")
    row = by_id(world.relay, src)
    assert row["delivered_at"] and row["handled_at"]
    assert row["meta"]["mention"] == {"to": world.bravo["id"], "handle": "bravo", "name": "Bravo"}
    assert src not in {r["id"] for r in queue(world.ha, world.alpha)}


def test_bravo_gets_one_copy_with_the_quote(world: World) -> None:
    src = mention(world, world.bravo, "@Bravo does this fit my knee?")
    (copy,) = copies(world.a, world.bravo)
    assert copy["meta"]["mentioned"] == {
        "from": world.alpha["id"],
        "from_name": "Alpha",
        "from_handle": "alpha",
        "msg": src,
        "by": "person",
        "depth": 1,
    }
    body = copy["body"]
    assert body.startswith(f"[yui] mention from=alpha by=person msg={src}\n")
    assert "\n> The person: Plan a leg day for Saturday\n" in body
    assert "\n> Alpha: Here it is [screen]\n" in body
    assert body.endswith("\n@Bravo does this fit my knee?")
    assert "to=bravo" not in body
    assert [r["id"] for r in queue(world.hb, world.bravo)] == [copy["id"]]
    assert as_host(world.hb, world.alpha) == []  # still can't read alpha's thread


def test_an_online_unmuted_agent_gets_no_status_line(world: World) -> None:
    mention(world, world.bravo, "@Bravo hi")
    statuses = [r for r in mirrors(world) if "status" in r["meta"]["mention_reply"]]
    assert statuses == []


def test_the_answer_is_mirrored_back_once(world: World) -> None:
    src = mention(world, world.bravo, "@Bravo does this fit my knee?")
    (copy,) = copies(world.a, world.bravo)
    reply = answer(world.hb, world.bravo, "Yes, if you go easy on the squats.", [copy["id"]])
    (mirror,) = mirrors(world)
    assert mirror["sender"] == "agent" and mirror["body"] == "Yes, if you go easy on the squats."
    assert mirror["meta"] == {
        "mention_reply": {
            "agent": world.bravo["id"],
            "name": "Bravo",
            "handle": "bravo",
            "msg": reply,
            "to": src,
        }
    }
    assert mirror["id"] in {r["id"] for r in as_host(world.ha, world.alpha)}
    # a bravo row answering nothing mention-related stays in bravo's thread
    own = send(world.a, world.bravo, "and something else")
    answer(world.hb, world.bravo, "just for bravo", [own])
    assert len(mirrors(world)) == 1


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ("charlie", "mention_agent_not_found"),  # another person's agent
        ("alpha", "mention_agent_not_found"),  # the agent you're in
        ("not-a-uuid", "mention_needs_agent"),
        (None, "mention_needs_agent"),
    ],
)
def test_refusals(world: World, target: str | None, code: str) -> None:
    to = getattr(world, target)["id"] if target in ("charlie", "alpha") else target
    meta = {"mention": {"to": to}} if to is not None else {"mention": {}}
    assert refused(world.a, world.alpha, "[yui] mention to=x\nhi", meta=meta) == (400, code)
    assert thread_rows(world.b, world.charlie) == []


def test_a_resent_mention_is_409_and_makes_no_second_copy(world: World) -> None:
    src = mention(world, world.bravo, "@Bravo once")
    again = world.a.say(
        world.alpha, "[yui] mention to=bravo\n@Bravo once", id=src,
        meta={"mention": {"to": world.bravo["id"]}},
    )  # fmt: skip
    assert again.status_code == 409
    assert len(copies(world.a, world.bravo)) == 1


# --- status lines --------------------------------------------------------------------------


def status_under(world: World, src: str) -> dict[str, Any]:
    """The status line, which must sort right under the mention in alpha's thread."""
    rows = thread_rows(world.a, world.alpha)
    at = [r["id"] for r in rows].index(src)
    line = rows[at + 1]
    assert line["sender"] == "agent" and line["meta"]["mention_reply"]["to"] == src
    assert "turn" not in line["meta"]
    return line


def test_an_agent_on_no_computer_yet(world: World) -> None:
    src = mention(world, world.loose, "@Loose are you there?")
    line = status_under(world, src)
    assert line["meta"]["mention_reply"]["status"] == "pending"
    assert line["body"] == (
        "Loose isn't on a computer yet. This waits for it and goes through once it's paired."
    )
    assert len(copies(world.a, world.loose)) == 1  # still delivered


def test_muted_asleep_offline_and_not_listening(world: World) -> None:
    relay, a = world.relay, world.a
    muted = relay.rest(
        "PATCH", "yui_agents", a.token, params={"id": f"eq.{world.bravo['id']}"},
        body={"push_muted": True},
    )  # fmt: skip
    assert muted.status_code in (200, 204), muted.text
    src = mention(world, world.bravo, "@Bravo muted?")
    line = status_under(world, src)
    assert line["meta"]["mention_reply"]["status"] == "muted"
    assert line["body"].startswith("Bravo is muted. ")
    relay.sql("update yui_agents set push_muted = false where id = %s", (world.bravo["id"],))

    relay.sql(
        "update yui_connectors set last_seen_at = now() - interval '5 minutes' where id = %s",
        (world.hb.connector["id"],),
    )
    src = mention(world, world.bravo, "@Bravo asleep?")
    assert status_under(world, src)["body"] == (
        "Bravo's computer is asleep. This waits for it and goes through when it wakes."
    )

    assert world.hb.call("bye").status_code == 200
    src = mention(world, world.bravo, "@Bravo offline?")
    line = status_under(world, src)
    assert line["meta"]["mention_reply"]["status"] == "offline"
    assert line["body"] == "Bravo is offline. This waits for it and goes through when it's back."
    assert len(copies(a, world.bravo)) == 3  # each one still reached bravo

    quiet, code = a.add_agent("Quiet", handle="quiet")
    Host.pair(relay, code, "quiet", serving=[])  # a bridge that reports, but not this agent
    src = mention(world, quiet, "@Quiet hello")
    assert status_under(world, src)["meta"]["mention_reply"]["status"] == "not_listening"


def test_quotes_never_include_status_lines(world: World) -> None:
    mention(world, world.loose, "@Loose first")
    mention(world, world.bravo, "@Bravo second")
    (copy,) = copies(world.a, world.bravo)
    assert "on a computer yet" not in copy["body"]
    assert "> The person: @Loose first" in copy["body"]


# --- agents @ing each other, depth 1 -------------------------------------------------------


def test_an_agent_mentions_inside_a_turn_the_person_started(world: World) -> None:
    ask = send(world.a, world.alpha, "Ask Bravo about my knee")
    reply = answer(
        world.ha, world.alpha, "Let me check with @bravo about the knee.", [ask],
        mentions=["bravo"],
    )  # fmt: skip
    (copy,) = copies(world.a, world.bravo)
    assert copy["body"].startswith(f"[yui] mention from=alpha by=agent msg={reply}\n")
    assert "> The person: Ask Bravo about my knee" in copy["body"]
    assert copy["body"].endswith("\nLet me check with @bravo about the knee.")
    assert copy["meta"]["mentioned"]["by"] == "agent"

    # bravo's answer is mirrored back, and its own @ starts nothing: depth 1
    back = answer(world.hb, world.bravo, "Fine. @alpha note it.", [copy["id"]], mentions=["alpha"])
    assert [m["meta"]["mention_reply"]["msg"] for m in mirrors(world)] == [back]
    assert copies(world.a, world.alpha) == []


def test_agent_mentions_that_go_nowhere(world: World) -> None:
    ask = send(world.a, world.alpha, "hello")
    answer_ = world.ha.reply(world.alpha, "@bravo no turn", meta={"mentions": ["bravo"]})
    assert answer_.status_code == 201
    answer(world.ha, world.alpha, "@bravo a random turn", [new_id()], mentions=["bravo"])
    for handle in ("charlie", "alpha", "nobody", "@Alpha"):
        answer(world.ha, world.alpha, f"@{handle}", [ask], mentions=[handle])
    assert copies(world.a, world.bravo) == []
    assert copies(world.b, world.charlie) == []
    # answering a mirror (an agent row, not the person's) starts nothing either
    mention(world, world.bravo, "@Bravo hi")
    (copy,) = copies(world.a, world.bravo)
    answer(world.hb, world.bravo, "hi back", [copy["id"]])
    (mirror,) = mirrors(world)
    answer(world.ha, world.alpha, "@bravo again", [mirror["id"]], mentions=["bravo"])
    assert len(copies(world.a, world.bravo)) == 1


def test_only_the_first_three_names_count(world: World) -> None:
    extra = [world.a.add_agent(name, handle=name.lower())[0] for name in ("Dee", "Eve")]
    ask = send(world.a, world.alpha, "ask everyone")
    answer(
        world.ha, world.alpha, "asking", [ask],
        mentions=["nobody", "@Bravo", "dee", "eve"],
    )  # fmt: skip
    assert len(copies(world.a, world.bravo)) == 1
    assert len(copies(world.a, extra[0])) == 1
    assert copies(world.a, extra[1]) == []  # the fourth name
