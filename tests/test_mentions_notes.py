"""The host's side of mentions and groups (bridges/engine/mentions.py), against the real relay: the
notes an agent reads before its turn, read with a real host session, and the @handles a
reply's words name."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from bridges.client import host
from bridges.client.host import HostSession
from bridges.engine.mentions import NOTE_CHARS, mentions_in, notes_for
from state.host import HostState
from tests.helpers.groups import make_group
from tests.helpers.relay import LocalRelay, Person
from tests.helpers.talk import by_id, send


class Machine:
    """One paired computer serving alpha, bravo and coach, with the bridge's own session."""

    def __init__(self, relay: LocalRelay, person: Person, home: Path) -> None:
        state = HostState(home / "state.json")
        self.agents: dict[str, dict[str, Any]] = {}
        for name in ("Alpha", "Bravo", "Coach"):
            agent, code = person.add_agent(name, handle=name.lower())
            host.pair(code, ref=name.lower(), host_name="Test", url=relay.url, state=state)
            self.agents[name.lower()] = agent
        self.session = HostSession(state)
        self.session.open()
        self.person = person

    def reply(self, handle: str, body: str, turn: list[str], **meta: Any) -> str:
        row = {
            "user_id": self.session.user_id,
            "agent_id": self.agents[handle]["id"],
            "sender": "agent",
            "body": body,
            "meta": {"turn": turn, **meta},
        }
        answer = self.session.rest("POST", "yui_messages", body=row, prefer="return=representation")
        assert answer.status_code == 201, answer.text
        return answer.json()[0]["id"]

    def copy_for(self, handle: str) -> dict[str, Any]:
        rows = self.person.thread(self.agents[handle])
        asks = [r for r in rows if r["sender"] == "user"]
        return [r for r in asks if "mentioned" in r["meta"] or "group" in r["meta"]][-1]


@pytest.fixture
def machine(relay_env: LocalRelay, tmp_path: Path) -> Machine:
    return Machine(relay_env, relay_env.person("A"), tmp_path)


def stamp(relay: LocalRelay, row_id: str) -> str:
    return by_id(relay, row_id)["created_at"]


def test_mention_notes_since_the_last_turn(relay_env: LocalRelay, machine: Machine) -> None:
    a, alpha = machine.person, machine.agents["alpha"]
    loose, _ = a.add_agent("Loose", handle="loose")
    first = send(a, alpha, "Plan a leg day for Saturday")
    machine.reply("alpha", "Here it is\n```yui\ntitle Leg day\n```", [first])
    since = stamp(relay_env, first)  # alpha's last turn

    long = "@Bravo does this fit my knee? " + "really " * 120
    send(
        a,
        alpha,
        f"[yui] mention to=bravo\n{long}",
        meta={"mention": {"to": machine.agents["bravo"]["id"]}},
    )
    machine.reply(
        "bravo", "Yes:\n```yui\ntitle Knee care\n```\nGo easy.", [machine.copy_for("bravo")["id"]]
    )
    send(a, alpha, "[yui] mention to=loose\n@Loose hi", meta={"mention": {"to": loose["id"]}})
    turn = send(a, alpha, "thanks, both")
    later = send(
        a,
        alpha,
        "[yui] mention to=bravo\n@Bravo later",
        meta={"mention": {"to": machine.agents["bravo"]["id"]}},
    )

    notes = notes_for(machine.session, alpha["id"], since, stamp(relay_env, turn))
    assert len(notes) == 3  # the status line about Loose is skipped
    asked, answered, loose_asked = notes
    words = " ".join(long.split())
    assert asked == (
        "[yui] note: from your thread, the person put this to Bravo, not you: "
        + words[: NOTE_CHARS - 1] + "…"
    )  # fmt: skip
    assert answered == "[yui] note: Bravo replied in your thread: Yes: [screen] Go easy."
    assert loose_asked.endswith("put this to Loose, not you: @Loose hi")
    # a datetime works as well as the relay's string, and the window ends at `upto`
    upto = dt.datetime.fromisoformat(stamp(relay_env, later))
    assert len(notes_for(machine.session, alpha["id"], since, upto)) == 4
    assert notes_for(machine.session, alpha["id"], stamp(relay_env, turn), upto)[0].endswith(
        "@Bravo later"
    )
    # another agent's notes are its own: bravo's thread holds no mention rows of this kind
    assert notes_for(machine.session, machine.agents["bravo"]["id"], since, upto) == []


def test_group_notes_come_with_the_mention_notes(relay_env: LocalRelay, machine: Machine) -> None:
    a = machine.person
    alpha, bravo, coach = (machine.agents[h] for h in ("alpha", "bravo", "coach"))
    group = make_group(a, "Race week", alpha, bravo, coach)
    opening = send(a, alpha, "hello", thread_id=group)
    machine.reply("alpha", "Hi!", [opening])
    since = stamp(relay_env, opening)

    to_bravo = send(
        a, alpha, "@Bravo stretches?", thread_id=group, meta={"group": {"to": [bravo["id"]]}}
    )
    machine.reply("bravo", "Four minutes a night.", [to_bravo])
    solo = send(
        a, alpha, "[yui] mention to=coach\n@Coach and you?", meta={"mention": {"to": coach["id"]}}
    )
    assert by_id(relay_env, solo)["handled_at"]
    machine.reply(
        "bravo",
        "@coach over to you",
        [to_bravo],
        mentions=mentions_in("@coach over to you", "bravo"),
    )
    stop = a.say(alpha, "[yui] group stop", thread_id=group, meta={"group": {"control": "stop"}})
    assert stop.status_code == 201
    turn = send(a, alpha, "@Alpha wrap it up", thread_id=group)

    notes = notes_for(machine.session, alpha["id"], since, stamp(relay_env, turn))
    assert notes == [
        "[yui] note: in Race week, the person put this to Bravo, not you: @Bravo stretches?",
        "[yui] note: in Race week, Bravo replied: Four minutes a night.",
        "[yui] note: from your thread, the person put this to Coach, not you: @Coach and you?",
        "[yui] note: in Race week, Bravo replied: @coach over to you",
        "[yui] note: in Race week, the person pressed Stop; hand nothing more on.",
    ]
    # the handoff the reply's @ made went to coach, in the group
    assert machine.copy_for("coach")["meta"]["group"]["from_name"] == "Bravo"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("@Coach can you look? And @sage too.", ["coach", "sage"]),
        ("@coach @COACH @coach-", ["coach"]),  # once, lowercased, a trailing dash dropped
        ("mail me at sam@coach.dev, or ask @quill.", ["quill"]),  # an email is no mention
        ("@alpha asks @beta", ["beta"]),  # never its own handle
        ("@a @b @c @d", ["a", "b", "c"]),  # three at most
        ("use `@coach` like this", []),  # inline code
        ("```yui\nbutton @coach\n```\nthen @sage", ["sage"]),
        ("```python\nx = '@coach'\n```\n@sage", ["sage"]),  # any fence
        ("~~~yui\n@coach\n~~~\n@sage", ["sage"]),
        ("@sage first\n```yui\ntitle cut short @coach", ["sage"]),  # unclosed hides the rest
        ("@this_is_not_a_handle and @" + "x" * 33, []),
        ("(@sage) and @quill's notes", ["sage", "quill"]),
    ],
)
def test_mentions_in(text: str, found: list[str]) -> None:
    assert mentions_in(text, "alpha") == found
