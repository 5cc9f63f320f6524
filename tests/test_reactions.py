"""Reactions and replies, against the real relay: the event row reaches the agent as its line
and sets the emoji on the agent's row; a reply's quote line reaches the agent unchanged."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner

from tests.helpers.relay import Host, LocalRelay, Person
from tests.helpers.talk import answer, as_host, by_id, new_id, queue, refused, send
from yui_cli.main import cli


@dataclass
class World:
    relay: LocalRelay
    a: Person
    coach: dict[str, Any]
    other: dict[str, Any]
    host: Host
    ask: str
    reply: str  # coach's answer


@pytest.fixture
def world(relay: LocalRelay) -> World:
    a = relay.person("A")
    coach, code = a.add_agent("Coach", handle="coach")
    other, _ = a.add_agent("Other", handle="other")
    host = Host.pair(relay, code, "coach")
    ask = send(a, coach, "Plan my week")
    reply = answer(host, coach, "Five days, easy then sharp.\n```yui\ntitle Week\n```", [ask])
    return World(relay, a, coach, other, host, ask, reply)


def react(world: World, emoji: str | None, msg: str | None = None, **row: Any) -> str:
    target = msg or world.reply
    body = f"[yui] react msg={target} emoji={emoji or 'none'}\n> Five days, easy then sharp."
    meta = {"react": {"msg": target, "emoji": emoji}}
    return send(world.a, world.coach, body, kind="event", meta=meta, **row)


def reaction(world: World) -> str | None:
    return by_id(world.relay, world.reply)["reaction"]


def test_a_reaction_sets_the_emoji_and_reaches_the_agent(world: World) -> None:
    row_id = react(world, "👍")
    target = by_id(world.relay, world.reply)
    assert target["reaction"] == "👍" and target["reacted_at"] is not None
    (event,) = [r for r in queue(world.host, world.coach) if r["id"] == row_id]
    assert event["kind"] == "event"
    assert event["body"].startswith(f"[yui] react msg={world.reply} emoji=👍\n> ")
    assert event["meta"]["react"] == {"msg": world.reply, "emoji": "👍"}
    # the host reads the emoji on its own row, too
    (mine,) = [r for r in as_host(world.host, world.coach) if r["id"] == world.reply]
    assert mine["reaction"] == "👍"


def test_taken_back_changed_and_newest_wins(world: World) -> None:
    react(world, "🔥")
    react(world, "❤")  # the heart without its variation selector is the heart
    assert reaction(world) == "❤️"
    react(world, None)
    assert reaction(world) is None
    react(world, "🤔")
    earlier = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)).isoformat()
    react(world, "👎", created_at=earlier)  # an older tap that arrived late
    assert reaction(world) == "🤔"


@pytest.mark.parametrize(
    ("emoji", "msg", "code"),
    [
        ("👍", "not-a-row", "react_needs_msg"),
        ("😀", None, "unknown_reaction"),
        ("👍", "ask", "react_msg_not_found"),  # the person's own row
        ("👍", "random", "react_msg_not_found"),
    ],
)
def test_refusals(world: World, emoji: str, msg: str | None, code: str) -> None:
    target = {"ask": world.ask, "random": new_id(), None: world.reply}.get(msg, msg)
    meta = {"react": {"msg": target, "emoji": emoji}}
    assert refused(world.a, world.coach, "[yui] react", kind="event", meta=meta) == (400, code)
    assert reaction(world) is None


def test_a_reaction_belongs_to_the_thread_of_the_row(world: World) -> None:
    meta = {"react": {"msg": world.reply, "emoji": "👍"}}
    assert refused(world.a, world.other, "[yui] react", kind="event", meta=meta) == (
        400,
        "react_msg_not_found",
    )


def test_nobody_writes_the_column_directly(world: World) -> None:
    as_host_row = world.host.reply(world.coach, "self-praise", reaction="🔥")
    assert as_host_row.status_code in (401, 403)
    as_person = world.a.say(world.coach, "hi", reaction="🔥")
    assert as_person.status_code == 400  # only an agent's row wears one
    patch = world.relay.rest(
        "PATCH", "yui_messages", world.a.token, params={"id": f"eq.{world.reply}"},
        body={"reaction": "🔥"},
    )  # fmt: skip
    assert patch.status_code in (401, 403)
    assert reaction(world) is None


def test_a_resent_reaction_is_409(world: World) -> None:
    row_id = react(world, "👍")
    again = world.a.say(
        world.coach, "[yui] react", id=row_id, kind="event",
        meta={"react": {"msg": world.reply, "emoji": "🔥"}},
    )  # fmt: skip
    assert again.status_code == 409
    assert reaction(world) == "👍"


# --- replies ---------------------------------------------------------------------------------


def test_a_reply_line_reaches_the_agent_unchanged(world: World) -> None:
    line = f'[yui] reply to={world.reply} from=agent quote="Five days, easy then sharp."'
    body = f"{line}\nCan Friday be a rest day?"
    quote = "Five days, easy then sharp."
    meta = {"reply_to": {"msg": world.reply, "from": "user", "quote": quote + " " * 3 + "x" * 200}}
    row_id = send(world.a, world.coach, body, meta=meta)
    (row,) = [r for r in queue(world.host, world.coach) if r["id"] == row_id]
    assert row["body"] == body
    reply_to = row["meta"]["reply_to"]
    assert reply_to["msg"] == world.reply
    assert reply_to["from"] == "agent"  # the relay knows who wrote the row
    assert len(reply_to["quote"]) == 120 and reply_to["quote"].startswith(quote + " x")


@pytest.mark.parametrize(
    ("msg", "code"),
    [(None, "reply_needs_msg"), ("nope", "reply_needs_msg"), ("random", "reply_msg_not_found")],
)
def test_reply_refusals(world: World, msg: str | None, code: str) -> None:
    meta = {"reply_to": {"msg": new_id() if msg == "random" else msg, "from": "agent"}}
    assert refused(world.a, world.coach, "[yui] reply\nhi", meta=meta) == (400, code)


def test_a_reply_to_another_threads_row_is_refused(world: World) -> None:
    meta = {"reply_to": {"msg": world.reply, "from": "agent", "quote": "x"}}
    assert refused(world.a, world.other, "[yui] reply\nhi", meta=meta) == (
        400,
        "reply_msg_not_found",
    )


# --- the app's commands ----------------------------------------------------------------------


def yui(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_yui_app_react_and_reply(relay_env: LocalRelay) -> None:
    yui("app", "signup", "ria")
    (made,) = yui("app", "add-agent", "Coach", "--handle", "coach")
    host = Host.pair(relay_env, made["code"], "coach")
    coach = made["agent"]
    (said,) = yui("app", "say", "plan my week")
    answered = answer(host, coach, 'Here it is "sharp"\n```yui\ntitle Week\n```', [said["id"]])

    (reacted,) = yui("app", "react", "last", "up", "--meaning", "build it")
    assert reacted["kind"] == "event"
    assert reacted["body"] == (
        f'[yui] react msg={answered} emoji=👍 meaning="build it"\n> Here it is "sharp" [screen]'
    )
    assert by_id(relay_env, answered)["reaction"] == "👍"
    yui("app", "react", answered, "none")
    assert by_id(relay_env, answered)["reaction"] is None

    (replied,) = yui("app", "reply", answered, "Can Friday be a rest day?")
    line = f'[yui] reply to={answered} from=agent quote="Here it is \\"sharp\\""'
    assert replied["body"] == f"{line}\nCan Friday be a rest day?"
    assert replied["meta"]["reply_to"] == {
        "msg": answered,
        "from": "agent",
        "quote": 'Here it is "sharp"',
    }
    (seen,) = [r for r in queue(host, coach) if r["id"] == replied["id"]]
    assert seen["body"] == replied["body"]
    bad = CliRunner().invoke(cli, ["app", "react", answered, "😀"])
    assert bad.exit_code == 1 and "not a reaction" in bad.stderr
