"""A message's words as the app shows them, for the places with room for a line of text and no
screen: the notes an agent reads, a quoted reply, a push alert."""

from __future__ import annotations

import re

from yuilines.fences import find_fences, splice, stray_yui

# The app's own first lines on a message that mentions or answers another agent.
_HEADER = re.compile(r"\A(?:\[yui\] (?:mention|reply) [^\n]*(?:\n|\Z))+")


def screens(text: str) -> str:
    """A message's words as the app shows them: the app's `[yui] mention|reply …` first line
    dropped, each screen one `[screen]` line."""
    text = _HEADER.sub("", text)
    return splice(text, {fence: "[screen]\n" for fence in find_fences(text)})


def one_line(text: str, limit: int) -> str:
    """The words on one line, at most `limit` characters: cut short, they end in "…"."""
    words = " ".join(text.split())
    return words if len(words) <= limit else words[: limit - 1].rstrip() + "…"


def plain(text: str, limit: int) -> str:
    """A message as one line of at most `limit` characters, as notes and quotes show it."""
    return one_line(screens(text), limit)


def without_screens(text: str) -> str:
    """The words with every screen left out and nothing in its place, where a `[screen]` would
    take the little room there is (a push alert); a stray ```yui goes too (`stray_yui`)."""
    hidden = sorted([(fence.start, fence.end) for fence in find_fences(text)] + stray_yui(text))
    words: list[str] = []
    at = 0
    for start, end in hidden:
        words.append(text[at:start])  # empty where a stray ```yui ran into the next screen
        at = max(at, end)
    words.append(text[at:])
    return " ".join(words)
