"""The fenced blocks of a reply, its ```yui fences among them, and putting a reply back
together around new ones. Every reader of fences in the project reads them here, so the bridge
that cleans a model's answer, the notes and the push preview all see the screens the phone does.

Only fenced text is ever Yui Lines (ref-specs §1.1). A fence opens on a line of three or more
backticks (or tildes), up to three spaces in, followed by its info string (its first word is the
tag: `yui` for a screen); it closes on a line of only the same character, at least as many, up to
three spaces in. An unclosed fence runs to the end of the reply (a cut-short reply keeps its
screen). Inside a fence nothing opens, so a ```yui shown inside a ```markdown example is not a
screen. Everything outside the fences is kept byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`\n]*")
_STRAY_YUI = re.compile(r"```yui(?![\w-])")


@dataclass(frozen=True, slots=True)
class Fence:
    """One fenced block. Offsets into the text: `start` (its opener line), `body_start`,
    `body_end`, `end` (past its closer line, or the end of the text while unclosed). Line
    numbers count from 0 as `text.split("\\n")` does: `opener_line`, `closer_line` (None while
    unclosed). `opener` and `closer` are those lines without their line break; `indent` and
    `marker` (the run of backticks or tildes) are the opener's, `tag` its info string's first
    word as written."""

    start: int
    body_start: int
    body_end: int
    end: int
    opener_line: int
    closer_line: int | None
    opener: str
    closer: str | None
    indent: str
    marker: str
    tag: str

    @property
    def first_line(self) -> int:
        """The line its body starts on, counted from 1 as a person reads a reply."""
        return self.opener_line + 2

    def body(self, text: str) -> str:
        return text[self.body_start : self.body_end]


@dataclass(frozen=True, slots=True)
class _Line:
    start: int
    end: int  # past its "\n"
    text: str  # without its line break


def _lines(text: str) -> list[_Line]:
    """Each line with its offsets. Lines end at "\n" only, as the parser's do (not at the other
    breaks `str.splitlines` knows); a "\r" before it is not part of the line's text."""
    lines: list[_Line] = []
    offset = 0
    while offset < len(text):
        newline = text.find("\n", offset)
        end = len(text) if newline < 0 else newline + 1
        lines.append(_Line(offset, end, text[offset:end].rstrip("\r\n")))
        offset = end
    return lines


def all_fences(text: str) -> list[Fence]:
    """Every fenced block of a text, whatever its tag, in order."""
    fences: list[Fence] = []
    lines = _lines(text)
    i = 0
    while i < len(lines):
        opened = _OPEN.fullmatch(lines[i].text)
        if not opened:
            i += 1
            continue
        indent, marker, tag = opened.groups()
        j = i + 1
        while j < len(lines) and not _closes(lines[j].text, marker):
            j += 1
        closer = lines[j] if j < len(lines) else None
        fences.append(
            Fence(
                start=lines[i].start,
                body_start=lines[i].end,
                body_end=len(text) if closer is None else closer.start,
                end=len(text) if closer is None else closer.end,
                opener_line=i,
                closer_line=None if closer is None else j,
                opener=lines[i].text,
                closer=None if closer is None else closer.text,
                indent=indent,
                marker=marker,
                tag=tag,
            )
        )
        i = j + 1
    return fences


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and len(stripped) >= len(marker)
        and set(stripped) == {marker[0]}
    )


def find_fences(text: str) -> list[Fence]:
    """The ```yui fences of a reply, in order: its screens."""
    return [fence for fence in all_fences(text) if fence.tag == "yui"]


def fenced_lines(text: str) -> set[int]:
    """The numbers of the lines inside a fence, its opener and closer included (an unclosed
    fence holds every line to the end)."""
    total = text.count("\n") + 1
    return {
        number
        for fence in all_fences(text)
        for number in range(
            fence.opener_line, total if fence.closer_line is None else fence.closer_line + 1
        )
    }


def outside_fences(text: str) -> str:
    """The lines outside every fenced block (any tag, ```yui or code; an unclosed fence hides
    the rest, as it draws), without their line breaks, joined by newlines."""
    fenced = fenced_lines(text)
    return "\n".join(line.text for n, line in enumerate(_lines(text)) if n not in fenced)


def stray_yui(text: str) -> list[tuple[int, int]]:
    """Where the words outside every fence hold a ```yui that opens no fence (mid-line, indented
    four spaces or more, or with backticks after it on its line): from it to the next ``` or the
    end of the text. It is no screen, the app shows it as words; a push alert, which has no room
    to show a screen either way, leaves it out, so a screen written in the wrong place never
    shows there as source. Start and end offsets, in order."""
    spans: list[tuple[int, int]] = []
    at = 0
    for words_start, words_end in _between_fences(text):
        at = max(at, words_start)
        while found := _STRAY_YUI.search(text, at, words_end):
            close = text.find("```", found.end())
            at = len(text) if close < 0 else close + 3
            spans.append((found.start(), at))
    return spans


def _between_fences(text: str) -> Iterator[tuple[int, int]]:
    """The stretches of text outside every fence, as start and end offsets."""
    at = 0
    for fence in all_fences(text):
        yield at, fence.start
        at = fence.end
    yield at, len(text)


def splice(text: str, replacements: Mapping[Fence, str]) -> str:
    """The reply with each given fence (opening line to closing line) replaced; nothing
    outside those fences changes."""
    out: list[str] = []
    at = 0
    for fence in sorted(replacements, key=lambda f: f.start):
        out.append(text[at : fence.start])
        out.append(replacements[fence])
        at = fence.end
    out.append(text[at:])
    return "".join(out)


def build_fence(lines: list[str], opener: str = "```yui", closer: str | None = "```") -> str:
    """A fence holding `lines`; no closing line when `closer` is None (left open)."""
    body = "".join(f"{line}\n" for line in lines)
    return f"{opener}\n{body}" + (f"{closer}\n" if closer is not None else "")
