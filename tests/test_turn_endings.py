"""Turns that end at once are written with one edit of the state file (`bridges/engine/endings.py`):
the ends queued while the engine's lock is held go together, a Stop's abandoned turn writes
nothing, and an edit that fails fails every turn it carried. No relay: the engine's end of a
turn against a real state file."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from bridges.client.rows import AgentInfo
from bridges.engine.asking import Asking
from bridges.engine.endings import Endings
from bridges.engine.plan import Running
from bridges.engine.turns import Turn
from state.errors import BadInput
from state.host import HostState, OutboxItem, TurnEnd
from tests.helpers.plan import row

AGENTS = ("coach", "sage", "muse")


class CountingState(HostState):
    """A real state file that counts its `finish_turns` edits (and can be made to fail)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.edits: list[list[str]] = []  # the agents of each finish_turns edit
        self.broken = False

    def finish_turns(self, ends: Any) -> None:
        ends = list(ends)
        self.edits.append([end.agent_id for end in ends])
        if self.broken:
            raise BadInput("the disk is full")
        super().finish_turns(ends)


class Engine(Asking):
    """Just what `Asking._end` needs of a bridge."""

    def __init__(self, state: HostState) -> None:
        self.state = state
        self._lock = threading.RLock()
        self._endings = Endings()
        self._turns: set[Running] = set()
        self._busy: dict[str, Running] = {}
        self.events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


def started(engine: Engine) -> list[Running]:
    """A turn for each agent, in flight on disk and in memory."""
    turns = []
    for name in AGENTS:
        agent = AgentInfo(id=f"agent-{name}", name=name, handle=name, ref=name)
        running = Running(Turn(agent, [row(f"hi {name}", agent.id)]))
        engine._turns.add(running)
        engine._busy[agent.id] = running
        turns.append(running)
    engine.state.set_inflight({r.turn.agent.id: r.turn.ids for r in turns})
    return turns


def reply_to(running: Running) -> OutboxItem:
    agent = running.turn.agent.id
    answer = {"id": f"reply-{agent}", "agent_id": agent, "sender": "agent", "body": "ok"}
    return OutboxItem({**answer, "meta": {"turn": running.turn.ids}}, ack=tuple(running.turn.ids))


def end_together(engine: Engine, turns: list[Running]) -> list[bool | Exception]:
    """Each turn ended from its own thread while the engine's lock is held, then let go."""
    results: list[bool | Exception] = []

    def end(running: Running) -> None:
        try:
            results.append(engine._end(running, [reply_to(running)]))
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=end, args=(running,)) for running in turns]
    with engine._lock:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while len(engine._endings._queued) < len(turns) and time.monotonic() < deadline:
            time.sleep(0.005)
    for thread in threads:
        thread.join(10)
    return results


def test_turns_that_end_at_once_are_written_in_one_edit(tmp_path: Path) -> None:
    state = CountingState(tmp_path / "state.json")
    engine = Engine(state)
    turns = started(engine)

    assert end_together(engine, turns) == [True, True, True]

    assert [sorted(edit) for edit in state.edits] == [sorted(f"agent-{n}" for n in AGENTS)]
    on_disk = HostState(state.path).snapshot()
    assert on_disk.inflight == {}
    assert sorted(item.id for item in on_disk.outbox) == sorted(f"reply-agent-{n}" for n in AGENTS)
    assert engine._busy == {} and engine._turns == set()


def test_a_turn_a_stop_abandoned_writes_nothing_and_the_others_end(tmp_path: Path) -> None:
    state = CountingState(tmp_path / "state.json")
    engine = Engine(state)
    coach, *others = started(engine)
    coach.abandoned = True  # the person's Stop came while the agent answered

    results = end_together(engine, [coach, *others])

    assert sorted(results, key=bool) == [False, True, True]
    assert ("discarded", {"agent": "coach", "turn": coach.turn.ids}) in engine.events
    outbox = [item.id for item in HostState(state.path).snapshot().outbox]
    assert sorted(outbox) == ["reply-agent-muse", "reply-agent-sage"]


def test_an_edit_that_fails_fails_every_turn_it_carried(tmp_path: Path) -> None:
    state = CountingState(tmp_path / "state.json")
    engine = Engine(state)
    turns = started(engine)
    state.broken = True

    results = end_together(engine, turns)

    assert len(state.edits) == 1 and all(isinstance(r, BadInput) for r in results)
    assert len(HostState(state.path).snapshot().inflight) == 3  # asked again after a restart
    assert set(engine._busy) == {f"agent-{n}" for n in AGENTS}


def test_finish_turns_keeps_each_turns_acks_and_note_floor(tmp_path: Path) -> None:
    state = HostState(tmp_path / "state.json")
    state.set_inflight({"a1": ["p1"], "a2": ["p2"]})
    state.finish_turns(
        [TurnEnd("a1", acks=("p1",), note_floor="2026-12-02T10:00:00.000000Z"), TurnEnd("a2")]
    )
    snap = state.snapshot()
    assert snap.inflight == {} and snap.acks == ("p1",)
    assert state.note_floor("a1") == "2026-12-02T10:00:00.000000Z"
    assert state.note_floor("a2") is None
