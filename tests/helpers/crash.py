"""What the randomized crash tests share: a person writing at random moments, waiting for every
row to be handled after the last restart, and counting duplicates, losses and reorderings."""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from tests.helpers.bridge import Bridge
from tests.helpers.relay import LocalRelay

# Rate limits are not what a crash test measures: a restart costs the host one yui-connect call,
# and hundreds of kills mean hundreds of restarts and a long stream of messages.
NO_LIMITS = {
    name: 100_000
    for name in (
        "connect_burst",
        "connect_per_min",
        "msg_user_burst",
        "msg_user_per_min",
        "msg_connector_burst",
        "msg_connector_per_min",
    )
}


def person_writes(
    person: Any, agents: list[dict[str, Any]], count: int, text: str = "message {n}"
) -> list[str]:
    """A stream of messages (`text`, numbered) and taps, at random moments, across the agents."""
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
            answer = person.say(agent, text.format(n=n), id=row_id)
        assert answer.status_code == 201, answer.text
        sent.append(row_id)
        time.sleep(random.uniform(0, 0.3))
    return sent


def wait_until_handled(
    relay: LocalRelay, agents: list[dict[str, Any]], bridge: Bridge, timeout: float = 180
) -> None:
    """Until no person row of `agents` is left unhandled, while `bridge` keeps running."""
    deadline = time.monotonic() + timeout
    while relay.sql(
        "select count(*) from yui_messages where agent_id = any(%s::uuid[])"
        " and sender = 'user' and handled_at is null",
        ([a["id"] for a in agents],),
    )[0][0]:
        assert time.monotonic() < deadline, "rows still unhandled after the last restart"
        assert bridge.process.poll() is None, bridge.output()
        time.sleep(0.5)


Replies = list[tuple[str, list[str]]]  # a thread's agent rows: (body, meta.turn), in order


def every_reply(replies: Replies) -> list[list[str]]:
    return [turn for _, turn in replies]


def verify(
    relay: LocalRelay,
    agents: list[dict[str, Any]],
    answers: Callable[[Replies], list[list[str]]] = every_reply,
) -> dict[str, int]:
    """Per person row, the answers that name it (`meta.turn`), and each thread's order.
    `answers` picks the answers from a thread's replies (body, turn), in order."""
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
        replies = relay.sql(
            "select body, meta->'turn' from yui_messages where agent_id = %s and"
            " sender = 'agent' order by created_at, id",
            (agent["id"],),
        )
        turns = answers([(body, turn) for body, turn in replies])
        named = Counter(row for turn in turns for row in turn)
        duplicates += sum(1 for row in rows if named[row] > 1)
        losses += sum(1 for row in rows if named[row] == 0)
        answered = list(dict.fromkeys(row for turn in turns for row in turn))
        reorderings += sum(1 for a, b in zip(answered, rows, strict=False) if a != b)
    return {"duplicates": duplicates, "losses": losses, "reorderings": reorderings}
