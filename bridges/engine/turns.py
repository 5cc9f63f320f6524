"""A turn: what the engine hands an agent plug-in, and how a plug-in says "not now".

The engine owns delivery (sessions, acks, the outbox, retries, stop); a plug-in only turns a
`Turn` into reply texts. A plug-in that can't answer now raises `RetryTurn`; the engine waits
and asks again with the very same turn (same rows, same key).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridges.client.rows import AgentInfo


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
