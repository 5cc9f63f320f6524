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
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.a2a import AgentServer, run_a2a, serving
from tests.helpers.bridge import Machine
from tests.helpers.crash import NO_LIMITS, person_writes, verify, wait_until_handled
from tests.helpers.relay import LocalRelay

KILLS = max(5, int(os.environ.get("YUI_CRASH_RUNS", "30")) // 3)


@pytest.fixture
def agents() -> Iterator[AgentServer]:
    with serving("1.0") as server:
        yield server


def test_every_message_to_an_a2a_agent_is_answered_once_in_order_across_kills(
    relay: LocalRelay, agents: AgentServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = Machine(tmp_path / "host", relay)
    person = relay.person("Crash")
    pair = [machine.pair(person, name, name.lower())["agent"] for name in ("Ada", "Bo")]
    sent: list[str] = []
    writer = threading.Thread(
        target=lambda: sent.extend(person_writes(person, pair, max(30, 2 * KILLS), "mull {n}")),
        daemon=True,
    )
    with relay.limits(**NO_LIMITS):
        writer.start()
        for _ in range(KILLS):
            bridge = run_a2a(machine, agents.echo)
            time.sleep(random.uniform(0.5, 2.0))
            bridge.kill()
        writer.join(timeout=300)
        assert not writer.is_alive()

        final = run_a2a(machine, agents.echo)
        final.wait("start", timeout=60)
        wait_until_handled(relay, pair, final)
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
