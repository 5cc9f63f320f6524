"""A poison reply can't wedge an agent (issue 14).

The finding: a webhook answer whose ```yui fence held `custom ` and about 1,200 `[` raised
RecursionError in the gating; the turn's thread died, its row stayed delivered and never handled,
every later message to that agent waited forever, and a restart replayed the same turn into the
same crash. Now the line is an error op like any bad line (`test_yl_limits.py`), and, deeper,
whatever a turn raises, the engine asks it again with growing waits and after MAX_TURN_FAILURES
gives it up: the person gets one line, the rows are handled, and the agent answers the next
message.

End to end through the real gateway and `yui run-webhook`; the engine is also driven in-process,
with plug-ins that raise, to count its asks.
"""

from __future__ import annotations

import json
import logging
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bridges.client.host import HostSession
from bridges.engine import plan
from bridges.engine import writing as engine
from bridges.engine.bridge import Bridge, BridgeOptions
from bridges.engine.delivery import write_outbox
from bridges.engine.plan import MAX_TURN_FAILURES
from bridges.engine.plugin import AgentPlugin
from bridges.engine.replies import UNDELIVERED
from bridges.engine.turns import Turn
from bridges.retry import Backoff
from state.host import HostState, OutboxItem
from tests.helpers.bridge import FakeWebhook, Machine, echo, reply
from tests.helpers.cli import ROOT
from tests.helpers.relay import LocalRelay, Person

BODY = "my passport number is X1234567"  # a row's body never reaches the log
POISON = "Here is your screen:\n```yui\ncustom " + "[" * 1_200 + "\n```"


def say(person: Person, agent: dict[str, Any], body: str, **row: Any) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id, **row).status_code == 201
    return row_id


def answers(person: Person, agent: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(r["body"], r["meta"]) for r in person.thread(agent) if r["sender"] == "agent"]


def handled(person: Person, agent: dict[str, Any], row_id: str) -> bool:
    return any(r["id"] == row_id and r["handled_at"] for r in person.thread(agent))


# --- end to end: the real gateway, `yui run-webhook` ----------------------------------------------


def test_a_poison_reply_is_delivered_and_the_agent_answers_the_next_message(
    relay: LocalRelay, machine: Machine
) -> None:
    """Before: the turn's thread died in the gating, `hi` was never handled, `again` never
    reached the webhook."""
    hook = FakeWebhook(lambda call: reply(POISON) if len(hook.calls) == 1 else echo(call))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    hi = say(person, agent, "hi")
    bridge.acked([hi])
    again = say(person, agent, "again")
    bridge.acked([again])
    # The bad line is sent as written, as every bad line is: the phone shows it as one.
    assert answers(person, agent) == [(POISON, {"turn": [hi]}), ("echo: again", {"turn": [again]})]
    assert handled(person, agent, hi) and handled(person, agent, again)
    assert len(hook.calls) == 2
    hook.close()


def test_a_turn_that_keeps_failing_gets_one_line_and_the_agent_is_free_again(
    relay: LocalRelay, machine: Machine
) -> None:
    """A tap whose value nests 600 deep (the relay takes it) breaks the bridge's own reading of
    the person's photos on every ask: after MAX_TURN_FAILURES the person is told once, the row is
    handled, and the next message is answered as usual."""
    hook = FakeWebhook()
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    deep = json.loads("[" * 600 + "]" * 600)
    meta = {"id": "c1", "preset": "choose", "value": {"pick": deep}}
    tap = say(person, agent, "[yui] c1 choose pick=x", kind="event", meta=meta)
    retries = [bridge.wait("retry", what="agent", turn=[tap]) for _ in range(2)]
    assert all(r["reason"].startswith("RecursionError") for r in retries)
    assert retries[0]["wait"] < retries[1]["wait"]
    gave_up = bridge.wait("error", agent=agent["handle"], turn=[tap])
    assert f"failed {MAX_TURN_FAILURES} times" in gave_up["reason"]
    bridge.acked([tap])
    hi = say(person, agent, "hi")
    bridge.acked([hi])
    assert answers(person, agent) == [
        (UNDELIVERED, {"turn": [tap], "status": True}),
        ("echo: hi", {"turn": [hi]}),
    ]
    assert handled(person, agent, tap) and len(hook.calls) == 1
    assert not any(e["event"] == "retry" and e.get("turn") == [hi] for e in bridge.seen)
    hook.close()


