"""The engine's Stop hook (`AgentPlugin.on_stop`, which the A2A plug-in needs to cancel a task
left waiting for input): called on every Stop, whether a turn runs or not, off the engine's
lock; a line it returns lands after "Stopped."; one that raises is logged and changes nothing
else. The engine runs in-process against the real relay, with plug-ins made here."""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bridges.client.host import HostSession
from bridges.client.rows import AgentInfo
from bridges.engine.bridge import Bridge, BridgeOptions
from bridges.engine.plugin import AgentPlugin
from bridges.engine.turns import RetryTurn, Turn
from state.host import HostState
from tests.helpers.a2a import wait_for
from tests.helpers.bridge import Machine
from tests.helpers.relay import LocalRelay


class Holding(AgentPlugin):
    """Holds `hold` until its turn is cancelled; answers anything else; on Stop, says a line
    (or raises, when `broken`)."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.stops: list[tuple[str, bool]] = []  # (agent handle, a turn was held)
        self.holding = threading.Event()
        self._turn: Turn | None = None

    def answer(self, turn: Turn) -> list[str]:
        if turn.rows[0]["body"] == "hold":
            self._turn = turn
            self.holding.set()
            turn.cancelled.wait(30)
            raise RetryTurn("cancelled")
        return [f"answer to {turn.rows[0]['body']}"]

    def on_stop(self, agent: AgentInfo) -> str | None:
        held = self._turn is not None and self._turn.cancelled.is_set()
        self.stops.append((agent.handle, held))
        self._turn = None
        if self.broken:
            raise RuntimeError("a bug in the hook")
        return "The agent's task was cancelled too."


@contextmanager
def running(machine: Machine, plugin: AgentPlugin) -> Iterator[queue.Queue[dict[str, Any]]]:
    state = HostState(machine.home / "state.json")
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    options = BridgeOptions(interval=0.3, live=False)
    bridge = Bridge(HostSession(state, machine.relay.url), state, plugin, events.put, options)
    thread = threading.Thread(target=bridge.run, daemon=True)
    thread.start()
    try:
        yield events
    finally:
        bridge.stop()
        thread.join(30)
        assert not thread.is_alive()


def say(person: Any, agent: dict[str, Any], body: str, **row: Any) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id, **row).status_code == 201
    return row_id


def agent_rows(person: Any, agent: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (r["kind"], r["body"], r["meta"]) for r in person.thread(agent) if r["sender"] == "agent"
    ]


def handled(relay: LocalRelay, row_id: str) -> bool:
    return bool(relay.sql("select handled_at from yui_messages where id = %s", (row_id,))[0][0])


def test_stop_calls_the_hook_with_and_without_a_turn_and_its_line_lands(
    relay: LocalRelay, machine: Machine
) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    plugin = Holding()
    with running(machine, plugin):
        held = say(person, agent, "hold")
        assert plugin.holding.wait(30)
        first = say(person, agent, "stop", kind="control", meta={"op": "stop"})
        wait_for(lambda: len(agent_rows(person, agent)) == 2, why="Stopped. and the hook's line")
        second = say(person, agent, "stop", kind="control", meta={"op": "stop"})  # no turn runs
        wait_for(lambda: len(agent_rows(person, agent)) == 4, why="the second Stop's rows")
        wait_for(lambda: all(handled(relay, r) for r in (held, first, second)), why="acks")
    line = ("text", "The agent's task was cancelled too.", {"status": True})
    stopped = ("control", "Stopped.")
    assert [row[:2] if row[0] == "control" else row for row in agent_rows(person, agent)] == [
        stopped,
        line,
        stopped,
        line,
    ]
    assert plugin.stops == [("coach", True), ("coach", False)]


def test_a_hook_that_raises_is_logged_and_the_agent_goes_on(
    relay: LocalRelay, machine: Machine, caplog: pytest.LogCaptureFixture
) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    plugin = Holding(broken=True)
    with caplog.at_level(logging.ERROR, logger="yui.bridge"), running(machine, plugin):
        stop = say(person, agent, "stop", kind="control", meta={"op": "stop"})
        wait_for(lambda: plugin.stops, why="the hook called")
        hi = say(person, agent, "hi")
        wait_for(lambda: handled(relay, hi) and handled(relay, stop), why="the next answer")
    assert [row[1] for row in agent_rows(person, agent)] == ["Stopped.", "answer to hi"]
    (logged,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged.startswith(f"stopping @{agent['handle']} failed:\nTraceback")
    assert logged.endswith("RuntimeError: a bug in the hook")
