"""From an agent's answer to the rows the bridge writes.

Every row a host writes has the same shape; a reply also names the rows it answers
(`meta.turn`), carries the @handles it mentions, and is made fit for the person's phone first:
text the relay can't store (NUL, lone surrogates) is mended, presets their app build can't draw
become words, and a body over the relay's limit is cut (never split).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from bridges.engine.mentions import mentions_in
from bridges.engine.turns import MAX_BODY, Turn
from state.host import OutboxItem
from yuilines.gating import gate_reply

_UNSTORABLE = re.compile("[\ud800-\udfff]")  # lone surrogates: not storable as UTF-8


def agent_row(
    user_id: str,
    agent_id: str,
    body: str,
    meta: dict[str, Any],
    kind: str = "text",
    row_id: str | None = None,
) -> dict[str, Any]:
    """A row in the agent's name, its id made here unless given (so a resend is a 409, never
    a twin)."""
    return {
        "id": row_id or str(uuid.uuid4()),
        "user_id": user_id,
        "agent_id": agent_id,
        "sender": "agent",
        "kind": kind,
        "body": body[:MAX_BODY],
        "meta": meta,
    }


@dataclass
class Replies:
    """The outbox items for one answer, and what was changed on the way."""

    items: list[OutboxItem] = field(default_factory=list)
    gated: set[str] = field(default_factory=set)  # presets the phone can't draw yet
    cut: list[int] = field(default_factory=list)  # lengths of replies cut to the limit


def replies_for(
    turn: Turn, answers: list[Any], user_id: str, app_build: int | None, ack: bool = True
) -> Replies:
    """One row per non-empty answer, in order; with `ack`, the last carries the turn's rows
    (they are marked handled once it is written)."""
    done = Replies()
    texts = []
    for answer in answers:
        if not isinstance(answer, str):
            continue
        gated = gate_reply(_UNSTORABLE.sub("\ufffd", answer.replace("\x00", "")), app_build)
        done.gated.update(gated.gated)
        if gated.text.strip():
            texts.append(gated.text.strip())
    for n, text in enumerate(texts, start=1):
        if len(text) > MAX_BODY:
            done.cut.append(len(text))
        meta: dict[str, Any] = {"turn": turn.ids}
        if handles := mentions_in(text[:MAX_BODY], turn.agent.handle):
            meta["mentions"] = handles  # the relay routes them (one hop)
        row = agent_row(user_id, turn.agent.id, text, meta)
        done.items.append(OutboxItem(row, ack=tuple(turn.ids) if ack and n == len(texts) else ()))
    return done
