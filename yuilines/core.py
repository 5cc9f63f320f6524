"""Core words: lines that are not presets (ref-specs §1.2, §1.10, §1.13, §1.16).

Each reader takes the line's id part (None when the head had no `@`) and the text after the
head, and returns the op without its screen and line; a bad line raises LineError.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from yuilines import catalogue as cat
from yuilines.props import LineError
from yuilines.tokens import ID_RE, Line, Token, join, tokenize

_STEP = re.compile(r"(\d+)/(\d+)")
_HEX = re.compile(r"#[0-9A-Fa-f]{6}")
_TONE = re.compile(r"[a-z]+|#[0-9A-Fa-f]{6}")
_COLUMN = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):([a-z]+)(?::(\S+))?")

Op = dict[str, Any]
CoreReader = Callable[[str, int], Op]


def _line(text: str, start: int) -> Line:
    return Line(tokenize(text, start)[0])


def words(tokens: list[Token]) -> str:
    """A name or label: the tokens as written, unquoted, joined by single spaces."""
    return " ".join(t.text if t.key is None else t.raw for t in tokens)


def _named(op: str) -> CoreReader:
    def read(text: str, start: int) -> Op:
        name = words(_line(text, start).tokens)
        if not name:
            raise LineError(f"{op} needs a name")
        return {"op": op, "name": name}

    return read


def clear(text: str, start: int) -> Op:
    return {"op": "clear"}


def close(text: str, start: int) -> Op:
    if _line(text, start).tokens:
        raise LineError("close takes nothing else")
    return {"op": "close"}


def talk(text: str, start: int) -> Op:
    tokens = _line(text, start).tokens
    if not tokens:
        return {"op": "talk", "props": {"on": True}}
    if len(tokens) == 1 and tokens[0].bare in ("on", "off"):
        return {"op": "talk", "props": {"on": tokens[0].bare == "on"}}
    raise LineError("talk takes only on or off")


def doing(text: str, start: int) -> Op:
    line = _line(text, start)
    if line.flags() or line.named():
        raise LineError("doing takes words and a step, no keys or flags")
    parts = list(line.tokens)
    if not parts:
        raise LineError("doing needs words or a step")
    if len(parts) == 1 and parts[0].bare == "off":
        return {"op": "doing", "props": {"off": True}}
    props: dict[str, Any] = {}
    step = _STEP.fullmatch(parts[-1].bare or "")
    if step:
        n, m = int(step.group(1)), int(step.group(2))
        if m < 1 or n > m:
            raise LineError(f"doing step {n}/{m} is past its end")
        props.update(step=n, of=m)
        parts.pop()
    text_words = join(parts)
    if text_words:
        props["text"] = text_words
    return {"op": "doing", "props": props}


def visual(text: str, start: int) -> Op:
    line = _line(text, start)
    if line.flags():
        raise LineError("visual takes no flags")
    pos = line.positionals
    keys = line.named()
    if len(pos) == 1 and pos[0].bare == "off" and not keys:
        return {"op": "visual", "props": {"off": True}}
    props: dict[str, Any] = {}
    if len(pos) > 1 or (pos and pos[0].bare not in cat.VISUAL_LOOKS):
        raise LineError("visual takes one look: " + " ".join(sorted(cat.VISUAL_LOOKS)))
    if pos:
        props["look"] = pos[0].bare
    for key, tok in keys.items():
        value = tok.text
        if tok.is_options or key not in ("tone", "react"):
            raise LineError(f"visual does not take {key}=")
        if key == "tone" and not _TONE.fullmatch(value):
            raise LineError("tone is a theme set, accent or #RRGGBB")
        if key == "react" and value not in cat.VISUAL_REACTS:
            raise LineError("react is voice, music, mic or off")
        props[key] = value
    return {"op": "visual", "props": props}


def theme(text: str, start: int) -> Op:
    line = _line(text, start)
    if line.tokens and line.tokens[0].bare == "app":
        return _theme_app(Line(line.tokens[1:]))
    props: dict[str, Any] = {}
    pos = line.positionals
    if pos:
        props["name"] = pos[0].text
    for key, tok in line.named().items():
        props[key] = tok.value()
    return {"op": "theme", "props": props}


def _theme_app(line: Line) -> Op:
    """`theme app` is strict: one set or reset, or known keys with known values."""
    if line.flags():
        raise LineError("theme app takes no flags")
    pos = line.positionals
    keys = line.named()
    props: dict[str, Any] = {"scope": "app"}
    if len(pos) > 1:
        raise LineError("theme app takes one set")
    if pos:
        name = pos[0].bare
        if name == "reset" and keys:
            raise LineError("theme app reset takes nothing else")
        if name != "reset" and name not in cat.THEME_SETS:
            raise LineError(f"unknown theme set {pos[0].text!r}")
        props["name"] = name
    elif not keys:
        raise LineError("theme app needs a set, reset or keys")
    for key, tok in keys.items():
        value = tok.text
        if key == "accent":
            ok = bool(_HEX.fullmatch(value)) or value in cat.THEME_SETS
        elif key == "bg":
            ok = bool(_HEX.fullmatch(value)) or value in cat.PAPERS
        else:
            ok = value in cat.THEME_APP_VALUES.get(key, ())
        if not ok or tok.is_options:
            raise LineError(f"theme app does not take {key}={value}")
        props[key] = value
    return {"op": "theme", "props": props}


def slug(label: str) -> str:
    """A menu item's default id: the label lowercased, other runs as `-`."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "item"


