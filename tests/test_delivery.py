"""Writing the outbox: consecutive rows go in one insert, and a batch the relay refuses for one
row (a resend that already landed) goes row by row, so nothing is lost or written twice."""

from __future__ import annotations

import uuid
from pathlib import Path

from bridges.client.host import HostSession
from bridges.engine.delivery import write_outbox
from state.host import HostState, OutboxItem
from tests.helpers.bridge import Machine


def test_a_batch_with_a_row_that_already_landed(relay, tmp_path: Path) -> None:
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    state = HostState(machine.home / "state.json")
    session = HostSession(state, relay.url)
    session.open()

    def row(body: str) -> dict:
        return {
            "id": str(uuid.uuid4()),
            "user_id": session.user_id,
            "agent_id": agent["id"],
            "sender": "agent",
            "kind": "text",
            "body": body,
            "meta": {},
        }

    rows = [row(f"part {n}") for n in range(5)]
    landed = session.rest("POST", "yui_messages", body=rows[2], prefer="return=minimal")
    assert landed.status_code == 201
    state.enqueue(*(OutboxItem(r, ack=(f"ack-{n}",)) for n, r in enumerate(rows)))
    pushed: list[str] = []
    write_outbox(session, state, notify=lambda item: pushed.append(item.row["body"]))

    assert state.snapshot().outbox == ()
    assert set(state.snapshot().acks) == {f"ack-{n}" for n in range(5)}
    bodies = [r["body"] for r in person.thread(agent) if r["sender"] == "agent"]
    assert sorted(bodies) == [f"part {n}" for n in range(5)]  # each once
    assert [b for b in bodies if b != "part 2"] == ["part 0", "part 1", "part 3", "part 4"]
    assert "part 2" not in pushed and len(pushed) == 4  # a resend is not pushed twice


def test_many_rows_go_in_few_inserts(relay, tmp_path: Path) -> None:
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    state = HostState(machine.home / "state.json")
    session = HostSession(state, relay.url)
    session.open()
    rows = [
        {
            "id": str(uuid.uuid4()),
            "user_id": session.user_id,
            "agent_id": agent["id"],
            "sender": "agent",
            "kind": "text",
            "body": f"n{n}",
            "meta": {},
        }
        for n in range(120)
    ]
    state.enqueue(*(OutboxItem(r) for r in rows))
    posts = []
    real = session.rest

    def counting(method, table, **kwargs):
        if method == "POST":
            posts.append(kwargs["body"])
        return real(method, table, **kwargs)

    session.rest = counting  # type: ignore[method-assign]
    write_outbox(session, state, notify=lambda item: None)
    assert len(posts) == 3  # 50 + 50 + 20
    assert [r["body"] for r in person.thread(agent)] == [f"n{n}" for n in range(120)]
