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
from pathlib import Path

import pytest

from tests.helpers.bridge import Call, FakeWebhook, Machine
from tests.helpers.crash import NO_LIMITS, person_writes, verify, wait_until_handled
from tests.helpers.relay import LocalRelay

KILLS = int(os.environ.get("YUI_CRASH_RUNS", "30"))


def answer_with_a_call_id(call: Call) -> tuple[int, dict[str, str], bytes]:
    """One or two replies, each naming this call, after a short random think."""
    time.sleep(random.uniform(0, 0.15))
    tag = uuid.uuid4().hex[:12]
    parts = random.choice((1, 1, 2))
    replies = [f"call {tag} part {n}/{parts}" for n in range(1, parts + 1)]
    return 200, {"content-type": "application/json"}, json.dumps({"replies": replies}).encode()


def one_answer_per_call(replies: list[tuple[str, list[str]]]) -> list[list[str]]:
    """The answers of a thread: one per webhook call (its id is the reply's second word)."""
    answers: dict[str, list[str]] = {}
    for body, turn in replies:
        answers.setdefault(body.split()[1], turn)
    return list(answers.values())


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

    def write() -> None:
        sent.extend(person_writes(person, agents, messages))
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    with relay.limits(**NO_LIMITS):
        writer.start()
        for _ in range(KILLS):
            bridge = machine.bridge(hook.url)
            time.sleep(random.uniform(0.3, 1.5))
            bridge.kill()
        writer.join(timeout=300)
        assert done.is_set()

        final = machine.bridge(hook.url)
        final.wait("start", timeout=60)
        wait_until_handled(relay, agents, final)
        assert final.terminate() == 0
        assert machine.state()["outbox"] == [] and machine.state()["acks"] == []

    counts = verify(relay, agents, one_answer_per_call)
    with capsys.disabled():
        print(
            f"\ncrash test: {len(sent)} messages, {KILLS} kills, {counts['duplicates']} "
            f"duplicates, {counts['losses']} losses, {counts['reorderings']} reorderings"
        )
    assert counts == {"duplicates": 0, "losses": 0, "reorderings": 0}
    hook.close()
