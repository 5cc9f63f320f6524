"""Realtime's two wire formats: Phoenix's JSON objects (vsn 1.0.0, realtime-py and the bridges)
and Supabase's arrays with binary user broadcasts (vsn 2.0.0, supabase-js's default).

1.0.0 frames are `{"topic", "event", "payload", "ref", "join_ref"}`; 2.0.0 frames are
`[join_ref, ref, topic, event, payload]`, and a broadcast with a string event travels as a
binary frame instead: kind 3 from a client (join_ref, ref, topic, event, metadata, then the
payload as JSON or raw bytes), kind 4 to a client (topic, event, metadata, payload). Every name
in a binary frame is at most 255 bytes (its length is one byte), so topics and events are too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

VSN_1 = "1.0.0"
VSN_2 = "2.0.0"
VERSIONS = (VSN_1, VSN_2)
MAX_NAME = 255  # bytes of a topic, an event or a presence key

PUSH, CAST = 3, 4  # binary kinds: a client's broadcast push, a broadcast to a client
RAW, JSON_CODED = 0, 1  # how a binary broadcast's payload is encoded


class WireError(ValueError):
    """A frame that isn't a Phoenix message; its text is the reason the socket is closed with."""


@dataclass(frozen=True)
class Broadcast:
    """A user broadcast: its event and payload as bytes (JSON text, or raw when `raw`)."""

    event: str
    data: bytes
    raw: bool = False

    def json(self) -> str | None:
        """The payload as JSON text, or None for raw bytes (which only 2.0.0 can carry)."""
        return None if self.raw else self.data.decode()


@dataclass(frozen=True)
class Frame:
    """One message from a client; a binary broadcast push carries its `cast`."""

    topic: str
    event: str
    payload: dict[str, Any]
    ref: Any = None
    join_ref: Any = None
    cast: Broadcast | None = None


def strict_json(text: str | bytes) -> Any:
    """JSON as JSON defines it: Python's parser also takes NaN and Infinity, which another
    client's parser would choke on once forwarded."""
    return json.loads(text, parse_constant=_not_json)


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def decode(vsn: str, text: str) -> Frame:
    """A text frame in this socket's format."""
    try:
        msg = strict_json(text)
    except ValueError:
        msg = None
    if vsn == VSN_2 and isinstance(msg, list) and len(msg) == 5:
        join_ref, ref, topic, event, payload = msg
    elif vsn == VSN_1 and isinstance(msg, dict):
        topic, event, payload = msg.get("topic"), msg.get("event"), msg.get("payload")
        ref, join_ref = msg.get("ref"), msg.get("join_ref")
    else:
        shape = "[join_ref, ref, topic, event, payload]" if vsn == VSN_2 else "a JSON object"
        raise WireError(f"expected a Phoenix message: {shape}")
    if not isinstance(topic, str) or not isinstance(event, str):
        raise WireError("expected a Phoenix message with a topic and an event")
    payload = payload if isinstance(payload, dict) else {}
    return Frame(topic, event, payload, ref, join_ref)


def decode_push(data: bytes) -> Frame:
    """A binary broadcast push (2.0.0, kind 3)."""
    if len(data) < 7 or data[0] != PUSH:
        raise WireError("expected a binary broadcast push (kind 3)")
    sizes, encoding = data[1:6], data[6]
    if encoding not in (RAW, JSON_CODED):
        raise WireError("unknown payload encoding in a binary broadcast")
    fields, at = [], 7
    for size in sizes:
        fields.append(data[at : at + size])
        at += size
    if at > len(data):
        raise WireError("a binary broadcast shorter than its header says")
    try:
        join_ref, ref, topic, event, meta = (f.decode() for f in fields)
        body = data[at:]
        if encoding == JSON_CODED:
            strict_json(body)  # checked here, forwarded as sent
        metadata = strict_json(meta) if meta else {}
    except ValueError as exc:
        raise WireError("a binary broadcast that isn't UTF-8 and JSON where it must be") from exc
    payload = {"type": "broadcast", "event": event}
    if isinstance(metadata, dict):
        payload.update({k: v for k, v in metadata.items() if k not in payload})
    cast = Broadcast(event, bytes(body), raw=encoding == RAW)
    return Frame(topic, "broadcast", payload, ref or None, join_ref or None, cast)


def encode(
    vsn: str, topic: str, event: str, payload: Any, ref: Any = None, join_ref: Any = None
) -> str:
    """A text frame in this socket's format."""
    head, tail = envelope(vsn, topic, event, ref, join_ref)
    return head + json.dumps(payload, separators=(",", ":")) + tail


def envelope(
    vsn: str, topic: str, event: str, ref: Any = None, join_ref: Any = None
) -> tuple[str, str]:
    """What goes before and after a payload already encoded as JSON, so one payload can be
    framed for many sockets without encoding it again."""
    t, e, r, j = (json.dumps(v) for v in (topic, event, ref, join_ref))
    if vsn == VSN_2:
        return f"[{j},{r},{t},{e},", "]"
    return f'{{"topic":{t},"event":{e},"payload":', f',"ref":{r},"join_ref":{j}}}'


def cast(vsn: str, topic: str, message: Broadcast, join_ref: Any) -> str | bytes | None:
    """A broadcast for a socket: 2.0.0 gets a binary frame (kind 4), 1.0.0 a JSON one; raw
    bytes can't be said in JSON, so a 1.0.0 socket doesn't get those (None)."""
    if vsn == VSN_2:
        names = topic.encode(), message.event.encode()
        coding = RAW if message.raw else JSON_CODED
        header = bytes([CAST, len(names[0]), len(names[1]), 0, coding])
        return header + names[0] + names[1] + message.data
    data = message.json()
    if data is None:
        return None
    payload = f'{{"type":"broadcast","event":{json.dumps(message.event)},"payload":{data}}}'
    head, tail = envelope(vsn, topic, "broadcast", None, join_ref)
    return head + payload + tail


def name_ok(name: str) -> bool:
    """A topic, event or key short enough for a binary frame's one-byte length."""
    return len(name.encode()) <= MAX_NAME
