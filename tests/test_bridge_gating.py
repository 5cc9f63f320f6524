"""A reply never carries a screen the person's app can't draw: the bridge turns it into words,
and the agent's next turn starts with one line saying what not to send yet."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.helpers.bridge import FakeWebhook, Machine, reply

TIMELINE = 'Where we are:\n```yui\ntimeline "This week"\ndone "Plan" at="Mon"\nnow "Build"\n```'


def test_an_older_app_gets_words_and_the_agent_a_note(relay, tmp_path: Path) -> None:
    hook = FakeWebhook(lambda call: reply(TIMELINE))
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    first = str(uuid.uuid4())
    person.say(agent, "status?", id=first)
    gated = bridge.wait("gated")
    assert gated["presets"] == ["timeline"]
    bridge.acked([first])
    (written,) = [r for r in person.thread(agent) if r["sender"] == "agent"]
    assert written["body"].startswith("Where we are:\n")  # the words outside stay as they were
    assert "```yui" not in written["body"] and "Plan" in written["body"]

    second = str(uuid.uuid4())
    person.say(agent, "and now?", id=second)
    calls = hook.wait_calls(2)
    lines = calls[1].payload["text"].splitlines()
    assert lines[0].startswith("[yui] ") and "timeline" in lines[0]
    assert lines[1:] == ["and now?"]
    assert calls[1].payload["messages"][0]["id"] == second
    machine.stop_all()
    hook.close()


def test_an_app_that_draws_it_gets_it_as_written(relay, tmp_path: Path) -> None:
    hook = FakeWebhook(lambda call: reply(TIMELINE))
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    phone = relay.fn(
        "yui-push", {"action": "register", "token": "ef" * 32, "build": 69}, person.token
    )
    assert phone.status_code == 200, phone.text
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    row_id = str(uuid.uuid4())
    person.say(agent, "status?", id=row_id)
    bridge.acked([row_id])
    (written,) = [r for r in person.thread(agent) if r["sender"] == "agent"]
    assert written["body"] == TIMELINE
    assert not any(e["event"] == "gated" for e in bridge.seen)
    assert json.loads(machine.yui("status", "--json").stdout)["relay"] == "reachable"
    machine.stop_all()
    hook.close()
