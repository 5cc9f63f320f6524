"""Mentions and groups end to end: two hosts, each a real `yui run-webhook` process with its own
fake webhook, on the real relay. The relay routes; the bridges only put the notes before a
turn and fill `meta.mentions` from a reply's @handles."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.bridge import Call, FakeWebhook, Machine, echo, reply
from tests.helpers.groups import make_group
from tests.helpers.relay import LocalRelay, Person

TIMEOUT = 60.0


def eventually(check: Callable[[], Any], what: str) -> Any:
    """The first truthy result of `check`, polled until TIMEOUT (a ceiling, not a measure)."""
    deadline = time.monotonic() + TIMEOUT
    while not (found := check()):
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.2)
    return found


@pytest.fixture
def machines(relay: LocalRelay, tmp_path: Path) -> Iterator[tuple[Machine, Machine]]:
    one, two = Machine(tmp_path / "one", relay), Machine(tmp_path / "two", relay)
    yield one, two
    one.stop_all()
    two.stop_all()


def send(person: Person, agent: dict[str, Any], body: str, **row: Any) -> str:
    row_id = str(uuid.uuid4())
    answer = person.say(agent, body, id=row_id, **row)
    assert answer.status_code == 201, answer.text
    return row_id


def alpha_and_coach(
    relay: LocalRelay, machines: tuple[Machine, Machine], alpha: FakeWebhook, coach: FakeWebhook
) -> tuple[Person, dict[str, Any], dict[str, Any]]:
    """A person with Alpha on one host and Coach on the other, both bridges started."""
    person = relay.person()
    one, two = machines
    alpha_agent = one.pair(person, "Alpha", "alpha")["agent"]
    coach_agent = two.pair(person, "Coach", "coach")["agent"]
    one.bridge(alpha.url).wait("start")
    two.bridge(coach.url).wait("start")
    return person, alpha_agent, coach_agent


def ask_coach(person: Person, alpha: dict[str, Any], coach: dict[str, Any]) -> str:
    """The person, in Alpha's thread, puts a question to Coach."""
    words = "[yui] mention to=coach\n@Coach does this fit my knee?"
    return send(person, alpha, words, meta={"mention": {"to": coach["id"]}})


def mirrored(person: Person, alpha: dict[str, Any]) -> list[dict[str, Any]]:
    """The answers to mentions that the relay mirrored into Alpha's thread."""
    return [r for r in person.thread(alpha) if "mention_reply" in r["meta"]]


def test_a_mention_across_two_hosts(relay: LocalRelay, machines: tuple[Machine, Machine]) -> None:
    def alpha_script(call: Call) -> tuple[int, dict[str, str], bytes]:
        if call.payload["text"] == "Plan a leg day for Saturday":
            return reply("Here it is\n```yui\ntitle Leg day\ncheck Squats\n```")
        return echo(call)

    alpha_hook = FakeWebhook(alpha_script)
    coach_hook = FakeWebhook(lambda call: reply("Yes, if you go easy on the squats."))
    try:
        person, alpha, coach = alpha_and_coach(relay, machines, alpha_hook, coach_hook)

        send(person, alpha, "Plan a leg day for Saturday")
        eventually(
            lambda: [r for r in person.thread(alpha) if r["sender"] == "agent"], "Alpha's answer"
        )
        ask_coach(person, alpha, coach)

        (copy,) = coach_hook.wait_calls(1)
        text = copy.payload["text"]
        assert text.startswith("[yui] mention from=alpha by=person msg=")
        assert "\n> Alpha: Here it is [screen]\n" in text
        assert text.endswith("\n@Coach does this fit my knee?")
        eventually(lambda: mirrored(person, alpha), "Coach's answer in Alpha's thread")

        send(person, alpha, "thanks")
        calls = alpha_hook.wait_calls(2)
        assert calls[1].payload["text"].splitlines() == [
            "[yui] note: from your thread, the person put this to Coach, not you:"
            " @Coach does this fit my knee?",
            "[yui] note: Coach replied in your thread: Yes, if you go easy on the squats.",
            "thanks",
        ]
    finally:
        alpha_hook.close()
        coach_hook.close()


