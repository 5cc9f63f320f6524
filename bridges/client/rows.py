"""The rows a host reads and writes, as the relay's contract shapes them: an agent as a session
lists it, and a row in an agent's name."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from state.rules import MAX_BODY

# The columns of a person's row that the engine reads, by REST or as the live feed carries it.
ROW_COLUMNS = (
    "id",
    "agent_id",
    "user_id",
    "thread_id",
    "body",
    "kind",
    "meta",
    "created_at",
    "delivered_at",
)


def carried_row(record: dict[str, Any]) -> dict[str, Any] | None:
    """A row the live feed carried, as a read would return it; None when it lacks a column or
    one isn't what a read gives (a feed that cut its payload): the engine reads it instead."""
    if not all(key in record for key in ROW_COLUMNS):
        return None
    row = {key: record[key] for key in ROW_COLUMNS}
    texts = ("id", "agent_id", "body", "kind", "created_at")
    if not all(isinstance(row[key], str) for key in texts):
        return None
    if row["meta"] is not None and not isinstance(row["meta"], dict):
        return None
    return row


def mention_asker(row: dict[str, Any]) -> str | None:
    """The agent whose mention this row is a copy of (`meta.mentioned.from`): the relay
    mirrors the answer into that agent's thread."""
    meta = row.get("meta")
    mentioned = meta.get("mentioned") if isinstance(meta, dict) else None
    asker = mentioned.get("from") if isinstance(mentioned, dict) else None
    return asker if isinstance(asker, str) else None


def is_mention(record: dict[str, Any]) -> bool:
    """Whether a row is one an agent reads as a mention note (`meta.mention`: the person put
    something to another agent from its thread; `meta.mention_reply`: that agent's answer,
    not the relay's line saying it couldn't be reached)."""
    meta = record.get("meta")
    if not isinstance(meta, dict):
        return False
    reply = meta.get("mention_reply")
    return meta.get("mention") is not None or (isinstance(reply, dict) and not reply.get("status"))


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
