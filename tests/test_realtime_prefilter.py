"""Which changes the Realtime feed reads for a group of subscribers: only those a filter could
match on what the notification told (an insert's notification gives its agent, sender and
kind), so a subscriber whose filters rule a row out costs no read when it goes in."""

from __future__ import annotations

import itertools
from typing import Any

from relay.gateway.realtime_changes import Subscription, subscriptions
from relay.gateway.realtime_feed import Change, _may_hear

TYPES = {"id": "uuid", "user_id": "uuid", "agent_id": "uuid", "sender": "text", "kind": "text"}
TYPES |= {"handled_at": "timestamptz"}
AGENT = "7b0c3b7e-25a4-4f43-9d0e-8f3f4ce2a0a1"


def subs(*entries: dict[str, Any]) -> list[Subscription]:
    changes = [{"schema": "public", "table": "yui_messages", **e} for e in entries]
    return subscriptions({"postgres_changes": changes}, TYPES, itertools.count(1).__next__)


def change(op: str = "INSERT", **told: str) -> Change:
    return Change(op, "5d3c1c9e-0c4e-4b8f-8e0b-6f1f3c2a9b10", "now", told=tuple(told.items()))


def test_a_row_no_filter_can_match_is_not_read() -> None:
    bridge = subs({"event": "INSERT", "filter": "sender=eq.user"})
    assert not _may_hear(change(sender="agent", kind="text"), bridge)
    assert _may_hear(change(sender="user", kind="text"), bridge)


def test_what_the_notification_didnt_tell_is_read() -> None:
    bridge = subs({"event": "INSERT", "filter": "sender=eq.user"})
    assert _may_hear(change(), bridge)  # an older trigger's notification: ids only
    ticks = subs({"event": "UPDATE", "filter": "handled_at=gte.2000-01-01T00:00:00Z"})
    assert _may_hear(change("UPDATE", sender="user"), ticks)


def test_any_subscription_of_the_group_is_enough() -> None:
    group = subs(
        {"event": "INSERT", "filter": "sender=eq.user"},
        {"event": "INSERT", "filter": f"agent_id=eq.{AGENT}"},
    )
    assert _may_hear(change(sender="agent", agent_id=AGENT), group)
    assert not _may_hear(change(sender="agent", agent_id=AGENT.replace("7", "8")), group)
    assert not _may_hear(change("UPDATE", sender="user"), group)  # no one asked for updates
