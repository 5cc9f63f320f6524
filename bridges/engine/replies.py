"""From an agent's answer to the rows the bridge writes.

Every row a host writes has the same shape; a reply also names the rows it answers
(`meta.turn`), carries the @handles it mentions, and is made fit for the person's phone first:
text the relay can't store (NUL, lone surrogates) is mended, presets their app build can't draw
become words, and a body over the relay's limit is cut (never split). A turn the engine gave up
on gets one plain line instead (`undelivered`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bridges.client.rows import MAX_BODY, agent_row
from bridges.engine.mentions import mentions_in
from bridges.engine.turns import Turn
from state.host import OutboxItem
from yuilines.gating import gate_reply

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # valid JSON escapes, not storable as UTF-8

# What the person reads when the agent's answer to their message(s) couldn't be delivered.
UNDELIVERED = "⚠️ The answer to your message couldn't be delivered. You can send it again."
UNDELIVERED_MANY = "⚠️ The answer to your messages couldn't be delivered. You can send them again."


def storable(text: str) -> tuple[str, list[str]]:
    """`text` as the relay can store it (NUL bytes removed, lone surrogates replaced), and what
    was mended, in words."""
    mended = []
    if "\x00" in text:
        text = text.replace("\x00", "")
        mended.append("NUL bytes")
    if _LONE_SURROGATE.search(text):
        text = _LONE_SURROGATE.sub("\ufffd", text)
        mended.append("lone surrogates")
    return text, mended


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
        gated = gate_reply(storable(answer)[0], app_build)
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


def undelivered(turn: Turn, user_id: str, ack: bool = True) -> OutboxItem:
    """The one line for a turn the engine gave up on. It names the turn's rows (`meta.turn`), so
    a restart finds them answered and only acks them, and is a status line, so no agent or
    note reads it as the conversation; with `ack`, it carries the rows' acks."""
    text = UNDELIVERED if len(turn.rows) == 1 else UNDELIVERED_MANY
    row = agent_row(user_id, turn.agent.id, text, {"turn": turn.ids, "status": True})
    return OutboxItem(row, ack=tuple(turn.ids) if ack else ())
