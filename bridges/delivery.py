"""Writing what a host owes the relay, in order: the outbox's rows, then the acks.

The outbox goes oldest first and a row that can't go yet holds the ones behind it, so replies
never overtake each other. A 409 means an earlier try landed: counted as sent, but not pushed
twice. The bridge's writer thread and `yui send` both write through here; two processes
writing at once are harmless, because every row's id is fixed before its first try.

Just before its POST, a row is prepared (`prepare`, by default: its media stored in the relay
and linked); a row that changed is saved back into the outbox first, so a retry sends it as
prepared. A row whose media can't be stored yet raises `Unreachable` and waits like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridges.host import HostSession
from bridges.media_replies import host_media
from state.errors import Unreachable
from state.host import HostState, OutboxItem

RETRYABLE = (408, 425, 429)
ACK_CHUNK = 100

Emit = Callable[..., None]
Prepare = Callable[[HostSession, OutboxItem, Emit], OutboxItem]


def _quiet(event: str, **fields: Any) -> None:
    pass


def write_outbox(
    session: HostSession,
    state: HostState,
    emit: Emit = _quiet,
    until: set[str] | None = None,
    prepare: Prepare = host_media,
) -> None:
    """Write queued rows oldest first, all of them or (with `until`) up to the last of those
    ids; raise `Unreachable` (the rest wait) when the relay can't take one now, and
    `Refused`/`Suspended` when this host has been cut off."""
    while (item := state.peek()) is not None:
        if until is not None and not until & {i.id for i in state.snapshot().outbox}:
            return
        ready = prepare(session, item, emit)
        if ready is not item:
            if not state.replace(ready):
                continue  # another writer sent it meanwhile
            item = ready
        response = session.rest("POST", "yui_messages", body=item.row, prefer="return=minimal")
        status = response.status_code
        if status < 300 or status == 409:
            state.pop(item.id)
            emit(
                "reply",
                id=item.id,
                agent_id=item.row["agent_id"],
                turn=(item.row.get("meta") or {}).get("turn"),
                resent=status == 409,
            )
            if status < 300 and item.row.get("kind") != "control":
                session.notify(item.id, handoff=item.handoff)
            continue
        if status in RETRYABLE or status >= 500:
            raise Unreachable(f"writing a reply: the relay answered {status}")
        if status in (401, 403):  # a host that was cut off raises here, and the row waits
            session.connect("heartbeat")
        if status == 401:  # even with a fresh session: never drop a reply over it
            raise Unreachable("writing a reply: 401 with a fresh session; trying again")
        state.pop(item.id)
        emit(
            "error",
            id=item.id,
            reason=f"the relay refused a reply for good: {status} {response.text[:200]}",
        )


def write_acks(session: HostSession, state: HostState, emit: Emit = _quiet) -> None:
    """Write `handled_at` on every person row the host has finished."""
    acks = list(state.snapshot().acks)
    for start in range(0, len(acks), ACK_CHUNK):
        chunk = acks[start : start + ACK_CHUNK]
        session.mark(chunk, "handled_at")
        state.remove_acks(chunk)
        emit("ack", ids=chunk)