def menu(text: str, start: int) -> Op:
    tokens = _line(text, start).tokens
    if not tokens or tokens[0].bare is None:
        raise LineError("menu needs review, backlog, shortcut or done")
    section, at, item_id = tokens[0].bare.partition("@")
    rest = Line(tokens[1:])
    if section == "done":
        label = words(rest.tokens)
        if at or not label:
            raise LineError("menu done needs an id or a label, and no @id")
        one = rest.tokens[0].bare if len(rest.tokens) == 1 else None
        item = one if one and ID_RE.fullmatch(one) else slug(label)
        return {"op": "menu", "id": item, "props": {"done": True}}
    if section not in cat.MENU_BUCKETS:
        raise LineError(f"unknown menu section {section!r}")
    if at and not ID_RE.fullmatch(item_id):
        raise LineError(f"bad menu id {item_id!r}")
    label = join(rest.positionals)
    if not label:
        raise LineError("a menu item needs a label")
    props: dict[str, Any] = {"bucket": section, "label": label}
    for key, tok in rest.named().items():
        if key in cat.MENU_KEYS:
            props[key] = tok.text
    return {"op": "menu", "id": item_id if at else slug(label), "props": props}


def table_create(text: str, start: int) -> Op:
    tokens = _line(text, start).tokens
    if not tokens or tokens[0].bare is None or ":" in tokens[0].bare:
        raise LineError("table create needs a name")
    cols = []
    for tok in tokens[1:]:
        m = _COLUMN.fullmatch(tok.raw)
        if not m or m.group(2) not in cat.TABLE_TYPES:
            raise LineError(f"bad column {tok.raw!r}: write Name:text|number|date|bool")
        col = {"name": m.group(1), "type": m.group(2)}
        if m.group(3):
            if m.group(2) != "number":
                raise LineError("only number columns take a unit")
            col["unit"] = m.group(3)
        cols.append(col)
    if not cols or len(cols) > 12:
        raise LineError("a table has 1 to 12 columns")
    return {"op": "table", "name": tokens[0].bare, "cols": cols}


def put(text: str, start: int) -> Op:
    line = _line(text, start)
    pos = line.positionals
    if not pos:
        raise LineError("put needs a table")
    if len(pos) > 2:
        raise LineError("put takes one key")
    values: dict[str, Any] = {}
    delete = False
    for tok in line.tokens:
        if tok.flag == "delete":
            delete = True
        elif tok.flag is not None:
            values[tok.flag] = True
        elif tok.key is not None:
            values[tok.key] = tok.value()
    op: Op = {"op": "put", "table": pos[0].text}
    if len(pos) == 2:
        op["key"] = pos[1].text
    if delete:
        if values or len(pos) < 2:
            raise LineError("put +delete takes a key and no values")
        op.update(values={}, delete=True)
        return op
    if not values:
        raise LineError("put needs a value")
    op["values"] = values
    return op


READERS: dict[str, CoreReader] = {
    "save": _named("save"),
    "show": _named("show"),
    "forget": _named("forget"),
    "clear": clear,
    "close": close,
    "talk": talk,
    "doing": doing,
    "visual": visual,
    "theme": theme,
    "menu": menu,
    "put": put,
}
