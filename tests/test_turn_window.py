"""A reply's turn opens nothing once it is old (issue 14), through the real gateway with the
hosts' session tokens.

What a reply sets off rests on the rows its `meta.turn` names: its @s become copies in other
agents' threads, its answer to a mention is mirrored into the thread the mention came from, its
@s in a group become handoffs. A turn row counts only while its agent hasn't finished it or
finished it within the turn window (0019_turn_window.sql), so a host can't name an old,
handled row to drop a copy into a sibling's thread whenever it likes. The reply itself always
lands: only what it would set off is dropped. Time travels by moving `handled_at` as the
database's superuser, never by sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers.groups import race_week
from tests.helpers.relay import Host, LocalRelay, Person
from tests.helpers.talk import answer, by_id, queue, send, thread_rows

WINDOW = 300  # seconds: the `turn_window_seconds` limit
HOUR = 3600


@dataclass
class World:
    relay: LocalRelay
    a: Person
    alpha: dict[str, Any]
    bravo: dict[str, Any]
    ha: Host
    hb: Host


@pytest.fixture
def world(relay: LocalRelay) -> World:
    a = relay.person("A")
    alpha, alpha_code = a.add_agent("Alpha", handle="alpha")
    bravo, bravo_code = a.add_agent("Bravo", handle="bravo")
    return World(
        relay, a, alpha, bravo, Host.pair(relay, alpha_code, "alpha"),
        Host.pair(relay, bravo_code, "bravo"),
    )  # fmt: skip


def ack(host: Host, row_id: str, when: str = "now") -> None:
    """The host marks the person's row handled, as a bridge does after its turn."""
    answer_ = host.relay.rest(
        "PATCH", "yui_messages", host.jwt, params={"id": f"eq.{row_id}"},
        body={"delivered_at": when, "handled_at": when},
    )  # fmt: skip
    assert answer_.status_code in (200, 204), answer_.text


def age(relay: LocalRelay, row_id: str, seconds: int) -> None:
    """Pretend the row was handled `seconds` ago."""
    relay.sql(
        "update yui_messages set handled_at = now() - make_interval(secs => %s) where id = %s",
        (seconds, row_id),
    )


def handled_at(relay: LocalRelay, row_id: str) -> Any:
    return relay.sql("select handled_at from yui_messages where id = %s", (row_id,))[0][0]


def turn(world: World, ago: int | None) -> str:
    """A person's row in alpha's thread: unfinished (None), or answered and acked `ago` seconds
    ago by alpha's host."""
    ask = send(world.a, world.alpha, "Plan a leg day for Saturday")
    if ago is not None:
        answer(world.ha, world.alpha, "Here is the plan.", [ask])
        ack(world.ha, ask)
        age(world.relay, ask, ago)
    return ask


def copies(person: Person, agent: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in thread_rows(person, agent, "user") if "mentioned" in r["meta"]]


def mirrors(world: World) -> list[dict[str, Any]]:
    rows = thread_rows(world.a, world.alpha, "agent")
    return [r for r in rows if "mention_reply" in r["meta"]]


def test_the_window_is_a_limit_the_operator_can_read(relay: LocalRelay) -> None:
    ((value, note),) = relay.sql(
        "select value, note from yui_limits where name = 'turn_window_seconds'"
    )
    assert value == WINDOW and "mention" in note


@pytest.mark.parametrize("ago", [WINDOW + 60, HOUR, 30 * 24 * HOUR])
def test_an_old_finished_turn_puts_no_copy_in_a_siblings_thread(world: World, ago: int) -> None:
    ask = turn(world, ago)
    reply = answer(world.ha, world.alpha, "@bravo psst, one more thing", [ask], mentions=["bravo"])
    # the reply lands as written, in alpha's thread, where the person reads it...
    assert by_id(world.relay, reply)["meta"] == {"turn": [ask], "mentions": ["bravo"]}
    assert reply in {r["id"] for r in thread_rows(world.a, world.alpha, "agent")}
    # ...but bravo is not asked
    assert copies(world.a, world.bravo) == []
    assert queue(world.hb, world.bravo) == []


@pytest.mark.parametrize("ago", [None, 0, WINDOW - 60], ids=["unfinished", "now", "in-window"])
def test_a_turn_still_open_copies_as_before(world: World, ago: int | None) -> None:
    ask = turn(world, ago)
    reply = answer(world.ha, world.alpha, "Let me ask @bravo.", [ask], mentions=["bravo"])
    (copy,) = copies(world.a, world.bravo)
    assert copy["body"].startswith(f"[yui] mention from=alpha by=agent msg={reply}\n")
    assert [r["id"] for r in queue(world.hb, world.bravo)] == [copy["id"]]


def test_a_host_cannot_reopen_or_refresh_a_finished_turn(world: World) -> None:
    ask = turn(world, HOUR)
    before = handled_at(world.relay, ask)
    for when in (None, "now", "2100-01-01T00:00:00Z"):
        answer_ = world.relay.rest(
            "PATCH", "yui_messages", world.ha.jwt, params={"id": f"eq.{ask}"},
            body={"handled_at": when},
        )  # fmt: skip
        assert answer_.status_code in (200, 204), answer_.text  # an ack again is harmless...
        assert handled_at(world.relay, ask) == before  # ...and changes nothing
    answer(world.ha, world.alpha, "@bravo psst", [ask], mentions=["bravo"])
    assert copies(world.a, world.bravo) == []


def test_an_ack_is_stamped_with_the_relays_clock(world: World) -> None:
    ask = send(world.a, world.alpha, "hi")
    ack(world.ha, ask, "2100-01-01T00:00:00Z")  # a host can't hold a turn open by post-dating
    (stamped,) = world.relay.sql(
        "select handled_at <= now() from yui_messages where id = %s", (ask,)
    )
    assert stamped == (True,)


def test_an_old_mention_copy_is_not_mirrored_again(world: World) -> None:
    body = "[yui] mention to=bravo\n@Bravo does this fit my knee?"
    send(world.a, world.alpha, body, meta={"mention": {"to": world.bravo["id"]}})
    (copy,) = copies(world.a, world.bravo)
    first = answer(world.hb, world.bravo, "Yes, go easy on the squats.", [copy["id"]])
    ack(world.hb, copy["id"])

    age(world.relay, copy["id"], HOUR)
    late = answer(world.hb, world.bravo, "Buy my course!", [copy["id"]])
    assert late in {r["id"] for r in thread_rows(world.a, world.bravo, "agent")}
    assert [m["meta"]["mention_reply"]["msg"] for m in mirrors(world)] == [first]


@pytest.mark.parametrize(("ago", "asked"), [(HOUR, 0), (WINDOW - 60, 1)])
def test_an_old_group_ask_hands_nothing_on(relay: LocalRelay, ago: int, asked: int) -> None:
    g = race_week(relay)
    msg = g.say("@Sage plan the wind-downs", to=["sage"])
    g.answer("sage", "Four minutes each night.", msg)
    ack(g.hosts["sage"], msg)
    age(relay, msg, ago)
    late = g.answer("sage", "@quill make cards", msg, "quill")
    assert by_id(relay, late)["thread_id"] == g.id  # still drawn in the group
    assert len(g.asks("quill")) == asked
    assert len(queue(g.hosts["quill"], g.agents["quill"])) == asked
