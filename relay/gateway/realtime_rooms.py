"""Broadcast and presence: who hears a channel's messages, and who is present in it.

A channel's room is its topic name within one identity (`realtime_limits.scope`: role, person
and host, the claims the database's policies read): a person's sockets hear each other on a
topic whatever tokens they hold, a host's sockets hear each other, and nobody else does, not
another person on the same topic name, not the person's hosts, not one host from another. A
token that names nobody (the anon key) has no room. Rooms live in this gateway's memory: two
sockets hear each other's broadcasts when they are on the same gateway.

Presence is Phoenix's: a topic that asks for it (`config.presence.enabled`) gets the room's
`presence_state` on joining and every `presence_diff` after; each joined topic holds at most
one entry, under its `config.presence.key` (a fresh one when empty). What a broadcast may be
(`message`) is bounded by `realtime_limits`.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from relay.gateway import realtime_limits as limits
from relay.gateway import realtime_wire as wire
from relay.gateway.realtime_limits import Refused

if TYPE_CHECKING:
    from relay.gateway.realtime import Topic

Entries = dict[str, dict[str, list[dict[str, Any]]]]  # key → {"metas": [meta, …]}


@dataclass(eq=False)
class Room:
    members: set[Topic] = field(default_factory=set)
    present: dict[Topic, dict[str, Any]] = field(default_factory=dict)  # topic → its meta

    def state(self) -> Entries:
        entries: Entries = {}
        for topic, meta in self.present.items():
            entries.setdefault(topic.presence_key, {"metas": []})["metas"].append(meta)
        return entries

    def diff(self, joins: Entries, leaves: Entries) -> None:
        payload = {"joins": joins, "leaves": leaves}
        for member in self.members:
            if member.hears_presence:
                member.client.push(member.name, "presence_diff", payload, join_ref=member.join_ref)


def _entry(topic: Topic, meta: dict[str, Any]) -> Entries:
    return {topic.presence_key: {"metas": [meta]}}


class Rooms:
    """Every room of this gateway with a topic in it."""

    def __init__(self) -> None:
        self.rooms: dict[tuple[str, str], Room] = {}

    def enter(self, topic: Topic) -> None:
        """Put a topic in its room; one that hears presence is told who is there."""
        key = _key(topic)
        if key is None:
            return
        room = self.rooms.setdefault(key, Room())
        room.members.add(topic)
        if topic.hears_presence:
            topic.client.push(topic.name, "presence_state", room.state(), join_ref=topic.join_ref)

    def leave(self, topic: Topic) -> None:
        """Take a topic out of its room, and its presence with it."""
        key = _key(topic)
        room = self.rooms.get(key) if key else None
        if key is None or room is None:
            return
        room.members.discard(topic)
        self.untrack(topic)
        if not room.members:
            del self.rooms[key]

    def cast(self, topic: Topic, message: wire.Broadcast) -> None:
        """A broadcast to the room: every member but the sender, and the sender too when it
        asked for its own (`config.broadcast.self`)."""
        room = self._room(topic)
        if room is None:
            raise Refused("broadcast and presence need a token that names someone")
        for member in list(room.members):
            if (member is topic and not topic.echo) or member.expired:
                continue
            frame = wire.cast(member.client.vsn, member.name, message, member.join_ref)
            if frame is not None:
                member.client.send(frame)

    def track(self, topic: Topic, payload: Any) -> None:
        """A topic's presence entry, set or replaced; Refused past a bound."""
        room = self._room(topic)
        if room is None:
            raise Refused("broadcast and presence need a token that names someone")
        if not isinstance(payload, dict):
            raise ValueError("presence track takes an object")
        if len(json.dumps(payload)) > limits.MAX_PRESENCE_BYTES:
            raise Refused(f"a presence entry is at most {limits.MAX_PRESENCE_BYTES} bytes")
        before = room.present.get(topic)
        if before is None and len(room.present) >= limits.MAX_PRESENCES:
            raise Refused(f"at most {limits.MAX_PRESENCES} presence entries per channel")
        meta = {**payload, "phx_ref": secrets.token_hex(8)}
        if before is not None:
            meta["phx_ref_prev"] = before["phx_ref"]
        room.present[topic] = meta
        room.diff(_entry(topic, meta), _entry(topic, before) if before else {})

    def untrack(self, topic: Topic) -> None:
        room = self._room(topic)
        before = room.present.pop(topic, None) if room else None
        if room is not None and before is not None:
            room.diff({}, _entry(topic, before))

    def _room(self, topic: Topic) -> Room | None:
        key = _key(topic)
        return self.rooms.get(key) if key else None


def _key(topic: Topic) -> tuple[str, str] | None:
    return None if topic.scope is None else (topic.scope, topic.name)


def message(msg: wire.Frame) -> wire.Broadcast:
    """A broadcast as sent, in a binary frame (2.0.0) or as JSON, checked against its bounds."""
    if msg.payload.get("persist"):
        raise ValueError("broadcasts are not stored here: persist is not served")
    cast = msg.cast
    if cast is None:
        event = msg.payload.get("event")
        if not isinstance(event, str):
            raise ValueError("a broadcast names its event")
        data = json.dumps(msg.payload.get("payload"), separators=(",", ":")).encode()
        cast = wire.Broadcast(event, data)
    if not wire.name_ok(cast.event):
        raise ValueError(f"a broadcast's event is at most {wire.MAX_NAME} bytes")
    if len(cast.data) > limits.MAX_BROADCAST_BYTES:
        raise Refused(f"a broadcast's payload is at most {limits.MAX_BROADCAST_BYTES} bytes")
    return cast