def test_an_answer_mirrored_after_the_askers_next_turn_is_its_note_on_the_one_after(
    relay: LocalRelay, machines: tuple[Machine, Machine]
) -> None:
    """The answer lands in the asker's thread after the asker has already read its notes for
    another turn: the asker's host hears that row (an agent's) and reads the notes again."""
    answer = threading.Event()

    def coach_script(call: Call) -> tuple[int, dict[str, str], bytes]:
        answer.wait(TIMEOUT)
        return reply("Yes, if you go easy on the squats.")

    # Alpha answers plainly: an echo would repeat "@Coach" and mention Coach a second time
    alpha_hook, coach_hook = FakeWebhook(lambda call: reply("ok")), FakeWebhook(coach_script)
    try:
        person, alpha, coach = alpha_and_coach(relay, machines, alpha_hook, coach_hook)

        ask_coach(person, alpha, coach)
        coach_hook.wait_calls(1)
        send(person, alpha, "meanwhile")  # its turn reads the mention's note, not the answer
        alpha_hook.wait_calls(1)
        answer.set()
        eventually(lambda: mirrored(person, alpha), "Coach's answer in Alpha's thread")
        send(person, alpha, "thanks")
        calls = alpha_hook.wait_calls(2)
        assert calls[1].payload["text"].splitlines() == [
            "[yui] note: Coach replied in your thread: Yes, if you go easy on the squats.",
            "thanks",
        ]
    finally:
        answer.set()
        alpha_hook.close()
        coach_hook.close()


def test_a_group_of_three_hands_off_until_the_guard(
    relay: LocalRelay, machines: tuple[Machine, Machine]
) -> None:
    passes = {"coach": "sage", "sage": "quill", "quill": "coach"}  # each hands to the next

    def script(call: Call) -> tuple[int, dict[str, str], bytes]:
        handle = call.payload["agent"]["handle"]
        return reply(f"My part is done. @{passes[handle]} over to you.")

    hook_one, hook_two = FakeWebhook(script), FakeWebhook(script)
    try:
        person = relay.person()
        one, two = machines
        coach = one.pair(person, "Coach", "coach")["agent"]
        sage = one.pair(person, "Sage", "sage")["agent"]
        quill = two.pair(person, "Quill", "quill")["agent"]
        one.bridge(hook_one.url).wait("start")
        two.bridge(hook_two.url).wait("start")
        group = make_group(person, "Race week", coach, sage, quill)
        limits = relay.rest(
            "PATCH", "yui_threads", person.token, params={"id": f"eq.{group}"},
            body={"max_hops": 2},
        )  # fmt: skip
        assert limits.status_code in (200, 204), limits.text

        def rows() -> list[dict[str, Any]]:
            return relay.rest(
                "GET", "yui_messages", person.token,
                params={"thread_id": f"eq.{group}", "order": "created_at.asc,id.asc"},
            ).json()  # fmt: skip

        def guards(state: str) -> list[dict[str, Any]]:
            held = [r for r in rows() if r["sender"] == "agent" and "guard" in r["meta"]["group"]]
            return [r for r in held if r["meta"]["group"]["guard"]["state"] == state]

        send(person, coach, "Plan my week before Saturday's 10k", thread_id=group)
        # coach (hop 0) → sage (hop 1) → quill (hop 2); quill's ask would be hop 3: held
        (held,) = eventually(lambda: guards("held"), "the guard row")
        assert held["agent_id"] == quill["id"]
        assert held["meta"]["group"]["guard"]["reason"] == "hops"
        first = hook_one.calls[0].payload["text"]
        assert first.startswith('[yui] group "Race week" thread=')

        tap = {"group": {"control": "continue", "guard": held["id"]}}
        send(person, coach, f"[yui] group continue guard={held['id']}", thread_id=group, meta=tap)
        # a fresh budget: coach (hop 1) → sage (hop 2); sage's ask would be hop 3: held again
        (again,) = eventually(lambda: guards("held"), "the second guard row")
        assert again["agent_id"] == sage["id"]
        coach_turns = [c for c in hook_one.calls if c.payload["agent"]["handle"] == "coach"]
        assert "[yui] note: in Race week, Quill replied:" in coach_turns[-1].payload["text"]

        stop = {"group": {"control": "stop"}}
        send(person, coach, "[yui] group stop", thread_id=group, meta=stop)
        eventually(lambda: guards("stopped"), "the guard stopped")
        (line,) = [r for r in rows() if r["meta"]["group"].get("status") == "stopped"]
        assert line["agent_id"] == coach["id"] and line["body"].startswith("Stopped.")
        again_tap = {"group": {"control": "continue", "guard": again["id"]}}
        late = person.say(
            coach, "[yui] group continue", id=str(uuid.uuid4()), thread_id=group, meta=again_tap
        )
        assert late.status_code == 400
    finally:
        hook_one.close()
        hook_two.close()
