"""Helpers for the mention, group, reaction and reply tests: rows written and read over REST as
the app and as hosts, against the real relay."""

from __future__ import annotations

import uuid
from typing import Any

from tests.helpers.relay import Host, LocalRelay, Person


def new_id() -> str:
    return str(uuid.uuid4())


def send(person: Person, agent: dict[str, Any], body: str, **row: Any) -> str:
    """The person writes a row (201); its id."""
    row_id = row.pop("id", None) or new_id()
    answer = person.say(agent, body, id=row_id, **row)
    assert answer.status_code == 201, answer.text
    return row_id


def refused(person: Person, agent: dict[str, Any], body: str, **row: Any) -> tuple[int, str]:
    """A write the relay refuses: its status and message; nothing landed."""
    row_id = row.pop("id", None) or new_id()
    answer = person.say(agent, body, id=row_id, **row)
    assert answer.status_code >= 400, answer.text
    assert not person.relay.sql("select 1 from yui_messages where id = %s", (row_id,))
    return answer.status_code, answer.json().get("message", "")


def answer(host: Host, agent: dict[str, Any], body: str, turn: list[str], **meta: Any) -> str:
    """The host writes its agent's reply to `turn` (201); its id."""
    row_id = new_id()
    result = host.reply(agent, body, id=row_id, meta={"turn": turn, **meta})
    assert result.status_code == 201, result.text
    return row_id


def as_host(host: Host, agent: dict[str, Any], **filters: str) -> list[dict[str, Any]]:
    """The agent's thread as its host reads it, oldest first."""
    params = {"agent_id": f"eq.{agent['id']}", "order": "created_at.asc,id.asc", **filters}
    result = host.relay.rest("GET", "yui_messages", host.jwt, params=params)
    assert result.status_code == 200, result.text
    return result.json()


def queue(host: Host, agent: dict[str, Any]) -> list[dict[str, Any]]:
    """The host's work queue for the agent: the person's rows not handled yet."""
    return as_host(host, agent, sender="eq.user", handled_at="is.null")


def by_id(relay: LocalRelay, row_id: str) -> dict[str, Any]:
    """A row as the database has it (test inspection only)."""
    found = relay.sql("select to_jsonb(m) from yui_messages m where id = %s", (row_id,))
    assert found, f"no row {row_id}"
    return found[0][0]


def thread_rows(person: Person, agent: dict[str, Any], sender: str | None = None) -> list[dict]:
    rows = person.thread(agent)
    return [r for r in rows if sender is None or r["sender"] == sender]
