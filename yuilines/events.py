"""Event lines: how a tap on a Yui screen reads to the agent.

When the person taps or submits something, the app writes one `kind=event` row. Its body is a
single line the agent can read like words (`[yui] n1 choose choice=Walk`) and its meta carries the
same event as JSON for hosts that want structure. `yui app tap` plays the phone's part, so the
line must come out exactly as the app writes it: agents (and their prompts) are tuned to it.

Rules (relay spec "App to agent: events"): `[yui] <id> <preset>`, then the value's keys sorted;
true written as the bare key; strings quoted when they hold whitespace, `|`, `=` or `"`; lists
joined with `|`; nested objects flattened with dots. Choices the spec leaves open, made here:

- False is written `key=false` (a quiz's `correct=false` or an untick must still be visible);
  None means "no value" and the key is left out. An empty list reads `key=` (spec example `o=`).
- Inside quotes, `"` and `\\` are escaped with a backslash, as in a Yui Lines token; a line break
  is written `\\n` (`\\r`, `\\t` likewise) so the body stays one line.
- Numbers: ints as written; a float that holds a whole number prints as one (4.0 -> 4, as the
  app's JavaScript does), others in Python's shortest round-trip form (2.5, 0.1).
- Only the top-level keys are sorted; a nested object keeps its own order (the form's field
  order, the plan's step order), as in the spec's `plan.who.first=Maya plan.agents=...`.
- A list item that is itself a list is joined with `,` (an image edit path: `10,20|30,40`); an
  object inside a list is written as compact JSON.
- A value nested deeper than `limits.MAX_DEPTH`, written or read (dotted keys), is an
  EventLineError: writing one would recurse past Python's limit.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from yuilines.limits import MAX_DEPTH, value_nesting


class EventLineError(ValueError):
    """An event line, or a value for one, that can't be read or written."""


