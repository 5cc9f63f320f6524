"""Cleaning a model's answer before it goes out: the phone draws only what sits in a closed
```` ```yui ```` fence, and small models think aloud, forget to close a fence, tag it `yaml`, or
echo the `[yui] …` tap lines they were shown. One function per rule, applied by `clean`; each
reads fences as the phone does (`yuilines.fences`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from yuilines.catalogue import CORE_WORDS, PRESETS
from yuilines.fences import all_fences, fenced_lines, find_fences

# The words a Yui Lines screen line may start with.
PRESET_WORDS = PRESETS | CORE_WORDS

_THINK_TAGS = "think|thinking|thought"
_THINK_OPEN = re.compile(rf"<({_THINK_TAGS})>", re.IGNORECASE)
_THINK_CLOSE = {tag: re.compile(rf"</{tag}>", re.IGNORECASE) for tag in _THINK_TAGS.split("|")}
_OPEN_THINK = re.compile(rf"^\s*<({_THINK_TAGS})>", re.IGNORECASE)
_CLOSE_THINK = re.compile(rf"</({_THINK_TAGS})>", re.IGNORECASE)
_MARKER = re.compile(r"^\s*\[yui\](\s|$)", re.IGNORECASE)
_RETAGGABLE = frozenset({"", "yml", "yaml"})


def strip_thinking(text: str) -> str:
    """Remove `<think>…</think>` blocks, a leading block never closed (the model ran out of room
    while thinking), and what comes before a lone `</think>` (servers whose chat template writes
    the opening tag into the prompt send only the closing one)."""
    text = _drop_think_blocks(text)
    if _OPEN_THINK.match(text):
        return ""
    closing = _CLOSE_THINK.search(text)
    return text[closing.end() :] if closing else text


def _drop_think_blocks(text: str) -> str:
    """Each `<tag>` with the first `</tag>` after it, and what is between, left out, in one
    pass: an opening tag that is never closed is looked past once per tag, not once per copy
    (`<think>` 100,000 times took minutes as one lazy regex)."""
    kept: list[str] = []
    at = search = 0
    unclosed: set[str] = set()  # tags with no closing tag after `search`
    while opened := _THINK_OPEN.search(text, search):
        tag = opened.group(1).lower()
        closed = None if tag in unclosed else _THINK_CLOSE[tag].search(text, opened.end())
        if closed is None:
            unclosed.add(tag)
            search = opened.start() + 1
            continue
        kept.append(text[at : opened.start()])
        at = search = closed.end()
    kept.append(text[at:])
    return "".join(kept)


class ThinkingFilter:
    """Passes a stream's pieces on as they come, holding back a leading thinking block, so a
    terminal shows the answer and not the model thinking aloud."""

    def __init__(self, out: Callable[[str], None]) -> None:
        self._out = out
        self._held = ""
        self._state = "start"  # start (undecided), thinking, or answer

    def feed(self, piece: str) -> None:
        if self._state == "answer":
            self._out(piece)
            return
        self._held += piece
        if self._state == "start":
            head = self._held.lstrip().lower()
            if _OPEN_THINK.match(self._held):
                self._state = "thinking"
            elif any(f"<{tag}>".startswith(head) for tag in _THINK_TAGS.split("|")):
                return  # may still become an opening tag
            else:
                self._state = "answer"
                self._out(self._held)
                return
        closing = _CLOSE_THINK.search(self._held)
        if closing:
            self._state = "answer"
            if rest := self._held[closing.end() :].lstrip():
                self._out(rest)

    def end(self) -> None:
        """Let out what was held while undecided (an answer as short as `<th`)."""
        if self._state == "start" and self._held:
            self._out(self._held)


def drop_echoed_markers(text: str) -> str:
    """Remove the `[yui] …` lines a model copies from the taps it was shown; they are the
    person's words, never the agent's. Lines inside a fence are left alone."""
    inside = fenced_lines(text)
    lines = text.split("\n")
    return "\n".join(line for n, line in enumerate(lines) if n in inside or not _MARKER.match(line))


def retag_yui_fences(text: str) -> str:
    """Tag `yui` an untagged, `yml` or `yaml` fence whose first line starts with a preset word
    (the phone draws only `yui` fences); a bare `yui` first line is the tag that slipped inside.
    Real YAML (`name: tea`) is left alone."""
    lines = text.split("\n")
    drop: set[int] = set()
    for fence in all_fences(text):
        if fence.tag.lower() not in _RETAGGABLE:
            continue
        body = range(
            fence.opener_line + 1, len(lines) if fence.closer_line is None else fence.closer_line
        )
        first = next((n for n in body if lines[n].strip()), None)
        if first is None:
            continue
        if lines[first].strip().lower() == "yui":
            drop.add(first)
        elif not starts_with_preset(lines[first]):
            continue
        lines[fence.opener_line] = f"{fence.indent}{fence.marker}yui"
    return "\n".join(line for n, line in enumerate(lines) if n not in drop)


def close_yui_fence(text: str) -> str:
    """Close a `yui` fence the model left open (it stopped, or forgot), so the screen draws."""
    text = text.rstrip()
    screens = find_fences(text)
    if screens and screens[-1].closer is None:
        return f"{text}\n{screens[-1].indent}{screens[-1].marker}"
    return text


def starts_with_preset(line: str) -> bool:
    """Whether a line starts with a preset word, alone or as `word@name`."""
    first = line.split(maxsplit=1)[0] if line.strip() else ""
    return first.split("@", 1)[0] in PRESET_WORDS


def clean(text: str) -> str:
    """The answer as it goes to the person: every rule, in an order where each sees the
    previous one's result (a retagged fence may then need closing), trimmed as it goes out (a
    first line four spaces in is no fence until trimmed; `close_yui_fence` trims the end)."""
    text = strip_thinking(text).strip()
    text = drop_echoed_markers(text).strip()
    text = retag_yui_fences(text)
    return close_yui_fence(text)


def has_screen(text: str) -> bool:
    """Whether the text holds a complete `yui` fence: a screen the phone draws."""
    return any(fence.closer is not None for fence in find_fences(text))
