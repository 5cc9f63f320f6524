"""The A2A plug-in asked in-process, turn by turn, against the test agents served by a2a-sdk
(1.3 as A2A 1.0, and the real 0.3): what a replayed turn does in each state a crash can leave
behind (resumed, never sent twice), `/new`, and Stop when no turn runs. No relay: the turns are
made here, and the thread's record lives in a state file of its own."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridges.a2a.plugin import A2AAgent
from bridges.client.rows import AgentInfo
from bridges.engine.turns import RetryTurn, Turn
from state.host import HostState
from tests.helpers.a2a import AgentServer, serving, venv03_missing

AGENT = AgentInfo(id=str(uuid.uuid4()), name="Echo", handle="echo", ref="echo")
GUIDE = {"version": "v1+test", "body": "## You are talking to someone in Yui"}


@pytest.fixture(scope="module", params=("1.0", "0.3"))
def agents(request: pytest.FixtureRequest) -> Iterator[AgentServer]:
    if request.param == "0.3" and (why := venv03_missing()):
        pytest.skip(why)
    with serving(request.param) as server:
        yield server


@pytest.fixture
def state(tmp_path: Path) -> HostState:
    return HostState(tmp_path / "state.json")


def turn(body: str) -> Turn:
    row = {"id": str(uuid.uuid4()), "kind": "text", "body": body, "meta": {}, "created_at": "x"}
    return Turn(AGENT, [row], GUIDE)


def sends(agents: AgentServer, t: Turn) -> list[dict[str, Any]]:
    methods = {agents.method("stream"), agents.method("send")}
    return [
        c
        for c in agents.calls()
        if c["method"] in methods and c["params"]["message"]["messageId"] == "yui-" + t.key
    ]


def test_a_turn_replayed_after_its_task_ended_is_answered_from_the_task(agents, state) -> None:
    plugin = A2AAgent(agents.echo, state)
    hi = turn("hi")
    assert plugin.answer(hi) == ["echo: hi"]
    assert state.remote(AGENT.id)["state"] == "completed"
    # A crash after the answer, before the engine wrote it: the same turn again.
    again = A2AAgent(agents.echo, state)
    assert again.answer(hi) == ["echo: hi"]
    assert len(sends(agents, hi)) == 1


def test_a_replayed_answer_to_a_question_is_sent_once_it_never_landed(agents, state) -> None:
    plugin = A2AAgent(agents.echo, state)
    assert plugin.answer(turn("book a table")) == ["Which day?"]
    waiting = state.remote(AGENT.id)
    friday = turn("Friday")
    # The bridge died after noting the answer, before sending it: the record says so.
    state.update_remote(
        AGENT.id, {"turn": friday.key, "state": None, "since": None, "into": waiting["since"]}
    )
    assert A2AAgent(agents.echo, state).answer(friday) == ["Booked for Friday."]
    (call,) = sends(agents, friday)
    assert call["params"]["message"]["taskId"] == waiting["task"]


def test_a_task_the_agent_forgot_is_sent_anew(agents, state) -> None:
    plugin = A2AAgent(agents.echo, state)
    hi = turn("hi")
    state.update_remote(AGENT.id, {"context": str(uuid.uuid4()), "task": "gone", "turn": hi.key})
    assert plugin.answer(hi) == ["echo: hi"]
    assert len(sends(agents, hi)) == 1
    book = turn("book")
    assert plugin.answer(book) == ["Which day?"]
    state.update_remote(AGENT.id, {"task": "forgotten"})  # the agent restarted meanwhile
    friday = turn("Friday")
    with pytest.raises(RetryTurn, match="the task that waited is gone"):
        plugin.answer(friday)
    assert plugin.answer(friday) == ["echo: Friday"]  # asked again: a new task


def test_new_starts_a_fresh_context_and_cancels_a_waiting_task(agents, state) -> None:
    plugin = A2AAgent(agents.echo, state)
    assert plugin.answer(turn("book a table")) == ["Which day?"]
    before = state.remote(AGENT.id)
    assert plugin.answer(turn("/new")) == ["A new conversation with Echo starts here."]
    after = state.remote(AGENT.id)
    assert after.keys() == {"context"} and after["context"] != before["context"]
    assert agents.task_state(before["task"]) == "canceled"
    hi = turn("hi")
    assert plugin.answer(hi) == ["echo: hi"]
    assert sends(agents, hi)[0]["params"]["message"]["contextId"] == after["context"]


def test_stop_with_no_turn_cancels_a_task_a_crash_left_running(agents, state) -> None:
    plugin = A2AAgent(agents.echo, state)
    gate = uuid.uuid4().hex[:8]
    slow = turn(f"slow {gate}")
    asked = threading.Thread(target=lambda: _quietly(plugin, slow), daemon=True)
    asked.start()
    deadline = threading.Event()
    while not state.remote(AGENT.id).get("task") and not deadline.wait(0.05):
        pass
    task = state.remote(AGENT.id)["task"]
    slow.cancelled.set()  # the bridge stops: the task is left for the next run
    asked.join(10)
    assert state.remote(AGENT.id)["task"] == task
    assert A2AAgent(agents.echo, state).on_stop(AGENT) is None
    assert agents.task_state(task) == "canceled"
    assert state.remote(AGENT.id).keys() == {"context"}
    agents.open(gate)


def _quietly(plugin: A2AAgent, t: Turn) -> None:
    with contextlib.suppress(RetryTurn):
        plugin.answer(t)


def test_a_compat_server_whose_card_offers_only_0_3_is_spoken_0_3(state) -> None:
    with serving("compat") as agents:
        plugin = A2AAgent(agents.legacy, state)
        assert plugin.answer(turn("book a table")) == ["Which day?"]
        friday = turn("Friday")
        assert plugin.answer(friday) == ["Booked for Friday."]
        (call,) = [c for c in agents.calls("message/stream") if c["path"] == "/legacy/"][1:]
        assert call["version"] is None and call["params"]["message"]["kind"] == "message"
        assert call["params"]["message"]["messageId"] == "yui-" + friday.key
