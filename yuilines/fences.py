"""The ```yui fences of a reply, and putting a reply back together around new ones.

Only fenced text is ever Yui Lines (ref-specs §1.1). A fence opens on a line of three or more
backticks (or tildes) with the info string `yui`, up to three spaces in, and closes on a line of
at least as many of the same character; an unclosed fence runs to the end of the reply (a
cut-short reply keeps its screen). Other fences are skipped whole, so a ```yui shown inside a
```markdown example is not a screen. Everything outside the fences is kept byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`\n]*")


@dataclass(frozen=True, slots=True)
class Fence:
    """One ```yui fence: offsets into the reply and the line its body starts on (1-based)."""

    start: int
    body_start: int
    body_end: int
    end: int
    first_line: int
    opener: str
    closer: str | None

    def body(self, text: str) -> str:
        return text[self.body_start : self.body_end]


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line with its start offset; the text of a line has no newline. Lines end at "\n"
    only, as the parser's do (not at the other breaks `str.splitlines` knows)."""
    offset = 0
    while offset < len(text):
        newline = text.find("\n", offset)
        end = len(text) if newline < 0 else newline + 1
        yield offset, text[offset:end].rstrip("\r\n")
        offset = end


def find_fences(text: str) -> list[Fence]:
    """The ```yui fences of a reply, in order."""
    fences: list[Fence] = []
    lines = list(_lines(text))
    i = 0
    while i < len(lines):
        offset, line = lines[i]
        m = _OPEN.fullmatch(line)
        if not m:
            i += 1
            continue
        marker, info = m.group(2), m.group(3)
        body_start = offset + len(text[offset:].split("\n", 1)[0]) + 1
        j = i + 1
        while j < len(lines) and not _closes(lines[j][1], marker):
            j += 1
        closed = j < len(lines)
        body_end = lines[j][0] if closed else len(text)
        end = (lines[j + 1][0] if j + 1 < len(lines) else len(text)) if closed else len(text)
        if info == "yui":
            fences.append(
                Fence(
                    start=offset,
                    body_start=min(body_start, len(text)),
                    body_end=body_end,
                    end=end,
                    first_line=i + 2,
                    opener=line,
                    closer=lines[j][1] if closed else None,
                )
            )
        i = j + 1
    return fences


def outside_fences(text: str) -> str:
    """The text with every fenced block taken out (any info string, ```yui or code; an
    unclosed fence hides the rest, as it draws)."""
    kept: list[str] = []
    marker: str | None = None
    for _, line in _lines(text):
        if marker is None:
            opened = _OPEN.fullmatch(line)
            if opened:
                marker = opened.group(2)
            else:
                kept.append(line)
        elif _closes(line, marker):
            marker = None
    return "\n".join(kept)


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and len(stripped) >= len(marker)
        and set(stripped) == {marker[0]}
    )


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
