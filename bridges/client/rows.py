"""The rows a host reads and writes, as the relay's contract shapes them: an agent as a session
lists it, and a row in an agent's name."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from state.rules import MAX_BODY


@dataclass(frozen=True)
class AgentInfo:
    """An agent the host serves, as the session lists it."""

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

    def named(self, wanted: str) -> bool:
        """Whether `wanted` is this agent's id, handle (with or without @), ref or name, in
        any case."""
        key = wanted.lower().lstrip("@")
        return key in (self.id, self.handle.lower(), (self.ref or "").lower(), self.name.lower())

    def as_payload(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "handle": self.handle, "ref": self.ref}


def agent_row(
    user_id: str,
    agent_id: str,
    body: str,
    meta: dict[str, Any],
    kind: str = "text",
    row_id: str | None = None,
) -> dict[str, Any]:
    """A row in the agent's name, its id made here unless given (so a resend is a 409, never
    a twin)."""
    return {
        "id": row_id or str(uuid.uuid4()),
        "user_id": user_id,
        "agent_id": agent_id,
        "sender": "agent",
        "kind": kind,
        "body": body[:MAX_BODY],
        "meta": meta,
    }
