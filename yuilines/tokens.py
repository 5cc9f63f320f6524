"""Tokens and values of one Yui Lines line (ref-specs §1.3, §1.4).

A line is read once, left to right: quotes group, `|` outside quotes splits options, the first
`=` after a key splits key and value, `+name` is a flag and a lone `#` ends the line. Each token
keeps its pieces with a quoted mark, because the presets read the same text differently: a
quoted `"60"` is words for a timer, a bare `60` is seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
ID_RE = re.compile(r"[A-Za-z0-9_-]+")
FLAG = re.compile(r"\+([A-Za-z][A-Za-z0-9_-]*)")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
RANGE = re.compile(r"(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)")
QUANTITY = re.compile(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)([^\d\s].*)?")
CURRENCY = re.compile(r"([$€£¥])(-?\d+(?:\.\d+)?)")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smh]?)|(\d+):([0-5]\d)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}

Piece = tuple[str, bool]  # (text, was quoted)


@dataclass(slots=True)
class Token:
    """One token: a positional (maybe options), a `key=value`, or a `+flag`."""

    parts: list[Piece]
    key: str | None = None
    flag: str | None = None
    start: int = 0
    raw: str = ""

    @property
    def quoted(self) -> bool:
        return any(q for _, q in self.parts)

    @property
    def is_options(self) -> bool:
        return len(self.parts) > 1

    @property
    def text(self) -> str:
        """The token as words: options joined back with `|`."""
        return "|".join(t for t, _ in self.parts)

    @property
    def bare(self) -> str | None:
        """The text of a single unquoted piece, else None."""
        if len(self.parts) == 1 and not self.parts[0][1]:
            return self.parts[0][0]
        return None

    def texts(self) -> list[str]:
        return [t for t, _ in self.parts]

    def value(self) -> Any:
        """The typed value: numbers, on/off, options as a list (each part judged alone)."""
        if len(self.parts) > 1:
            return [coerce(t, q) for t, q in self.parts]
        return coerce(*self.parts[0])


@dataclass(slots=True)
class Line:
    """A line after its head: positionals, keys (last wins, in first-seen order) and flags."""

    tokens: list[Token] = field(default_factory=list)

    @property
    def positionals(self) -> list[Token]:
        return [t for t in self.tokens if t.key is None and t.flag is None]

    def named(self) -> dict[str, Token]:
        out: dict[str, Token] = {}
        for t in self.tokens:
            if t.key is not None:
                out[t.key] = t
        return out

    def flags(self) -> list[str]:
        return [t.flag for t in self.tokens if t.flag is not None]


def coerce(text: str, quoted: bool) -> Any:
    """A bare `-?digits[.digits]` is a number, on/true and off/false are booleans."""
    if quoted:
        return text
    if NUMBER.fullmatch(text):
        return number(text)
    if text in ("on", "true"):
        return True
    if text in ("off", "false"):
        return False
    return text


def number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "e" not in text and "." not in text else value


def split_raw(text: str, start: int = 0) -> list[tuple[str, int]]:
    """Split on ASCII space/tab outside quotes; each raw token with its offset in `text`."""
    out: list[tuple[str, int]] = []
    i, n = start, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        begin, quote = i, False
        while i < n and (quote or text[i] not in " \t"):
            ch = text[i]
            if quote and ch == "\\" and i + 1 < n:
                i += 2
                continue
            if ch == '"':
                quote = not quote
            i += 1
        out.append((text[begin:i], begin))
    return out


def pieces(raw: str, split_pipes: bool = True) -> list[Piece]:
    """Unquote a raw token, splitting on `|` outside quotes."""
    parts: list[Piece] = []
    buf: list[str] = []
    quoted = in_quote = False
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if in_quote:
            if ch == "\\" and i + 1 < n:
                buf.append(raw[i + 1])
                i += 2
                continue
            if ch == '"':
                in_quote = False
            else:
                buf.append(ch)
        elif ch == '"':
            in_quote = quoted = True
        elif ch == "|" and split_pipes:
            parts.append(("".join(buf), quoted))
            buf, quoted = [], False
        else:
            buf.append(ch)
        i += 1
    parts.append(("".join(buf), quoted))
    return parts


def tokenize(text: str, start: int = 0) -> tuple[list[Token], int | None]:
    """Tokens of `text` from `start`, stopping at a lone `#`; also the comment's offset."""
    tokens: list[Token] = []
    for raw, offset in split_raw(text, start):
        if raw == "#":
            return tokens, offset
        tokens.append(make_token(raw, offset))
    return tokens, None


def make_token(raw: str, offset: int = 0) -> Token:
    flag = FLAG.fullmatch(raw)
    if flag:
        return Token([(raw, False)], flag=flag.group(1), start=offset, raw=raw)
    eq = raw.find("=")
    if eq > 0 and '"' not in raw[:eq] and KEY.fullmatch(raw[:eq]):
        return Token(pieces(raw[eq + 1 :]), key=raw[:eq], start=offset, raw=raw)
    return Token(pieces(raw), start=offset, raw=raw)


def join(tokens: list[Token]) -> str:
    """Positional tokens as words, joined by single spaces."""
    return " ".join(t.text for t in tokens)


def duration(text: str) -> float | int | None:
    """`45`, `90s`, `5m`, `1.5m`, `1h`, `1:30` in seconds; None when it is not one."""
    m = _DURATION.fullmatch(text)
    if not m:
        return None
    if m.group(3) is not None:
        return int(m.group(3)) * 60 + int(m.group(4))
    seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    return int(seconds) if seconds.is_integer() else seconds


def timespec(text: str) -> dict[str, Any] | None:
    """`work[/rest][xRounds]` as {work, rest?, rounds?}; None when it is not one."""
    body, _, rounds = text.partition("x")
    if rounds and not rounds.isdigit():
        return None
    work_text, slash, rest_text = body.partition("/")
    work = duration(work_text)
    if work is None:
        return None
    out: dict[str, Any] = {"work": work}
    if slash:
        rest = duration(rest_text)
        if rest is None:
            return None
        out["rest"] = rest
    if rounds:
        out["rounds"] = int(rounds)
    return out


def range_of(text: str) -> tuple[int | float, int | float] | None:
    m = RANGE.fullmatch(text)
    return (number(m.group(1)), number(m.group(2))) if m else None


def quantity(text: str) -> tuple[int | float, str | None] | None:
    """A number with a unit glued on (`72.5kg`, `12%`, `3e8m/s`) or a currency (`$40`)."""
    cur = CURRENCY.fullmatch(text)
    if cur:
        return number(cur.group(2)), cur.group(1)
    m = QUANTITY.fullmatch(text)
    if not m:
        return None
    return number(m.group(1)), m.group(2)
