"""Turns that end at once, written with one edit of the state file (a group commit).

Every edit is fsynced twice, and a turn's end is written under the engine's lock (a Stop must
find a turn either running or ended), so with many agents the ends queued behind one another:
a hundred turns, a hundred edits in a row. A turn's thread queues its end here and takes the
lock; whoever gets it first writes every end queued by then, and the others find theirs done.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from bridges.engine.plan import Running
from state.host import OutboxItem, TurnEnd


@dataclass
class Ending:
    """One turn's end, queued: the rows to write and the note floor its notes reached."""

    running: Running
    items: list[OutboxItem]
    note_floor: str | None = None
    ended: bool | None = None  # None while queued; False: a Stop abandoned the turn
    error: Exception | None = None  # the edit failed: the turn's thread raises it

    @property
    def done(self) -> bool:
        """Whether a thread has dealt with it: ended, abandoned, or its edit failed."""
        return self.ended is not None or self.error is not None

    def turn_end(self) -> TurnEnd:
        """The file's side: the replies (the last carrying the acks), or the rows acked."""
        turn = self.running.turn
        acks = () if self.items else tuple(turn.ids)
        return TurnEnd(turn.agent.id, tuple(self.items), acks, self.note_floor)


class Endings:
    """The ends queued and not yet written, in the order they came."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: list[Ending] = []

    def put(self, ending: Ending) -> None:
        with self._lock:
            self._queued.append(ending)

    def take(self) -> list[Ending]:
        with self._lock:
            taken, self._queued = self._queued, []
        return taken
