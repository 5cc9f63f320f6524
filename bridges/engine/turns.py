"""What the bridge engine hands an agent plug-in, and what a plug-in may answer.

The engine owns delivery (sessions, acks, the outbox, retries, stop); a plug-in only turns a
`Turn` into reply texts. `webhook` POSTs the turn to a URL; `model` asks a chat-completions
server. A plug-in that can't answer now raises `RetryTurn`; the engine waits and asks again with
the very same turn (same rows, same key).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

MAX_BODY = 32_000  # characters in one message, the relay's limit
MAX_RETRY_AFTER = 3600.0  # seconds: a larger Retry-After is capped


@dataclass(frozen=True)
class AgentInfo:
    """The agent a turn is for, as the session lists it."""

    id: str
    name: str
    handle: str
    ref: str | None

    @classmethod
    def from_session(cls, agent: dict[str, Any]) -> AgentInfo:
        return cls(
            id=str(agent["id"]),
            name=agent["name"],
            handle=agent["handle"],
            ref=agent.get("remote_ref"),
        )

    def as_payload(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "handle": self.handle, "ref": self.ref}


def turn_key(ids: list[str]) -> str:
    """A stable key for a turn: the first 32 hex of SHA-256 of its row ids joined by commas."""
    return hashlib.sha256(",".join(ids).encode()).hexdigest()[:32]


@dataclass
class Turn:
    """One turn: the person's rows, oldest first, that the agent answers together."""

    agent: AgentInfo
    rows: list[dict[str, Any]]  # id, kind, body, meta, created_at
    guide: dict[str, Any] | None = None  # {version, body}
    notes: list[str] = field(default_factory=list)  # `[yui] …` lines the agent reads first
    cancelled: threading.Event = field(default_factory=threading.Event)
    # Say one short line to the person now, without ending the turn ("the model server is
    # down; I'll answer when it's back"). Status lines carry no `meta.turn`.
    status: Callable[[str], None] = field(default=lambda text: None, repr=False)

    @property
    def ids(self) -> list[str]:
        return [str(r["id"]) for r in self.rows]

    @property
    def key(self) -> str:
        return turn_key(self.ids)

    @property
    def text(self) -> str:
        """The notes, then the rows' bodies, one per line: what a plain-text agent reads."""
        return "\n".join([*self.notes, *(r["body"] for r in self.rows)])


class RetryTurn(Exception):
    """The agent couldn't answer this time; ask again later (after `after` seconds if given)."""

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), capped; None when
    there is none or it can't be read."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class AgentPlugin(Protocol):
    """Turns a turn into the reply texts to write, in order (none is a handled turn).

    A plug-in that reads the relay itself (the model's thread history) may also define
    `bind(session)`: the engine then hands it its own session before the first turn.
    """

    def answer(self, turn: Turn) -> list[str]: ...
