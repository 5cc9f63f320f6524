"""Cleaning a model's answer before it goes out: the phone draws only what sits in a closed
```` ```yui ```` fence, and small models think aloud, forget to close a fence, tag it `yaml`, or
echo the `[yui] …` tap lines they were shown. One function per rule, applied by `clean`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from yuilines.catalogue import CORE_WORDS, PRESETS

# The words a Yui Lines screen line may start with.
PRESET_WORDS = PRESETS | CORE_WORDS

# A fence line: optional indent, three or more backticks, then the info string's first word.
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,})\s*(?P<tag>[^`\s]*)[^`]*$")
_THINK_TAGS = "think|thinking|thought"
_THINK_BLOCK = re.compile(rf"<({_THINK_TAGS})>.*?</\1>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(rf"^\s*<({_THINK_TAGS})>", re.IGNORECASE)
_CLOSE_THINK = re.compile(rf"</({_THINK_TAGS})>", re.IGNORECASE)
_MARKER = re.compile(r"^\s*\[yui\](\s|$)", re.IGNORECASE)
_RETAGGABLE = frozenset({"", "yml", "yaml"})


@dataclass(frozen=True)
class Fence:
    """A fenced block: the line numbers of its opener and closer (None while unclosed)."""

    start: int
    end: int | None
    ticks: str
    tag: str


def fences(lines: list[str]) -> list[Fence]:
    """The fenced blocks, as a Markdown reader pairs them: a closer is bare backticks, at least
    as many as its opener."""
    found: list[Fence] = []
    opener: re.Match[str] | None = None
    start = 0
    for number, line in enumerate(lines):
        match = _FENCE.match(line)
        if match is None:
            continue
        if opener is None:
            opener, start = match, number
        elif not match["tag"] and len(match["ticks"]) >= len(opener["ticks"]):
            found.append(Fence(start, number, opener["ticks"], opener["tag"].lower()))
            opener = None
    if opener is not None:
        found.append(Fence(start, None, opener["ticks"], opener["tag"].lower()))
    return found


def _inside(found: list[Fence], total: int) -> set[int]:
    """Line numbers inside a fence, the fence lines included."""
    return {n for f in found for n in range(f.start, (total - 1 if f.end is None else f.end) + 1)}


def strip_thinking(text: str) -> str:
    """Remove `<think>…</think>` blocks, a leading block never closed (the model ran out of room
    while thinking), and what comes before a lone `</think>` (servers whose chat template writes
    the opening tag into the prompt send only the closing one)."""
    text = _THINK_BLOCK.sub("", text)
    if _OPEN_THINK.match(text):
        return ""
    closing = _CLOSE_THINK.search(text)
    return text[closing.end() :] if closing else text


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
    lines = text.split("\n")
    inside = _inside(fences(lines), len(lines))
    return "\n".join(line for n, line in enumerate(lines) if n in inside or not _MARKER.match(line))


def retag_yui_fences(text: str) -> str:
    """Tag `yui` an untagged, `yml` or `yaml` fence whose first line starts with a preset word
    (the phone draws only `yui` fences); a bare `yui` first line is the tag that slipped inside.
    Real YAML (`name: tea`) is left alone."""
    lines = text.split("\n")
    drop: set[int] = set()
    for fence in fences(lines):
        if fence.tag not in _RETAGGABLE:
            continue
        body = range(fence.start + 1, len(lines) if fence.end is None else fence.end)
        first = next((n for n in body if lines[n].strip()), None)
        if first is None:
            continue
        if lines[first].strip().lower() == "yui":
            drop.add(first)
        elif not starts_with_preset(lines[first]):
            continue
        indent = _FENCE.match(lines[fence.start])["indent"]  # type: ignore[index]
        lines[fence.start] = f"{indent}{fence.ticks}yui"
    return "\n".join(line for n, line in enumerate(lines) if n not in drop)


def close_yui_fence(text: str) -> str:
    """Close a `yui` fence the model left open (it stopped, or forgot), so the screen draws."""
    lines = text.rstrip().split("\n")
    found = fences(lines)
    if found and found[-1].end is None and found[-1].tag == "yui":
        indent = _FENCE.match(lines[found[-1].start])["indent"]  # type: ignore[index]
        lines.append(indent + found[-1].ticks)
    return "\n".join(lines)


def starts_with_preset(line: str) -> bool:
    """Whether a line starts with a preset word, alone or as `word@name`."""
    first = line.split(maxsplit=1)[0] if line.strip() else ""
    return first.split("@", 1)[0] in PRESET_WORDS


def clean(text: str) -> str:
    """The answer as it goes to the person: every rule, in an order where each sees the
    previous one's result (a retagged fence may then need closing)."""
    text = strip_thinking(text)
    text = drop_echoed_markers(text)
    text = retag_yui_fences(text)
    text = close_yui_fence(text)
    return text.strip()


def has_screen(text: str) -> bool:
    """Whether the text holds a complete `yui` fence: a screen the phone draws."""
    return any(f.tag == "yui" and f.end is not None for f in fences(text.split("\n")))