# --- in-process: a plug-in that raises ------------------------------------------------------------


class Flaky(AgentPlugin):
    """Raises RuntimeError on its first `failures` asks, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.asked: list[list[str]] = []

    def answer(self, turn: Turn) -> list[str]:
        self.asked.append(turn.ids)
        if len(self.asked) <= self.failures:
            raise RuntimeError("a bug in the plug-in")
        return [f"answer to {turn.text}"]


class Heard:
    """The events of a bridge running in this process."""

    def __init__(self) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []

    def wait(self, event: str, timeout: float = 30, **match: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no {event} {match} within {timeout} s; saw {self.seen[-8:]}"
            try:
                got = self.events.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(got)
            if got["event"] == event and all(got.get(k) == v for k, v in match.items()):
                return got


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed turn's waits a tenth as long (0.2 s, 0.4 s, …), without jitter."""

    class Quick(Backoff):
        def __init__(self, first: float = 1.0, *, jitter: float = 1.0) -> None:
            super().__init__(first / 10, jitter=0.0)

    monkeypatch.setattr(plan, "Backoff", Quick)


@contextmanager
def running(machine: Machine, plugin: AgentPlugin) -> Iterator[Heard]:
    state = HostState(machine.home / "state.json")
    heard = Heard()
    options = BridgeOptions(interval=0.3, live=False)
    bridge = Bridge(HostSession(state, machine.relay.url), state, plugin, heard.events.put, options)
    thread = threading.Thread(target=bridge.run, daemon=True)
    thread.start()
    try:
        heard.wait("start")
        yield heard
    finally:
        bridge.stop()
        thread.join(30)
        assert not thread.is_alive()


def test_a_plug_in_that_raises_is_asked_again_and_answers(
    relay: LocalRelay, machine: Machine, quick: None, caplog: pytest.LogCaptureFixture
) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    plugin = Flaky(failures=MAX_TURN_FAILURES - 1)
    with caplog.at_level(logging.ERROR, logger="yui.bridge"), running(machine, plugin) as heard:
        hi = say(person, agent, BODY)
        retries = [heard.wait("retry", what="agent") for _ in range(MAX_TURN_FAILURES - 1)]
        heard.wait("answer", turn=[hi])
        heard.wait("ack", ids=[hi])
    assert [r["reason"] for r in retries] == ["RuntimeError: a bug in the plug-in"] * 2
    assert retries[0]["wait"] < retries[1]["wait"]
    assert plugin.asked == [[hi]] * MAX_TURN_FAILURES
    assert answers(person, agent) == [(f"answer to {BODY}", {"turn": [hi]})]
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(logged) == 2
    for message in logged:  # the agent's name, where it failed, what: no row's body
        assert message.startswith(f"a turn of @{agent['handle']} failed:\nTraceback")
        assert message.endswith("\nRuntimeError: a bug in the plug-in") and BODY not in message


def test_a_plug_in_that_keeps_raising_is_given_up_once_and_the_next_message_answered(
    relay: LocalRelay, machine: Machine, quick: None
) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    plugin = Flaky(failures=MAX_TURN_FAILURES)
    with running(machine, plugin) as heard:
        hi = say(person, agent, "hi")
        gave_up = heard.wait("error", agent=agent["handle"], turn=[hi])
        heard.wait("ack", ids=[hi])
        again = say(person, agent, "again")
        heard.wait("ack", ids=[again])
    assert gave_up["reason"] == (
        f"a turn of @{agent['handle']} failed {MAX_TURN_FAILURES} times "
        "(RuntimeError: a bug in the plug-in); the person was told its answer couldn't be delivered"
    )
    assert plugin.asked == [[hi]] * MAX_TURN_FAILURES + [[again]]
    assert answers(person, agent) == [
        (UNDELIVERED, {"turn": [hi], "status": True}),
        ("answer to again", {"turn": [again]}),
    ]
    assert handled(person, agent, hi)


