"""Deleting the person's account, as the app's "Delete account" does: `yui-delete` on the relay
removes everything of theirs (media first, then their rows, hosts, sessions and devices), and
this machine forgets them (their tokens leave `$YUI_HOME/app.json`)."""

from __future__ import annotations

from typing import Any

from people.person import PersonApp


def delete_account(name: str | None) -> dict[str, Any]:
    """Delete the person `name` (default: the current one) on their relay and here; what went."""
    you = PersonApp(name)
    gone = you.client.call("yui-delete", {}, auth=you.token())
    with you.people.file.edit() as doc:
        doc.get("people", {}).pop(you.record.name, None)
        if doc.get("current") == you.record.name:
            doc["current"] = next(iter(sorted(doc.get("people", {}))), None)
    return {"name": you.record.name, "url": you.record.url, **gone}


def describe(name: str | None) -> str:
    """Who would be deleted, and where, in words for the confirmation."""
    you = PersonApp(name)
    return f"{you.record.name} ({you.user_id}) on {you.record.url}"
