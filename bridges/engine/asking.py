"""Asking the agent: each turn on a thread of the pool's, from the ask to the turn's end.

What the plug-in answers becomes the turn's replies (to the outbox, the last carrying the acks).
"Not now" (`RetryTurn`, the relay unreachable) asks the very same turn again after a growing
wait. Anything else an ask raises, from the plug-in, reading the notes, the gating or building
the replies, is logged with the agent's name and asked again the same way; after
MAX_TURN_FAILURES such failures the turn is given up: the person gets one line saying its answer
couldn't be delivered, and its rows are acked, so the agent is free for the next message. The
count lives in memory: a restart replays the turn, and gives up after as many failures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from bridges.client.host import HostSession
from bridges.client.live import LiveFeed
from bridges.client.rows import MAX_BODY, AgentInfo, agent_row
from bridges.engine.endings import Ending, Endings
from bridges.engine.failures import failure, log_failure
from bridges.engine.marks import DeliveredMarks
from bridges.engine.mentions import NoteWatch, notes_for
from bridges.engine.plan import Running, due, stamp
from bridges.engine.plugin import AgentPlugin
from bridges.engine.replies import replies_for, undelivered
from bridges.engine.turns import RetryTurn
from bridges.engine.workers import Workers
from bridges.media.replies import localize
from state.errors import Refused, Unreachable, YuiError
from state.host import HostState, OutboxItem


class Asking:
    """The turn threads of a `Bridge`, which holds everything named here."""

    session: HostSession
    state: HostState
    plugin: AgentPlugin
    emit: Callable[..., None]
    _fail: Callable[[YuiError], None]
    _lock: threading.RLock
    _workers: Workers
    _feed: LiveFeed | None
    _notes: NoteWatch
    _behind: set[str]  # agents with rows left waiting: read again at the turn's end
    _busy: dict[str, Running]  # agent id → its turn
    _turns: set[Running]  # every live turn, commands included
    _gated: dict[str, set[str]]  # per agent: presets its last replies lost
    _woken: set[str]  # agents whose rows are to be read now
    _marks: DeliveredMarks
    _endings: Endings
    _wake: threading.Event
    _flush: threading.Event

    def _status_line(self, agent: AgentInfo, text: str) -> None:
        """A quiet line from the bridge in the agent's thread (no turn, marked as status)."""
        row = agent_row(self.session.user_id, agent.id, text, {"status": True})
        self.state.enqueue(OutboxItem(row))
        self.emit("status", agent=agent.handle, id=row["id"], body=row["body"])
        self._flush.set()

    def _plugin_stop(self, agent: AgentInfo) -> None:
        """The plug-in's part of the person's Stop (`on_stop`); a line it returns is told to
        the person, and a failure is logged like a turn's."""
        try:
            line = self.plugin.on_stop(agent)
        except Exception as exc:
            log_failure(f"stopping @{agent.handle} failed", exc)
            return
        if line:
            self._status_line(agent, line)

    def _spawn(self, running: Running) -> None:
        agent = running.turn.agent
        running.turn.status = lambda text: self._status_line(agent, text)
        with self._lock:
            self._turns.add(running)
        self._ask_on_thread(running)

    def _ask_on_thread(self, running: Running) -> None:
        self._workers.submit(self._ask, running)

    def _ask(self, running: Running) -> None:
        """One ask of a turn, on a thread of the pool. Whatever it raises, the turn ends or
        waits to be asked again: an agent is never left with a turn no thread runs."""
        if running.abandoned:
            return
        try:
            replies = self._answer(running)
            if replies is not None:
                self._finish(running, replies)
        except Refused as exc:
            self._fail(exc)
        except Exception as exc:  # a plug-in's bug, an answer that breaks a reader
            log_failure(f"a turn of @{running.turn.agent.handle} failed", exc)
            self._retry_later(running, failure(exc), crashed=True)

    def _answer(self, running: Running) -> list[str] | None:
        """The agent's replies, or None when the turn waits to be asked again."""
        turn = running.turn
        self._marks.handed(turn.rows)  # the writer marks them, off the turn's path
        self._flush.set()
        try:
            turn.rows = localize(self.session, turn.agent.id, turn.rows)  # photos: files
            self._read_notes(running)
            return self.plugin.answer(turn)
        except Unreachable as exc:
            self._retry_later(running, exc.message, exc.after)
        except RetryTurn as retry:
            self._retry_later(running, retry.reason, retry.after)
        return None

    def _read_notes(self, running: Running) -> None:
        """Before a turn, the mentions and group talk in the agent's thread since its last
        turn, one `[yui] note: …` line each, first (a replayed turn reads the same window).
        The thread is read for mentions only when a row said there may be some (`NoteWatch`)."""
        turn = running.turn
        if running.command or running.notes_upto is not None:
            return
        live = self._feed is not None and self._feed.up
        tick = self._notes.due(turn.agent.id, live)
        upto = max(turn.rows, key=lambda r: stamp(r["created_at"]))["created_at"]
        since = (
            self.state.note_floor(turn.agent.id)
            or self.state.snapshot().floors.get(turn.agent.id)
            or turn.rows[0]["created_at"]  # no floor (never, for a served agent): this turn only
        )
        agent = turn.agent.id
        turn.notes[:0] = notes_for(
            self.session, agent, since, upto, turn.rows, mentions=tick is not None
        )
        if tick is not None:
            self._notes.read(agent, tick)
        running.notes_upto = upto

    def _retry_later(
        self, running: Running, reason: str, after: float | None = None, crashed: bool = False
    ) -> None:
        """Ask the same turn again after a wait; a turn that `crashed` MAX_TURN_FAILURES times
        is given up instead: the person gets one line saying so, and the rows are let go."""
        with self._lock:
            if running.abandoned or running not in self._turns:
                return
            wait = running.crashed() if crashed else running.failed(after)
        turn = running.turn
        if wait is None:
            self._give_up(running, reason)
            return
        self.emit(
            "retry",
            what="agent",
            agent=turn.agent.handle,
            turn=turn.ids,
            reason=reason,
            wait=round(wait, 1),
        )
        self._wake.set()

    def _give_up(self, running: Running, reason: str) -> None:
        """End the turn with one line for the person instead of an answer (it carries the
        rows' acks), so the agent's next turn can start."""
        turn = running.turn
        item = undelivered(turn, self.session.user_id, ack=not running.command)
        if not self._end(running, [item]):
            return
        self.emit(
            "error",
            agent=turn.agent.handle,
            turn=turn.ids,
            id=item.id,
            reason=f"a turn of @{turn.agent.handle} failed {running.failures} times ({reason}); "
            "the person was told its answer couldn't be delivered",
        )
        self._next_turn(turn.agent.id)

    def _ask_due_retries(self) -> None:
        with self._lock:
            ready = due(self._turns, time.monotonic())
            for running in ready:
                running.retry_at = None
        for running in ready:
            self._ask_on_thread(running)

    def _finish(self, running: Running, replies: list[str]) -> None:
        """The agent answered: its replies go to the outbox, or its rows straight to the acks."""
        turn = running.turn
        done = replies_for(
            turn, replies, self.session.user_id, self.session.app_build, ack=not running.command
        )
        items = done.items
        for length in done.cut:
            self.emit(
                "error",
                agent=turn.agent.handle,
                reason=f"a reply of {length} characters was cut to {MAX_BODY}",
            )
        if done.gated:  # the agent's next turn is told what the phone can't draw yet
            self._gated.setdefault(turn.agent.id, set()).update(done.gated)
            self.emit("gated", agent=turn.agent.handle, presets=sorted(done.gated))
        if not self._end(running, items, note_floor=running.notes_upto):
            return
        self.emit(
            "answer", agent=turn.agent.handle, turn=turn.ids, replies=[item.id for item in items]
        )
        self._next_turn(turn.agent.id)

    def _end(
        self, running: Running, items: list[OutboxItem], note_floor: str | None = None
    ) -> bool:
        """End a turn with these rows to write (the last carrying the acks), or its rows acked
        when there are none; False when a Stop abandoned it meanwhile. Turns that end at once
        share one edit of the state file: the first to take the lock writes every turn queued
        by then, and the others find theirs done."""
        ending = Ending(running, items, note_floor)
        self._endings.put(ending)
        with self._lock:
            if not ending.done:
                self._end_queued()
        if ending.error is not None:
            raise ending.error
        return bool(ending.ended)

    def _end_queued(self) -> None:
        """Under the lock: end every queued turn a Stop hasn't abandoned, in one edit."""
        ending: list[Ending] = []
        for queued in self._endings.take():
            running = queued.running
            self._turns.discard(running)
            if running.abandoned:
                self.emit("discarded", agent=running.turn.agent.handle, turn=running.turn.ids)
                queued.ended = False
            else:
                ending.append(queued)
        turns = [queued for queued in ending if not queued.running.command]
        try:
            for command in (queued for queued in ending if queued.running.command):
                self.state.enqueue(*command.items)
            if turns:
                self.state.finish_turns(queued.turn_end() for queued in turns)
        except Exception as exc:  # each turn's thread raises it, as its own edit would have
            for queued in ending:
                queued.error = exc
            return
        for queued in turns:
            self._busy.pop(queued.running.turn.agent.id, None)
        for queued in ending:
            queued.ended = True

    def _next_turn(self, agent_id: str) -> None:
        """Write what the turn left, and read the agent's rows when some came during the turn
        (they wait for this read), or when nothing tells of them: without the live feed."""
        self._flush.set()
        with self._lock:
            behind = agent_id in self._behind
        if behind or self._feed is None or not self._feed.up:
            self._woken.add(agent_id)
            self._wake.set()
