"""The pieces that keep a turn cheap (issue 21), on their own, with no relay: which agents a
read leaves behind (read again at their turn's end, and no one else), when mention notes are
worth a read, a row the live feed carried taken as a read would return it, the state file's
written replies and acks riding on its next edit, and pushes that are all sent at a stop."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from bridges.client.rows import ROW_COLUMNS, carried_row, is_mention
from bridges.engine.delivery import Pusher
from bridges.engine.mentions import NoteWatch
from bridges.engine.plan import Read, plan
from bridges.engine.workers import Workers
from state.host import HostState, OutboxItem
from tests.helpers.plan import COACH, FLOOR, SAGE, ids, ledger, of, row

# --- who is read again -----------------------------------------------------------------------


def test_rows_that_wait_on_a_running_turn_leave_their_agent_behind() -> None:
    first, second = row("first"), row("second")
    decided = plan(Read([first, second], whole=False), ledger(running={COACH: ["earlier"]}))
    assert decided.behind == {COACH}
    assert of(decided).turn == []


def test_a_turn_that_takes_every_row_leaves_no_one_behind() -> None:
    rows = [row("hi"), row("there", SAGE)]
    decided = plan(Read(rows), ledger())
    assert decided.behind == frozenset()
    assert ids(of(decided).turn) == ids(rows[:1])


def test_a_read_begun_mid_turn_leaves_that_agent_behind() -> None:
    decided = plan(Read([row("hi")], stale=frozenset({COACH})), ledger())
    assert decided.behind == {COACH}


def test_rows_past_a_full_batch_leave_their_agent_behind() -> None:
    rows = [row(f"n{n}") for n in range(3)]
    decided = plan(Read(rows), ledger(batch=2))
    assert ids(of(decided).turn) == ids(rows[:2])
    assert decided.behind == {COACH}


def test_acked_rows_and_rows_at_the_floor_leave_no_one_behind() -> None:
    acked, old = row("acked"), {**row("old"), "created_at": FLOOR.isoformat()}
    decided = plan(Read([acked, old]), ledger(acks=frozenset({acked["id"]})))
    assert decided.behind == frozenset()


# --- mention notes -------------------------------------------------------------------------


def test_notes_are_read_first_then_only_after_a_mark() -> None:
    notes = NoteWatch()
    tick = notes.due(COACH, live=True)
    assert tick is not None
    notes.read(COACH, tick)
    assert notes.due(COACH, live=True) is None
    notes.mark(COACH)
    assert notes.due(SAGE, live=True) is not None  # never read: due
    tick = notes.due(COACH, live=True)
    assert tick is not None
    notes.read(COACH, tick)
    assert notes.due(COACH, live=True) is None


def test_a_mark_that_comes_during_a_read_is_not_lost() -> None:
    notes = NoteWatch()
    notes.read(COACH, notes.due(COACH, live=True) or 0)
    notes.mark(COACH)
    tick = notes.due(COACH, live=True)
    assert tick is not None
    notes.mark(COACH)  # a mention row heard while the notes are being read
    notes.read(COACH, tick)
    assert notes.due(COACH, live=True) is not None


def test_the_feed_going_up_or_down_marks_every_thread_and_no_feed_always_reads() -> None:
    notes = NoteWatch()
    for agent in (COACH, SAGE):
        notes.read(agent, notes.due(agent, live=True) or 0)
    notes.mark()
    assert notes.due(COACH, live=True) is not None
    assert notes.due(SAGE, live=True) is not None
    notes.read(COACH, notes.due(COACH, live=True) or 0)
    assert notes.due(COACH, live=False) is not None


def test_what_marks_a_mention_row() -> None:
    assert is_mention({"meta": {"mention": {"to": "b"}}})
    assert is_mention({"meta": {"mention_reply": {"agent": "b"}}})
    assert not is_mention({"meta": {"mentioned": {"from": "a"}}})  # a copy is a turn, no note
    assert not is_mention({"meta": None})


# --- a row the feed carried ----------------------------------------------------------------


def test_a_carried_row_is_what_a_read_returns() -> None:
    record = {**row("hi"), "user_id": "u", "thread_id": None, "sender": "user", "extra": 1}
    found = carried_row(record)
    assert found is not None and tuple(found) == ROW_COLUMNS
    assert found["body"] == "hi"


def test_a_carried_row_cut_short_is_read_instead() -> None:
    whole = {**row("hi"), "user_id": "u", "thread_id": None}
    assert carried_row({k: v for k, v in whole.items() if k != "body"}) is None
    assert carried_row({**whole, "meta": "not an object"}) is None
    assert carried_row({**whole, "created_at": None}) is None


# --- the state file: what was written rides on the next edit -----------------------------


def reply_to(row_id: str) -> OutboxItem:
    return OutboxItem({"id": f"reply-{row_id}", "meta": {"turn": [row_id]}}, ack=(row_id,))


def test_a_landed_reply_leaves_at_once_for_readers_and_with_the_next_edit_on_disk(
    tmp_path: Path,
) -> None:
    state = HostState(tmp_path / "state.json")
    state.finish_turn(COACH, [reply_to("r1")])
    state.landed(["reply-r1"])
    assert state.snapshot().outbox == () and state.snapshot().acks == ("r1",)
    assert len(HostState(state.path).snapshot().outbox) == 1  # the file: not yet
    state.handled(["r1"])
    assert state.snapshot().acks == ()
    state.set_inflight({SAGE: ["r2"]})  # the next turn's edit carries both
    on_disk = HostState(state.path).snapshot()
    assert on_disk.outbox == () and on_disk.acks == ()
    assert state.unsettled_for() is None


def test_a_crash_before_the_next_edit_leaves_the_reply_to_resend(tmp_path: Path) -> None:
    state = HostState(tmp_path / "state.json")
    state.finish_turn(COACH, [reply_to("r1")])
    state.landed(["reply-r1"])
    restarted = HostState(state.path)  # the process died: memory is gone, the file is not
    assert [item.id for item in restarted.snapshot().outbox] == ["reply-r1"]
    assert restarted.snapshot().acks == ()


def test_settle_writes_what_waits(tmp_path: Path) -> None:
    state = HostState(tmp_path / "state.json")
    state.finish_turn(COACH, [reply_to("r1"), reply_to("r2")])
    state.landed(["reply-r1"])
    assert state.unsettled_for() is not None
    state.settle()
    on_disk = HostState(state.path).snapshot()
    assert [item.id for item in on_disk.outbox] == ["reply-r2"] and on_disk.acks == ("r1",)
    assert state.unsettled_for() is None


# --- workers and pushes ------------------------------------------------------------------


def test_workers_run_everything_on_at_most_their_threads() -> None:
    workers = Workers(3, "test")
    lock, running, most, done = threading.Lock(), [0], [0], []

    def job(n: int) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
            done.append(n)

    for n in range(30):
        workers.submit(job, n)
    assert workers.close(timeout=30)
    assert sorted(done) == list(range(30))
    assert most[0] <= 3


class SlowSession:
    """A session whose pushes take a while, recording each."""

    def __init__(self) -> None:
        self.pushed: list[tuple[str, bool]] = []
        self._lock = threading.Lock()

    def notify(self, message_id: str, *, handoff: bool) -> None:
        time.sleep(0.005)
        with self._lock:
            self.pushed.append((message_id, handoff))


def test_every_push_still_queued_at_a_stop_is_sent() -> None:
    session: Any = SlowSession()
    pusher = Pusher(session)
    items = [OutboxItem({"id": f"m{n}"}, handoff=n % 2 == 0) for n in range(200)]
    for item in items:
        pusher.push(item)
    assert pusher.close()
    assert sorted(session.pushed) == sorted((i.id, i.handoff) for i in items)
