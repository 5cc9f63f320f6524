"""A2A's two JSON dialects: what the bridge sends, written for 1.0 or for 0.3, and what agents
send back, read from either.

1.0 (the protobuf-based spec, `a2a-sdk` 1.x) names its methods `SendMessage`, `GetTask`, …,
carries `A2A-Version: 1.0` on every call, writes parts as `{"text"}`, `{"raw"}`, `{"url"}` or
`{"data"}` with a `mediaType`, states as `TASK_STATE_WORKING`, and wraps stream events as
`{"statusUpdate": …}`. 0.3 names them `message/send`, `tasks/get`, …, refuses the version header,
tags every object with a `kind`, nests files as `{"kind": "file", "file": {"bytes"|"uri"}}` and
writes states as `working`. Sending must be exact, so each dialect writes its own; reading is
lenient (the keys never collide), so an agent that mixes the two, as a 1.x server with 0.3
compatibility does in its card, is still understood.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
INTERRUPTED = frozenset({"input-required", "auth-required"})
# 1.0's wrapper keys, and the 0.3 `kind` each one is
WRAPPED = {
    "task": "task",
    "message": "message",
    "statusUpdate": "status-update",
    "artifactUpdate": "artifact-update",
}


@dataclass(frozen=True)
class Part:
    """One part of a message or an artifact, whichever dialect it came in."""

    kind: str  # text, data or file
    text: str = ""
    data: Any = None
    url: str | None = None
    raw: bytes | None = None
    media_type: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class Artifact:
    id: str
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Event:
    """One thing an agent said: a whole task (`snapshot`), a status update, an artifact (whole,
    or a piece to `append`), or a plain message that is the whole answer (no task)."""

    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    status: tuple[Part, ...] = ()  # the status message's parts
    at: str | None = None  # the status's timestamp
    artifacts: tuple[Artifact, ...] = ()
    append: bool = False
    snapshot: bool = False
    message: tuple[Part, ...] | None = None


@dataclass(frozen=True)
class Dialect:
    """How one protocol version writes its calls."""

    version: str
    send: str
    stream: str
    get: str
    cancel: str
    subscribe: str
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def modern(self) -> bool:
        return self.version == "1.0"

    def message(
        self, parts: list[Part], message_id: str, context_id: str, task_id: str | None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "messageId": message_id,
            "contextId": context_id,
            "role": "ROLE_USER" if self.modern else "user",
            "parts": [self._part(p) for p in parts],
        }
        if task_id:
            message["taskId"] = task_id
        if not self.modern:
            message["kind"] = "message"
        return message

    def send_params(self, message: dict[str, Any], *, blocking: bool) -> dict[str, Any]:
        """`SendMessage`'s params; not `blocking`, the agent answers with its task at once."""
        if self.modern:
            config = {} if blocking else {"configuration": {"returnImmediately": True}}
            return {"message": message, **config}
        return {"message": message, "configuration": {"blocking": blocking}}

    def get_params(self, task_id: str) -> dict[str, Any]:
        """`GetTask`'s params: no history, which grows with every status update."""
        return {"id": task_id, "historyLength": 0}

    def _part(self, part: Part) -> dict[str, Any]:
        out: dict[str, Any]
        if self.modern:
            if part.kind == "text":
                out = {"text": part.text}
            elif part.kind == "data":
                out = {"data": part.data, "mediaType": "application/json"}
            else:
                out = {"raw": base64.b64encode(part.raw or b"").decode()}
                out |= {"mediaType": part.media_type, "filename": part.name}
        elif part.kind == "text":
            out = {"kind": "text", "text": part.text}
        elif part.kind == "data":
            out = {"kind": "data", "data": part.data}
        else:
            file = {"bytes": base64.b64encode(part.raw or b"").decode()}
            out = {"kind": "file", "file": file | {"mimeType": part.media_type, "name": part.name}}
        if part.metadata:
            out["metadata"] = part.metadata
        return {k: v for k, v in out.items() if v is not None}