_ID = re.compile(r"[A-Za-z0-9_-]+")
_PRESET = re.compile(r"[a-z][a-z0-9_-]*")
_KEY = re.compile(r"[A-Za-z_][\w-]*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Other characters that end a line for some reader (str.splitlines among them): written as
# \uXXXX, so an event body is always exactly one line.
_ESCAPES |= {ch: f"\\u{ord(ch):04x}" for ch in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"}


def format_event_line(element_id: str, preset: str, value: Mapping[str, Any]) -> str:
    """The one-line body of an event row: `[yui] <id> <preset> key=value ...`."""
    _check_head(element_id, preset)
    if value_nesting(value) > MAX_DEPTH:
        raise EventLineError(f"an event's value nests deeper than {MAX_DEPTH} levels")
    parts = [f"[yui] {element_id} {preset}"]
    for key in sorted(value):
        parts.extend(_pairs(_check_key(str(key)), value[key]))
    return " ".join(parts)


def event_meta(
    element_id: str, preset: str, value: Mapping[str, Any], echo: str | None = None
) -> dict[str, Any]:
    """The row's meta: `{id, preset, value, echo}`, echo left out when there is none."""
    _check_head(element_id, preset)
    meta: dict[str, Any] = {"id": element_id, "preset": preset, "value": dict(value)}
    if echo is not None:
        meta["echo"] = echo
    return meta


def parse_cli_values(pairs: Sequence[str]) -> dict[str, Any]:
    """Turn `yui app tap` arguments (`key=value`, bare `key`, dotted keys) into a value tree.

    `true`/`false` become booleans, `4` or `2.5` numbers, `a|b` a list of strings, anything
    else a string; a bare `key` is True; `form.mood=4` nests. Raises EventLineError on a bad key or
    on a key used both as a value and as an object.
    """
    tree: dict[str, Any] = {}
    for pair in pairs:
        raw_key, eq, raw = pair.partition("=")
        path = _key_path(raw_key, pair)
        leaf: Any = _cli_scalar(raw) if eq else True
        node = tree
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                raise EventLineError(f"{where!r} already has a value; it can't also hold {pair!r}")
            node = child
        last = path[-1]
        if isinstance(node.get(last), dict):
            raise EventLineError(
                f"{'.'.join(path)!r} already holds fields; it can't also be {pair!r}"
            )
        node[last] = leaf
    return tree


def _check_key(key: str) -> str:
    """A key as a line can carry it (and read it back): no spaces, `=`, quotes or breaks."""
    if not _KEY.fullmatch(key):
        raise EventLineError(
            f"bad key {key!r}: it starts with a letter or '_' and holds letters, digits, '_' or '-'"
        )
    return key


def _check_head(element_id: str, preset: str) -> None:
    if not _ID.fullmatch(element_id or ""):
        raise EventLineError(f"bad element id {element_id!r}: use letters, digits, '_' or '-'")
    if not _PRESET.fullmatch(preset or ""):
        raise EventLineError(f"bad preset {preset!r}: a lowercase word such as 'choose'")


def _pairs(key: str, value: Any) -> list[str]:
    """The `key=value` words for one value; objects expand into dotted keys."""
    if value is None:
        return []
    if value is True:
        return [key]
    if isinstance(value, Mapping):
        words: list[str] = []
        for sub, inner in value.items():
            words.extend(_pairs(f"{key}.{_check_key(str(sub))}", inner))
        return words
    if _is_list(value):
        return [f"{key}=" + "|".join(_item(v) for v in value)]
    return [f"{key}={_scalar(value)}"]


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def _item(value: Any) -> str:
    if _is_list(value):
        return _scalar(",".join(_plain(v) for v in value))
    if isinstance(value, Mapping):
        return _scalar(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return _scalar(value)


def _plain(value: Any) -> str:
    """A scalar as text, before any quoting."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _number(value)
    try:
        return str(value)
    except ValueError:  # an int past Python's digit limit for str()
        raise EventLineError("a number too long to write in an event line") from None


def _scalar(value: Any) -> str:
    text = _plain(value)
    if isinstance(value, bool | int | float):
        return text
    return _quote(text)


def _number(value: float) -> str:
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def _quote(text: str) -> str:
    if not any(ch.isspace() or ch in '|="' for ch in text):
        return text
    return '"' + "".join(_ESCAPES.get(ch, ch) for ch in text) + '"'


def _key_path(raw_key: str, pair: str) -> list[str]:
    if not raw_key:
        raise EventLineError(f"{pair!r} has no key: write key=value or a bare key")
    path = raw_key.split(".")
    if len(path) > MAX_DEPTH:
        raise EventLineError(f"key {raw_key[:40]!r}… nests deeper than {MAX_DEPTH} levels")
    for part in path:
        if not _KEY.fullmatch(part):
            raise EventLineError(
                f"bad key {raw_key!r} in {pair!r}: each part starts with a letter or '_' "
                "and holds letters, digits, '_' or '-'"
            )
    return path


def _cli_scalar(raw: str) -> Any:
    if raw == "true":
        return True
    if raw == "false":
        return False
    if "|" in raw:
        return raw.split("|")
    if _NUMBER.fullmatch(raw):
        return float(raw) if "." in raw else int(raw)
    return raw


# Reading a line back (the inverse of format_event_line).

_UNESCAPES = {"n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-f]{4}")
_READ_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def parse_event_line(line: str) -> tuple[str, str, dict[str, Any]]:
    """`[yui] <id> <preset> key=value ...` back into (id, preset, value tree).

    The inverse of format_event_line for every value the line can carry. What the line itself
    cannot tell apart reads one way: `key=` is "" (an empty list writes the same), a list of one
    item reads as that item, a bare word that looks like a number or true/false reads as one,
    and a list item written `1,2` reads as the list [1, 2]. Raises EventLineError on a line that is
    not an event line.
    """
    words = _split_words(line)
    if len(words) < 3 or words[0] != ["[yui]"]:
        raise EventLineError(f"not an event line: {line!r}")
    element_id, preset = "".join(words[1]), "".join(words[2])
    _check_head(element_id, preset)
    tree: dict[str, Any] = {}
    for word in words[3:]:
        key, value = _read_pair(word)
        path = _key_path(key, key)
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise EventLineError(f"{key!r} runs through a value that has no fields: {line!r}")
        if isinstance(node.get(path[-1]), dict):
            raise EventLineError(f"{key!r} already holds fields: {line!r}")
        node[path[-1]] = value
    return element_id, preset, tree


def _split_words(line: str) -> list[list[str]]:
    """Words split on spaces outside quotes; each word as its raw pieces (quoted ones kept
    with their quotes) so `|` and `=` inside quotes stay text."""
    words: list[list[str]] = []
    current: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == " ":
            if current:
                words.append(current)
                current = []
            i += 1
        elif ch == '"':
            end = i + 1
            while end < len(line) and line[end] != '"':
                end += 2 if line[end] == "\\" else 1
            current.append(line[i : end + 1])
            i = end + 1
        else:
            end = i
            while end < len(line) and line[end] not in ' "':
                end += 1
            current.append(line[i:end])
            i = end
    if current:
        words.append(current)
    return words


def _read_pair(word: list[str]) -> tuple[str, Any]:
    first = word[0]
    if first.startswith('"') or "=" not in first:
        return "".join(word), True
    key, _, rest = first.partition("=")
    parts = _split_items([rest, *word[1:]])
    if len(parts) == 1:
        return key, _read_item(parts[0], in_list=False)
    return key, [_read_item(p, in_list=True) for p in parts]


def _split_items(pieces: list[str]) -> list[list[str]]:
    """Split a value's pieces on `|` outside quotes."""
    items: list[list[str]] = [[]]
    for piece in pieces:
        if piece.startswith('"'):
            items[-1].append(piece)
            continue
        chunks = piece.split("|")
        items[-1].append(chunks[0])
        items.extend([chunk] for chunk in chunks[1:])
    return [[p for p in item if p != ""] for item in items]


def _read_item(pieces: list[str], in_list: bool) -> Any:
    if len(pieces) == 1 and pieces[0].startswith('"'):
        return _unquote(pieces[0])
    if any(p.startswith('"') for p in pieces):
        return "".join(_unquote(p) if p.startswith('"') else p for p in pieces)
    text = "".join(pieces)
    if in_list and "," in text:
        return [_read_scalar(p) for p in text.split(",")]
    return _read_scalar(text)


def _read_scalar(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    if _READ_NUMBER.fullmatch(text):
        try:
            number = float(text)
            return int(text) if _NUMBER.fullmatch(text) and "." not in text else number
        except ValueError:  # more digits than Python reads as a number: keep the words
            return text
    return text


def _unquote(piece: str) -> str:
    body = piece[1:-1] if len(piece) >= 2 and piece.endswith('"') else piece[1:]
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and body[i + 1 : i + 2] == "u" and _HEX4.fullmatch(body[i + 2 : i + 6]):
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        elif body[i] == "\\" and i + 1 < len(body):
            out.append(_UNESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)
