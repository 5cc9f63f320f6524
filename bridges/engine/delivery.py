"""Writing what a host owes the relay, in order: the outbox's rows, then the acks.

The outbox goes oldest first and a row that can't go yet holds the ones behind it, so replies
never overtake each other. A 409 means an earlier try landed: counted as sent, but not pushed
twice. The bridge's writer thread and `yui send` both write through here; two processes
writing at once are harmless, because every row's id is fixed before its first try.

Just before its POST, a row is prepared (`prepare`, by default: its media stored in the relay
and linked); a row that changed is saved back into the outbox first, so a retry sends it as
prepared. A row whose media can't be stored yet raises `Unreachable` and waits like any other;
one whose preparing fails any other way (a bug) is sent as written, as media that can't be used
is, rather than hold every reply behind it.

After a restart, `answered` tells which delivered rows already have their answer, written or
waiting here, so they are only acked.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from bridges.client.host import HostSession
from bridges.client.relay import Outcome, outcome
from bridges.engine.failures import log_failure
from bridges.engine.marks import DeliveredMarks
from bridges.engine.plan import stamp
from bridges.engine.workers import Workers
from bridges.media.replies import host_media
from bridges.retry import retry_after
from state.errors import Refused, Unreachable
from state.host import HostState, OutboxItem

ACK_CHUNK = 100
ANSWER_SLACK = dt.timedelta(minutes=10)  # how far before its row a reply's stamp may fall

BATCH = 50  # rows in one insert at most
PUSHERS = 4  # pushes in flight at once

Emit = Callable[..., None]
Prepare = Callable[[HostSession, OutboxItem, Emit], OutboxItem]
Notify = Callable[[OutboxItem], None]


def _quiet(event: str, **fields: Any) -> None:
    pass


def write_outbox(
    session: HostSession,
    state: HostState,
    emit: Emit = _quiet,
    until: set[str] | None = None,
    prepare: Prepare = host_media,
    notify: Notify | None = None,
    later: bool = False,
) -> None:
    """Write queued rows oldest first, all of them or (with `until`) up to the last of those
    ids; raise `Unreachable` (the rest wait) when the relay can't take one now, and
    `Refused`/`Suspended` when this host has been cut off.

    Consecutive rows go in one insert (a busy bridge writes many replies at once); if the relay
    refuses the batch, for whatever row, the rows go one by one, so each is judged alone.
    `notify` pushes a written row to the person's phones (by default right here). With
    `later`, a written row leaves the outbox with the state's next edit (`HostState.landed`),
    not one of its own: for a bridge, which edits its state again soon and settles on stop.
    """
    done = state.landed if later else state.pop_many
    push = notify or (lambda item: session.notify(item.id, handoff=item.handoff))
    while batch := state.head(BATCH):
        if until is not None and not until & {i.id for i in state.snapshot().outbox}:
            return
        batch = _prepared(session, state, batch, emit, prepare)
        if not batch:
            continue  # another writer sent them meanwhile
        if len(batch) > 1:
            response = session.rest(
                "POST", "yui_messages", body=[i.row for i in batch], prefer="return=minimal"
            )
            found = outcome(response.status_code)
            if found is Outcome.DONE:
                _written(done, batch, emit, push, resent=False)
                continue
            if found is Outcome.LATER:
                raise Unreachable(
                    f"writing replies: the relay answered {response.status_code}",
                    after=retry_after(response.headers.get("retry-after")),
                )
        for item in batch:  # each judged alone, without asking again for the whole batch
            _write_one(session, state, item, emit, push, done)


def _prepared(
    session: HostSession,
    state: HostState,
    batch: list[OutboxItem],
    emit: Emit,
    prepare: Prepare,
) -> list[OutboxItem]:
    """The batch with each row prepared (media stored); a changed row is saved back first.
    Rows whose keys differ from the first's wait for the next batch (a bulk insert needs one
    shape)."""
    ready: list[OutboxItem] = []
    for item in batch:
        done = _prepare(session, item, emit, prepare)
        if done is not item and not state.replace(done):
            break  # another writer sent it meanwhile: start again from the outbox's head
        if ready and set(done.row) != set(ready[0].row):
            break
        ready.append(done)
    return ready


def _prepare(session: HostSession, item: OutboxItem, emit: Emit, prepare: Prepare) -> OutboxItem:
    """The row prepared, or as written when preparing it fails for a reason no wait can mend."""
    try:
        return prepare(session, item, emit)
    except (Refused, Unreachable):
        raise
    except Exception as exc:
        log_failure(f"preparing reply {item.id} failed; it is sent as written", exc)
        emit(
            "error",
            id=item.id,
            reason=f"couldn't prepare a reply ({type(exc).__name__}): sent as written",
        )
        return item


def _write_one(
    session: HostSession,
    state: HostState,
    item: OutboxItem,
    emit: Emit,
    push: Notify,
    done: Callable[[list[str]], object],
) -> None:
    response = session.rest("POST", "yui_messages", body=item.row, prefer="return=minimal")
    status = response.status_code
    found = outcome(status)
    if found in (Outcome.DONE, Outcome.LANDED):
        _written(done, [item], emit, push, resent=found is Outcome.LANDED)
        return
    if found is Outcome.LATER:
        raise Unreachable(
            f"writing a reply: the relay answered {status}",
            after=retry_after(response.headers.get("retry-after")),
        )
    if found is Outcome.REFUSED:  # a host that was cut off raises here, and the row waits
        session.connect("heartbeat")
    if status == 401:  # even with a fresh session: never drop a reply over it
        raise Unreachable("writing a reply: 401 with a fresh session; trying again")
    state.pop(item.id)
    emit(
        "error",
        id=item.id,
        reason=f"the relay refused a reply for good: {status} {response.text[:200]}",
    )


def _written(
    done: Callable[[list[str]], object],
    items: list[OutboxItem],
    emit: Emit,
    push: Notify,
    resent: bool,
) -> None:
    """Rows that landed: out of the outbox (their acks kept) at once, then pushed (a resend
    that hit 409 was pushed when it first landed)."""
    done([item.id for item in items])
    for item in items:
        emit(
            "reply",
            id=item.id,
            agent_id=item.row["agent_id"],
            turn=(item.row.get("meta") or {}).get("turn"),
            resent=resent,
        )
        if not resent and item.row.get("kind") != "control":
            push(item)


def answered(session: HostSession, state: HostState, rows: list[dict[str, Any]]) -> frozenset[str]:
    """Which of these delivered rows an earlier run answered: its reply waits in the outbox, or
    has landed (a reply names the rows it answers in `meta.turn`). A reply comes after the row
    it answers (the relay stamps both), so the look reads the thread from the row on, newest
    first: an answer is found at once, and a row with none costs what came after it, never the
    whole history (ANSWER_SLACK spares a relay whose clock stepped back)."""
    found = set()
    for row in rows:
        after = stamp(row["created_at"]) - ANSWER_SLACK
        if state.answered_in_outbox(row["id"]) or session.rows(
            "yui_messages",
            [
                ("select", "id"),
                ("agent_id", f"eq.{row['agent_id']}"),
                ("sender", "eq.agent"),
                ("meta->turn", f'cs.["{row["id"]}"]'),
                ("created_at", f"gte.{after.isoformat()}"),
                ("order", "created_at.desc"),
                ("limit", "1"),
            ],
        ):
            found.add(row["id"])
    return frozenset(found)


def write_acks(
    session: HostSession,
    state: HostState,
    emit: Emit = _quiet,
    later: bool = False,
    marks: DeliveredMarks | None = None,
) -> None:
    """Write `handled_at` on every person row the host has finished (with `later`, they
    leave the state file with its next edit, as `write_outbox` says); rows whose delivered
    mark `marks` still holds get it in the same PATCH."""
    marks = marks or DeliveredMarks()  # none held: every row's mark is written already
    acks = list(state.snapshot().acks)
    for start in range(0, len(acks), ACK_CHUNK):
        chunk = acks[start : start + ACK_CHUNK]
        unmarked = marks.among(chunk)
        session.mark(unmarked, "delivered_at", "handled_at")
        marks.written(unmarked)
        riding = set(unmarked)
        session.mark([row_id for row_id in chunk if row_id not in riding], "handled_at")
        marks.acked(chunk)
        (state.handled if later else state.remove_acks)(chunk)
        emit("ack", ids=chunk)


class Pusher:
    """Pushes written rows to the person's phones from threads of their own, so a busy writer
    never waits on yui-push: up to PUSHERS at once, enough for a hundred agents' replies. A
    push is best effort, but a clean stop sends every one still queued (for at most
    `close`'s timeout; each push gives up after its own)."""

    def __init__(self, session: HostSession) -> None:
        self.session = session
        self._workers = Workers(PUSHERS, "pusher")

    def push(self, item: OutboxItem) -> None:
        self._workers.submit(self._send, item.id, item.handoff)

    def close(self, timeout: float = 30.0) -> bool:
        """Send what is queued, then end; False when some were still going at the timeout."""
        return self._workers.close(timeout)

    def _send(self, message_id: str, handoff: bool) -> None:
        self.session.notify(message_id, handoff=handoff)
