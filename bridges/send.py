"""`yui send`: put a message in a thread on its own (from cron, a script, another tool).

It goes as a hand-over (the phone says the agent has something for you). The message is
queued in the host's outbox before the first try, behind any reply a running bridge hasn't
written yet, so nothing overtakes; when the relay can't be reached it stays queued, and the
next bridge run (or `yui send`) writes it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bridges.client.host import HostSession
from bridges.client.rows import MAX_BODY, AgentInfo, agent_row
from bridges.client.storage import Progress
from bridges.engine.delivery import write_outbox
from bridges.media.bucket import host_store, media_message, object_path
from bridges.media.files import Media
from state.errors import BadInput, Refused, Unreachable
from state.host import HostState, OutboxItem


@dataclass(frozen=True)
class Message:
    text: str
    agent: str | None = None  # id, handle, ref or name; None means the host's first agent


def read_messages(lines: Iterable[str]) -> list[Message]:
    """One message per line: plain text, or a JSON object `{"text", "agent"?}`. Blank lines
    are skipped; a bad line is refused with its number, before anything is sent."""
    messages = []
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\n")
        if not utf8(line):
            raise BadInput(f"line {number} is not UTF-8 text")
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                raise BadInput(f"line {number}: starts like JSON but isn't") from None
            if not isinstance(value.get("text"), str):
                raise BadInput(f'line {number}: a JSON line needs a "text" string')
            agent = value.get("agent")
            if agent is not None and not isinstance(agent, str):
                raise BadInput(f'line {number}: "agent" should be a string')
            messages.append(Message(value["text"], agent))
        else:
            messages.append(Message(line))
    return messages


def utf8(text: str) -> bool:
    """Whether `text` is real text: bytes that weren't UTF-8 (on stdin, or in an argument)
    arrive as lone surrogates, which no JSON body can carry."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def reach(session: HostSession) -> bool:
    """Open the host's session; False when the relay can't be reached but the session saved
    in the state file lets the messages wait in the outbox (Unreachable when it can't)."""
    try:
        if not session.resume():
            session.open()
    except Unreachable:
        if not session.offline():
            raise
        return False
    return True


def send(state: HostState, messages: list[Message], url: str | None = None) -> list[dict[str, Any]]:
    """Queue the messages, then write the outbox. One result per message, saying whether it
    landed or waits in the outbox."""
    for n, message in enumerate(messages, start=1):
        if not message.text.strip():
            raise BadInput(f"message {n} is empty")
        if not utf8(message.text):
            raise BadInput(f"message {n} is not UTF-8 text")
        if len(message.text) > MAX_BODY:
            raise BadInput(
                f"message {n} has {len(message.text):,} characters; the limit is {MAX_BODY:,}"
            )
    session = HostSession(state, url)
    online = reach(session)
    texts = [(m.text, session.agent(m.agent, refresh=online)) for m in messages]
    return deliver(session, state, texts, online=online)


def send_media(
    state: HostState,
    media: Media,
    caption: str | None = None,
    agent: str | None = None,
    url: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Store a picture or video in an agent's thread (`<user>/<agent>/agent/<uuid>.<ext>`) and
    send a message showing it, queued like `yui send`. Unlike a text, it needs the relay now:
    the bytes have nowhere to wait."""
    session = HostSession(state, url)
    if not session.resume():
        session.open()
    chosen = session.agent(agent, refresh=True)
    path = object_path(session.user_id, chosen.id, "agent", f"{uuid.uuid4()}.{media.type.ext}")
    link = host_store(session, path, media, progress)
    [result] = deliver(session, state, [(media_message(media.type.kind, link, caption), chosen)])
    return {**result, "path": path, "url": link, "type": media.type.mime, "bytes": len(media.data)}


def deliver(
    session: HostSession, state: HostState, texts: list[tuple[str, AgentInfo]], online: bool = True
) -> list[dict[str, Any]]:
    """Queue one hand-over message per text, then write the outbox up to them; each result
    says whether it landed or waits in the outbox."""
    items = []
    for text, agent in texts:
        row = agent_row(session.user_id, agent.id, text, {})
        items.append((OutboxItem(row, handoff=True), agent))
    state.enqueue(*(item for item, _ in items))
    if online:
        try:
            write_outbox(session, state, until={item.id for item, _ in items})
        except Unreachable:
            pass  # it waits in the outbox; the result says so
        except Refused:
            # refused (suspended, removed): not left to land after a restore, when a person
            # who resent it meanwhile would get it twice
            state.pop_many(item.id for item, _ in items)
            raise
    waiting = {item.id for item in state.snapshot().outbox}
    return [
        {"id": item.id, "agent": agent.handle, "queued": item.id in waiting}
        for item, agent in items
    ]