V10 = Dialect(
    "1.0",
    send="SendMessage",
    stream="SendStreamingMessage",
    get="GetTask",
    cancel="CancelTask",
    subscribe="SubscribeToTask",
    headers={"A2A-Version": "1.0"},
)
V03 = Dialect(
    "0.3",
    send="message/send",
    stream="message/stream",
    get="tasks/get",
    cancel="tasks/cancel",
    subscribe="tasks/resubscribe",
)


# --- reading, either dialect -------------------------------------------------------------------


def state_name(raw: Any) -> str | None:
    """`TASK_STATE_INPUT_REQUIRED` and `input-required` alike, as `input-required`."""
    if not isinstance(raw, str) or not raw:
        return None
    return raw.removeprefix("TASK_STATE_").lower().replace("_", "-")


def read(result: Any) -> Event:
    """What one result says: a send's or a stream's result, or a task (`GetTask`, `CancelTask`)."""
    if not isinstance(result, dict):
        raise ValueError("an A2A result must be a JSON object")
    kind = result.get("kind")
    for key, name in WRAPPED.items():
        if isinstance(result.get(key), dict):  # 1.0 wraps each kind in a key of its own
            kind, result = name, result[key]
            break
    else:
        if kind is None and "status" in result and "id" in result:  # a 1.0 task
            kind = "task"
    if kind == "message":
        return Event(
            task_id=_text(result.get("taskId")),
            context_id=_text(result.get("contextId")),
            message=parts_of(result),
        )
    status = _obj(result.get("status"))
    state, at = state_name(status.get("state")), _text(status.get("timestamp"))
    said = parts_of(status.get("message")) if isinstance(status.get("message"), dict) else ()
    if kind == "task":
        artifacts = tuple(_artifact(a) for a in _list(result.get("artifacts")))
        return Event(
            task_id=_text(result.get("id")),
            context_id=_text(result.get("contextId")),
            state=state,
            status=said,
            at=at,
            artifacts=tuple(a for a in artifacts if a is not None),
            snapshot=True,
        )
    if kind == "status-update":
        return Event(
            task_id=_text(result.get("taskId")),
            context_id=_text(result.get("contextId")),
            state=state,
            status=said,
            at=at,
        )
    if kind == "artifact-update":
        artifact = _artifact(result.get("artifact"))
        return Event(
            task_id=_text(result.get("taskId")),
            context_id=_text(result.get("contextId")),
            artifacts=(artifact,) if artifact else (),
            append=bool(result.get("append")),
        )
    raise ValueError(f"an A2A result of an unknown kind: {sorted(result)[:6]}")


def parts_of(holder: Any) -> tuple[Part, ...]:
    """The parts of a message or artifact; a part of no kind we know is skipped."""
    if not isinstance(holder, dict):
        return ()
    found = (_part(p) for p in _list(holder.get("parts")))
    return tuple(p for p in found if p is not None)


def _part(raw: Any) -> Part | None:
    if not isinstance(raw, dict):
        return None
    meta = _obj(raw.get("metadata")) or None
    if isinstance(raw.get("text"), str):
        return Part("text", text=raw["text"], metadata=meta)
    if "data" in raw and raw.get("kind") in (None, "data"):
        return Part("data", data=raw["data"], metadata=meta)
    file = _obj(raw.get("file")) or raw
    blob = file.get("raw", file.get("bytes"))
    url = file.get("url", file.get("uri"))
    media_type = _text(file.get("mediaType", file.get("mimeType")))
    name = _text(file.get("filename", file.get("name")))
    if isinstance(blob, str):
        try:
            data = base64.b64decode(blob + "=" * (-len(blob) % 4))
        except (binascii.Error, ValueError):
            return None
        return Part("file", raw=data, media_type=media_type, name=name, metadata=meta)
    if isinstance(url, str) and url:
        return Part("file", url=url, media_type=media_type, name=name, metadata=meta)
    return None


def _artifact(raw: Any) -> Artifact | None:
    if not isinstance(raw, dict):
        return None
    return Artifact(_text(raw.get("artifactId")) or "", parts_of(raw))


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