def test_a_restart_replays_the_failing_turn_and_gives_up_after_as_many_failures(
    relay: LocalRelay, machine: Machine, quick: None
) -> None:
    """The count isn't kept across runs: each run asks a failing turn at most
    MAX_TURN_FAILURES times, so a restart can't loop on it forever."""
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    first = Flaky(failures=1_000)
    with running(machine, first) as heard:
        hi = say(person, agent, "hi")
        heard.wait("retry", what="agent", turn=[hi])
    assert answers(person, agent) == []
    again = Flaky(failures=1_000)
    with running(machine, again) as heard:
        heard.wait("error", agent=agent["handle"], turn=[hi])
        heard.wait("ack", ids=[hi])
    assert again.asked == [[hi]] * MAX_TURN_FAILURES
    assert answers(person, agent) == [(UNDELIVERED, {"turn": [hi], "status": True})]
    with running(machine, Flaky(failures=0)) as heard:
        hello = say(person, agent, "hello")
        heard.wait("ack", ids=[hello])
    assert answers(person, agent)[-1] == ("answer to hello", {"turn": [hello]})


def test_the_writer_survives_a_bug_and_writes_the_reply(
    relay: LocalRelay, machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every agent's replies wait on the one writer: a bug in a pass is logged and retried."""
    real = engine.write_outbox
    passes: list[int] = []

    def first_pass_fails(*args: Any, **kwargs: Any) -> None:
        passes.append(1)
        if len(passes) == 1:
            raise RuntimeError("a bug in the writer")
        real(*args, **kwargs)

    monkeypatch.setattr(engine, "write_outbox", first_pass_fails)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    with running(machine, Flaky(failures=0)) as heard:
        retry = heard.wait("retry", what="relay")
        hi = say(person, agent, "hi")
        heard.wait("ack", ids=[hi])
    assert retry["reason"] == "writing failed: RuntimeError: a bug in the writer"
    assert answers(person, agent) == [("answer to hi", {"turn": [hi]})]


def test_a_reply_that_cannot_be_prepared_is_sent_as_written(
    relay: LocalRelay, machine: Machine
) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    state = HostState(machine.home / "state.json")
    session = HostSession(state, relay.url)
    session.open()
    row = {
        "id": str(uuid.uuid4()),
        "user_id": session.user_id,
        "agent_id": agent["id"],
        "sender": "agent",
        "kind": "text",
        "body": "```yui\nimage ~/photo.png\n```",
        "meta": {},
    }
    state.enqueue(OutboxItem(row))
    events: list[tuple[str, dict[str, Any]]] = []

    def broken(*args: Any) -> OutboxItem:
        raise RecursionError("maximum recursion depth exceeded")

    write_outbox(
        session,
        state,
        lambda event, **fields: events.append((event, fields)),
        prepare=broken,
        notify=lambda item: None,
    )
    assert state.snapshot().outbox == ()
    assert answers(person, agent) == [(row["body"], {})]
    assert (
        "error",
        {"id": row["id"], "reason": "couldn't prepare a reply (RecursionError): sent as written"},
    ) in events


# --- a model's answer, cleaned before the gating -------------------------------------------------


def test_a_model_answer_of_opening_think_tags_is_cleaned_in_one_pass() -> None:
    """Cleaning read `<think>…</think>` with one lazy regex: a 10 MB answer of `<think>` took it
    hours of a turn's thread (100,000 of them, 8 minutes). Run apart, with a bounded wait."""
    code = (
        "from bridges.model.clean import clean\n"
        "print(repr(clean('Hi. ' + '<think>' * 1_400_000)[:12]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == repr("Hi. <think><") + "\n"
