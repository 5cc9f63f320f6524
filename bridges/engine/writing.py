"""The bridge's writer: the delivered marks no ack took along (`DeliveredMarks`), the outbox
oldest first (a reply that can't go holds the ones behind it), then the acks, each write as
soon as a turn asks for it. What was written leaves the state file with the next edit a
turn makes anyway, or SETTLE_AFTER seconds later (`HostState.landed`), so a turn costs the
file two edits at most, shared with the turns that start and end with it. A reply that lands
is pushed to the person's phones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from bridges.client.host import HostSession
from bridges.engine.delivery import ACK_CHUNK, Pusher, write_acks, write_outbox
from bridges.engine.failures import failure, log_failure
from bridges.engine.marks import DeliveredMarks
from bridges.engine.mentions import NoteWatch
from bridges.retry import retry_loop
from state.errors import Refused, Unreachable, YuiError
from state.host import HostState, OutboxItem

FLUSH_EVERY = 5.0  # seconds the writer sleeps when nothing asks it to write
SETTLE_AFTER = 2.0  # seconds written rows and acks wait for an edit to ride on, at most


class Writing:
    """The writer thread of a `Bridge`, which holds everything named here."""

    session: HostSession
    state: HostState
    emit: Callable[..., None]
    _fail: Callable[[YuiError], None]
    _relay_retry: Callable[[Exception, float], None]
    _stop: threading.Event
    _flush: threading.Event
    _pusher: Pusher
    _notes: NoteWatch
    _asked_by: dict[str, str]  # a mention's copy (row id) → the agent who asked
    _marks: DeliveredMarks

    def _writer(self) -> None:
        """Write the delivered marks due, the outbox oldest first (a reply that can't go holds
        the ones behind it), then the acks; back off while the relay can't be reached; one last
        flush on stop."""
        try:
            retry_loop(
                self._write,
                stop=self._stop,
                wake=self._flush,
                on_retry=self._relay_retry,
                last_pass=True,
            )
        except Refused as exc:
            self._fail(exc)

    def _write(self) -> float:
        try:
            self._mark_delivered()  # those that waited for an ack: not held behind the outbox
            write_outbox(self.session, self.state, self.emit, notify=self._landed, later=True)
            write_acks(self.session, self.state, self.emit, later=True, marks=self._marks)
            due = self._marks.due_in()
            wait = FLUSH_EVERY if due is None else min(due, FLUSH_EVERY)
            waited = self.state.unsettled_for()
            if waited is not None and (waited >= SETTLE_AFTER or self._stop.is_set()):
                self.state.settle()  # no turn has edited the state since: write it now
            elif waited is not None:
                return min(wait, SETTLE_AFTER - waited)
        except (Refused, Unreachable):
            raise
        except Exception as exc:  # a bug must not end the writer: every reply waits on it
            log_failure("writing to the relay failed", exc)
            raise Unreachable(f"writing failed: {failure(exc)}") from exc
        return wait

    def _mark_delivered(self) -> None:
        """The person's ✓ (delivered) for the rows that waited MARK_AFTER for an ack to take it
        along (on stop, for all of them), in one PATCH."""
        rows = self._marks.ripe(everything=self._stop.is_set())
        for start in range(0, len(rows), ACK_CHUNK):
            chunk = rows[start : start + ACK_CHUNK]
            self.session.mark(chunk, "delivered_at")
            self._marks.written(chunk)  # a failed one is tried again on the next pass

    def _landed(self, item: OutboxItem) -> None:
        """A reply landed: pushed to the person's phones; one answering a mention is mirrored
        into the asker's thread, whose notes are then worth a read."""
        meta = item.row.get("meta")
        for row_id in meta.get("turn") or () if isinstance(meta, dict) else ():
            if asker := self._asked_by.pop(str(row_id), None):
                self._notes.mark(asker)
        self._pusher.push(item)
