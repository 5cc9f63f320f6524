"""The chat a model is sent for one turn: Yui holds the thread, so every turn is built afresh
from the agent's own rows.

The system message is the channel guide (the short one when the full one would take more than
a third of the window), then the host's own system text. Then as much of the thread as fits,
oldest first and whole rows only: a window is filled from the newest row back, and the first
row that doesn't fit ends it, so there is never a gap in the middle. Rows the model must not
read as conversation are left out: the bridge's status lines, control rows, empty rows, and
what the person stopped (sending it again would undo their Stop). Runs of one role are
joined, since many chat templates insist on alternating roles. Last comes the turn: one user
message, the bridge's notes first, then one line per row, a tap as its `[yui] …` line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHORT_GUIDE = Path(__file__).with_name("short_guide.md")
DEFAULT_RESERVE = 1024  # tokens kept for the answer when --max-tokens isn't given

Message = dict[str, str]


def tokens(text: str) -> int:
    """A token estimate that errs high (3.5 characters a token, plus a message's overhead),
    since no tokenizer is shared by every server."""
    return math.ceil(len(text) / 3.5) + 4


def short_guide() -> str:
    return SHORT_GUIDE.read_text(encoding="utf-8")


def fits_full_guide(guide: str | None, context: int) -> bool:
    """Whether the full guide takes at most a third of the window: a small model given a guide
    that fills its window forgets the conversation, so it gets the short one."""
    return bool(guide and guide.strip()) and tokens((guide or "").strip()) <= context / 3


def guide_for(guide: str | None, context: int) -> str:
    return (guide or "").strip() if fits_full_guide(guide, context) else short_guide().strip()


def system_prompt(guide: str | None, system: str, context: int) -> str:
    """The guide, then the host's own words (`--system`), a blank line between."""
    return "\n\n".join(p for p in (guide_for(guide, context), system.strip()) if p)


def row_message(row: dict[str, Any]) -> Message | None:
    """A thread row as a chat message, or None for a row that isn't conversation."""
    meta = row.get("meta") or {}
    body = (row.get("body") or "").strip()
    # `bridge` marks the reference model bridge's status lines, which a thread may still hold.
    if row.get("kind") == "control" or meta.get("status") or meta.get("bridge") or not body:
        return None
    return {"role": "assistant" if row.get("sender") == "agent" else "user", "content": body}


def conversation(history: list[dict[str, Any]]) -> list[Message]:
    """The thread's rows as messages, oldest first. A Stop (the person's control row, or the
    bridge's answer to it) takes back the person's unanswered rows just before it."""
    messages: list[Message] = []
    for row in history:
        if row.get("kind") == "control" and (row.get("meta") or {}).get("op") == "stop":
            while messages and messages[-1]["role"] == "user":
                messages.pop()
        elif (message := row_message(row)) is not None:
            messages.append(message)
    return messages


def merge_roles(messages: list[Message]) -> list[Message]:
    """Join runs of one role with a newline, and start with the person: templates that insist
    on alternation reject a leading assistant message."""
    merged: list[Message] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            joined = merged[-1]["content"] + "\n" + message["content"]
            merged[-1] = {"role": message["role"], "content": joined}
        else:
            merged.append(dict(message))
    while merged and merged[0]["role"] == "assistant":
        merged.pop(0)
    return merged


@dataclass(frozen=True)
class Chat:
    """The messages to send, and what the window left out."""

    messages: list[Message]
    kept: int  # history rows sent
    dropped: int  # history rows that didn't fit
    over: bool  # the guide and the turn alone exceed the window (sent anyway)


def build_chat(
    system: str,
    history: list[dict[str, Any]],
    turn: list[dict[str, Any]],
    *,
    context: int,
    reserve: int,
    notes: list[str] | None = None,
) -> Chat:
    """The chat for a turn. `history` is the thread before the turn, oldest first; `notes`
    are the bridge's `[yui] …` lines for the agent, read before the turn's rows."""
    bodies = [(row.get("body") or "").strip() for row in turn]
    asked = "\n".join(line for line in [*(notes or []), *bodies] if line)
    budget = context - reserve - tokens(system) - tokens(asked)
    over = budget < 0
    candidates = conversation(history)
    kept: list[Message] = []
    for message in reversed(candidates):
        cost = tokens(message["content"])
        if cost > budget:
            break
        budget -= cost
        kept.append(message)
    kept.reverse()
    chat = merge_roles([*kept, {"role": "user", "content": asked}])
    return Chat(
        messages=[{"role": "system", "content": system}, *chat],
        kept=len(kept),
        dropped=len(candidates) - len(kept),
        over=over,
    )
