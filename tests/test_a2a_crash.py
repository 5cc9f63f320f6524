"""The randomized crash test (tests/test_crash.py) with an A2A agent: a scripted person sends a
stream of messages and taps to two agents served by a2a-sdk 1.3 (each answer takes up to
0.3 s) while `yui run-a2a` is SIGKILLed at random moments and restarted. At the end every
message was answered exactly once, in order.

A third of `YUI_CRASH_RUNS` kills (10 by default). It prints one summary line, with the turns
the agent was sent twice: a kill between the send and the agent naming its task can only send
again (the answer still lands once).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.a2a import AgentServer, run_a2a, serving
from tests.helpers.bridge import Machine
from tests.helpers.relay import LocalRelay

KILLS = max(5, int(os.environ.get("YUI_CRASH_RUNS", "30")) // 3)


@pytest.fixture
def agents() -> Iterator[AgentServer]:
    with serving("1.0") as server:
        yield server


def person_writes(person: Any, agents: list[dict[str, Any]], count: int) -> list[str]:
    """A stream of messages and taps, at random moments, across the agents."""
    sent = []
    for n in range(count):
        agent = random.choice(agents)
        row_id = str(uuid.uuid4())
        if random.random() < 0.25:
            value = {"choice": f"C{n}"}
            meta = {"id": "n1", "preset": "choose", "value": value, "echo": f"C{n}"}
            answer = person.say(
                agent, f"[yui] n1 choose choice=C{n}", id=row_id, kind="event", meta=meta
            )
        else:
            answer = person.say(agent, f"mull {n}", id=row_id)
        assert answer.status_code == 201, answer.text
        sent.append(row_id)
        time.sleep(random.uniform(0, 0.3))
    return sent


def verify(relay: LocalRelay, agents: list[dict[str, Any]]) -> dict[str, int]:
    """Per person row, the replies that name it (`meta.turn`), and each thread's order."""
    duplicates = losses = reorderings = 0
    for agent in agents:
        rows = [
            r[0]
            for r in relay.sql(
                "select id::text from yui_messages where agent_id = %s and sender = 'user'"
                " order by created_at, id",
                (agent["id"],),
            )
        ]
        turns = [
            r[0]
            for r in relay.sql(
                "select meta->'turn' from yui_messages where agent_id = %s and sender = 'agent'"
                " order by created_at, id",
                (agent["id"],),
            )
        ]
        named = Counter(row for turn in turns for row in turn)
        duplicates += sum(1 for row in rows if named[row] > 1)
        losses += sum(1 for row in rows if named[row] == 0)
        answered = list(dict.fromkeys(row for turn in turns for row in turn))
        reorderings += sum(1 for a, b in zip(answered, rows, strict=False) if a != b)
    return {"duplicates": duplicates, "losses": losses, "reorderings": reorderings}


def test_every_message_to_an_a2a_agent_is_answered_once_in_order_across_kills(
    relay: LocalRelay, agents: AgentServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = Machine(tmp_path / "host", relay)
    person = relay.person("Crash")
    pair = [machine.pair(person, name, name.lower())["agent"] for name in ("Ada", "Bo")]
    sent: list[str] = []
    writer = threading.Thread(
        target=lambda: sent.extend(person_writes(person, pair, max(30, 2 * KILLS))), daemon=True
    )
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
            bridge = run_a2a(machine, agents.echo)
            time.sleep(random.uniform(0.5, 2.0))
            bridge.kill()
        writer.join(timeout=300)
        assert not writer.is_alive()

        final = run_a2a(machine, agents.echo)
        final.wait("start", timeout=60)
        deadline = time.monotonic() + 180
        while relay.sql(
            "select count(*) from yui_messages where agent_id = any(%s::uuid[])"
            " and sender = 'user' and handled_at is null",
            ([a["id"] for a in pair],),
        )[0][0]:
            assert time.monotonic() < deadline, "rows still unhandled after the last restart"
            assert final.process.poll() is None, final.output()
            time.sleep(0.5)
        assert final.terminate() == 0
        assert machine.state()["outbox"] == [] and machine.state()["acks"] == []
    machine.stop_all()

    counts = verify(relay, pair)
    sends = Counter(
        c["params"]["message"]["messageId"] for c in agents.calls("SendStreamingMessage")
    )
    again = sum(1 for n in sends.values() if n > 1)
    with capsys.disabled():
        print(
            f"\nA2A crash test: {len(sent)} messages, {KILLS} kills, {counts['duplicates']} "
            f"duplicates, {counts['losses']} losses, {counts['reorderings']} reorderings, "
            f"{again} turns sent twice"
        )
    assert counts == {"duplicates": 0, "losses": 0, "reorderings": 0}
