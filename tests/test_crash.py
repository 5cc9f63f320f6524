"""The randomized crash test: a scripted person sends a stream of messages and taps while the
bridge is SIGKILLed at random moments and restarted. At the end every message was answered
exactly once, and in order.

`YUI_CRASH_RUNS` sets the number of kills (30 by default, as in CI; 300 for a long local run).
It prints one summary line: messages, kills, duplicates, losses, reorderings.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.bridge import Call, FakeWebhook, Machine
from tests.helpers.relay import LocalRelay

KILLS = int(os.environ.get("YUI_CRASH_RUNS", "30"))


def answer_with_a_call_id(call: Call) -> tuple[int, dict[str, str], bytes]:
    """One or two replies, each naming this call, after a short random think."""
    time.sleep(random.uniform(0, 0.15))
    tag = uuid.uuid4().hex[:12]
    parts = random.choice((1, 1, 2))
    replies = [f"call {tag} part {n}/{parts}" for n in range(1, parts + 1)]
    return 200, {"content-type": "application/json"}, json.dumps({"replies": replies}).encode()


def person_writes(person, agents: list[dict], count: int, done: threading.Event) -> list[str]:
    """A stream of messages and taps, at random moments, across the agents."""
    sent = []
    for n in range(count):
        agent = random.choice(agents)
        row_id = str(uuid.uuid4())
        if random.random() < 0.25:
            answer = person.say(
                agent,
                f"[yui] n1 choose choice=C{n}",
                id=row_id,
                kind="event",
                meta={
                    "id": "n1",
                    "preset": "choose",
                    "value": {"choice": f"C{n}"},
                    "echo": f"C{n}",
                },
            )
        else:
            answer = person.say(agent, f"message {n}", id=row_id)
        assert answer.status_code == 201, answer.text
        sent.append(row_id)
        time.sleep(random.uniform(0, 0.3))
    done.set()
    return sent


def verify(relay: LocalRelay, agents: list[dict]) -> dict[str, int]:
    """Count, per person row, the answers that name it, and check each thread's order."""
    duplicates = losses = reorderings = 0
    for agent in agents:
        person_rows = [
            r[0]
            for r in relay.sql(
                "select id::text from yui_messages where agent_id = %s and sender = 'user'"
                " order by created_at, id",
                (agent["id"],),
            )
        ]
        replies = relay.sql(
            "select body, meta->'turn' from yui_messages where agent_id = %s and"
            " sender = 'agent' order by created_at, id",
            (agent["id"],),
        )
        answers: dict[str, list[str]] = {}
        for body, turn in replies:
            answers.setdefault(body.split()[1], turn)  # one answer per webhook call
        named = Counter(row for turn in answers.values() for row in turn)
        duplicates += sum(1 for row in person_rows if named[row] > 1)
        losses += sum(1 for row in person_rows if named[row] == 0)
        in_answer_order = [row for turn in answers.values() for row in turn]
        deduped = list(dict.fromkeys(in_answer_order))
        reorderings += sum(1 for a, b in zip(deduped, person_rows, strict=False) if a != b)
    return {"duplicates": duplicates, "losses": losses, "reorderings": reorderings}


def test_every_message_is_answered_once_in_order_across_random_kills(
    relay: LocalRelay, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = FakeWebhook(answer_with_a_call_id)
    machine = Machine(tmp_path / "host", relay)
    person = relay.person("Crash")
    agents = [machine.pair(person, name, name.lower())["agent"] for name in ("Ada", "Bo")]
    messages = max(40, 2 * KILLS)
    done = threading.Event()
    sent: list[str] = []
    writer = threading.Thread(
        target=lambda: sent.extend(person_writes(person, agents, messages, done)), daemon=True
    )

    # Rate limits are not what this test measures: a restart costs the host one yui-connect
    # call, and hundreds of kills mean hundreds of restarts and a long stream of messages.
    big = 100_000
    with relay.limits(
        connect_burst=big,
        connect_per_min=big,
        msg_user_burst=big,
        msg_user_per_min=big,
        msg_connector_burst=big,
        msg_connector_per_min=big,
    ):
        writer.start()
        for _ in range(KILLS):
            bridge = machine.bridge(hook.url)
            time.sleep(random.uniform(0.3, 1.5))
            bridge.kill()
        writer.join(timeout=300)
        assert done.is_set()

        final = machine.bridge(hook.url)
        final.wait("start", timeout=60)
        deadline = time.monotonic() + 180
        while relay.sql(
            "select count(*) from yui_messages where agent_id = any(%s::uuid[])"
            " and sender = 'user' and handled_at is null",
            ([a["id"] for a in agents],),
        )[0][0]:
            assert time.monotonic() < deadline, "rows still unhandled after the last restart"
            assert final.process.poll() is None, final.output()
            time.sleep(0.5)
        assert final.terminate() == 0
        assert machine.state()["outbox"] == [] and machine.state()["acks"] == []

    counts = verify(relay, agents)
    with capsys.disabled():
        print(
            f"\ncrash test: {len(sent)} messages, {KILLS} kills, {counts['duplicates']} "
            f"duplicates, {counts['losses']} losses, {counts['reorderings']} reorderings"
        )
    assert counts == {"duplicates": 0, "losses": 0, "reorderings": 0}
    hook.close()
