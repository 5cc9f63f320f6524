"""Every insert wakes listeners through LISTEN/NOTIFY, with ids only, never a body."""

from __future__ import annotations

import json
import uuid

import psycopg

from tests.helpers.relay import LocalRelay


def test_an_insert_notifies_with_ids_only(relay: LocalRelay) -> None:
    person = relay.person()
    agent, _ = person.add_agent("Listened")
    row_id = str(uuid.uuid4())
    with psycopg.connect(relay.superuser, autocommit=True) as conn:
        conn.execute("listen yui_messages")
        assert person.say(agent, "private words", id=row_id).status_code == 201
        notices = list(conn.notifies(timeout=10, stop_after=1))
    assert len(notices) == 1
    assert "private words" not in notices[0].payload
    assert json.loads(notices[0].payload) == {
        "id": row_id,
        "user_id": person.id,
        "agent_id": agent["id"],
        "sender": "user",
        "kind": "text",
    }
