"""yui-push as its callers use it, against the real relay: the app registers phones and reads
its devices and notifications; a host writes an agent row and asks for its push."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

import requests

from tests.helpers.relay import Host, LocalRelay, Person


def push(
    relay: LocalRelay, bearer: str | None, action: str, ua: str | None = None, **body: Any
) -> requests.Response:
    """One call of the yui-push function as `bearer` (the app's token or a host's), its
    `user-agent` set when a test needs the app's build read from it."""
    headers = {"user-agent": ua} if ua else None
    return relay.http(
        "POST",
        "/functions/v1/yui-push",
        token=bearer,
        body={"action": action, **body},
        headers=headers,
    )


def phone(person: Person, **extra: Any) -> str:
    """Register a new phone for `person`; its device token."""
    token = secrets.token_hex(32)
    answer = push(person.relay, person.token, "register", token=token, **extra)
    assert answer.status_code == 200 and answer.json() == {"ok": True}, answer.text
    return token


def rows(person: Person, table: str) -> list[dict[str, Any]]:
    """What the person's app token may read of `table`, oldest first."""
    answer = person.relay.rest("GET", table, person.token, params={"order": "created_at.asc"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def devices(person: Person) -> dict[str, dict[str, Any]]:
    """The person's phones, by device token."""
    return {d["apns_token"]: d for d in rows(person, "yui_devices")}


def written(host: Host, agent: dict[str, Any], body: str = "hello", **row: Any) -> str:
    """An agent row the host wrote; its id."""
    row_id = str(uuid.uuid4())
    answer = host.reply(agent, body, id=row_id, **row)
    assert answer.status_code == 201, answer.text
    return row_id


def notify(host: Host, message_id: Any, **body: Any) -> requests.Response:
    """The host asks for the push of its row `message_id` (any value: tests send bad ones)."""
    return push(host.relay, host.token, "notify", message_id=message_id, **body)


def new_thread(relay: LocalRelay) -> tuple[Person, dict[str, Any], Host]:
    """A new person with one agent, Coach, on a newly paired host."""
    person = relay.person("Pushed")
    agent, code = person.add_agent("Coach")
    return person, agent, Host.pair(relay, code, "coach")
