"""What one live turn asks of the relay (issue 21): a real bridge and the real relay, with a
counting proxy between them. Counted, never timed: at most four HTTP requests a turn on
average (the row the socket carried is used as it is, mention notes are read only when a row
says there are some, and nothing is read again after a turn nobody spoke during), and still
every row answered once, in order, a row sent mid-turn included."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.proxy import CountingProxy
from tests.helpers.bridge import Call, FakeWebhook, Machine, echo, reply
from tests.helpers.relay import LocalRelay

TURNS = 8
MOST_PER_TURN = 4


@pytest.fixture
def proxy(relay: LocalRelay) -> Iterator[CountingProxy]:
    counting = CountingProxy(relay.port)
    yield counting
    counting.close()
    loop = counting._loop  # stopped by `close`, but left open
    while loop.is_running():
        time.sleep(0.01)
    loop.close()


def http_requests(counts: Counter[str]) -> Counter[str]:
    """The HTTP requests among what the proxy counted (a websocket's frames are not)."""
    return Counter({kind: n for kind, n in counts.items() if not kind.startswith("websocket")})


def say(person, agent, body: str) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id).status_code == 201
    return row_id


def answered_once_in_order(person, agent, asked: list[str]) -> None:
    """Every row in `asked` has exactly one reply naming it, and the replies come in the order
    the rows were sent."""
    replies = [r for r in person.thread(agent) if r["sender"] == "agent"]
    named = [i for r in replies for i in (r.get("meta") or {}).get("turn", [])]
    assert [i for i in named if i in asked] == asked


def test_a_live_turn_asks_the_relay_at_most_four_times(
    relay: LocalRelay, tmp_path: Path, proxy: CountingProxy
) -> None:
    machine = Machine(tmp_path / "host", relay, url=proxy.url)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    with FakeWebhook(echo) as hook:
        bridge = machine.bridge(hook.url, YUI_HEARTBEAT="600")
        bridge.wait("live", up=True)
        bridge.acked([say(person, agent, "warm up")])
        proxy.reset()
        asked = []
        for n in range(TURNS):
            row_id = say(person, agent, f"turn {n}")
            assert bridge.wait("turn", turn=[row_id])["by"] == "live"
            bridge.acked([row_id])
            asked.append(row_id)
        counts = http_requests(proxy.snapshot()[0])
        machine.stop_all()
    per_turn = sum(counts.values()) / TURNS
    assert per_turn <= MOST_PER_TURN, f"{per_turn:.2f} requests a turn: {dict(counts)}"
    answered_once_in_order(person, agent, asked)


def test_a_row_sent_mid_turn_is_its_own_next_turn(
    relay: LocalRelay, tmp_path: Path, proxy: CountingProxy
) -> None:
    machine = Machine(tmp_path / "host", relay, url=proxy.url)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    release = threading.Event()

    def slow_first(call: Call) -> tuple[int, dict[str, str], bytes]:
        if "first" in call.payload["text"]:
            release.wait(20)
        return reply("echo: " + call.payload["text"])

    with FakeWebhook(slow_first) as hook:
        bridge = machine.bridge(hook.url, YUI_HEARTBEAT="600")
        bridge.wait("live", up=True)
        first = say(person, agent, "first")
        bridge.wait("turn", turn=[first])
        second = say(person, agent, "second, sent while the first is asked")
        third = say(person, agent, "third, sent while the first is asked")
        hook.wait_calls(1)
        release.set()
        bridge.wait("turn", turn=[second, third])
        bridge.acked([first, second, third])
        machine.stop_all()
    answered_once_in_order(person, agent, [first, second, third])


def test_mention_notes_are_read_only_after_a_mention_row(
    relay: LocalRelay, tmp_path: Path, proxy: CountingProxy
) -> None:
    machine = Machine(tmp_path / "host", relay, url=proxy.url)
    person = relay.person()
    alpha = machine.pair(person, "Alpha", "alpha")["agent"]
    coach, _ = person.add_agent("Coach")  # on no computer yet: the relay says so in a line
    with FakeWebhook(echo) as hook:
        bridge = machine.bridge(hook.url, YUI_HEARTBEAT="600")
        bridge.wait("live", up=True)
        bridge.acked([say(person, alpha, "warm up")])
        reads = []
        mention = {"mention": {"to": coach["id"]}}
        body = "[yui] mention to=coach\n@Coach does this fit my knee?"
        assert person.say(alpha, body, meta=mention).status_code == 201
        for text in ("thanks", "and one more"):
            proxy.reset()
            row_id = say(person, alpha, text)
            bridge.acked([row_id])
            reads.append(proxy.snapshot()[0]["GET /rest/v1/yui_messages"])
        machine.stop_all()
    first, second = hook.calls[1].payload["text"], hook.calls[2].payload["text"]
    assert first.splitlines() == [
        "[yui] note: from your thread, the person put this to Coach, not you:"
        " @Coach does this fit my knee?",
        "thanks",
    ]
    assert second == "and one more"
    assert reads == [1, 0]
