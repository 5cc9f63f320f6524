"""Readers for the data, music, map, game and table-query presets (ref-specs §1.9.3, §1.9.5).

Imported by the parser for its side effect: each reader registers itself in `props.READERS`.
"""

from __future__ import annotations

import re
from typing import Any

from yuilines import catalogue as cat
from yuilines.props import (
    CODES,
    LATLON,
    auto_list,
    base,
    first_word,
    others,
    put,
    quantity_token,
    reader,
)
from yuilines.tokens import NUMBER, Line, Token, coerce, join, number, quantity

_SERIES = re.compile(r"y(\d*)")
_ERRS = re.compile(r"err\d*")
_PLUS_MINUS = re.compile(r"(-?\d+(?:\.\d+)?)(?:±|\+-)(\d+(?:\.\d+)?)")
_CALC_RANGE = re.compile(r"(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)(?:@(-?\d+(?:\.\d+)?)(\D.*)?)?")
_BPM = re.compile(r"(\d+(?:\.\d+)?)(?:bpm)?")
_GRID = re.compile(r"\d+[xX]\d+")
_KEY = re.compile(r"[A-G][#b]?m?")
_ROMAN = re.compile(
    r"[b#]?(?:VII|VI|IV|V|III|II|I|vii|vi|iv|v|iii|ii|i)(?:\d|maj|min|dim|aug|sus|add|°|ø|\+)*"
)
CALC_TEXT = ("title", "f", "unit")


@reader("chart")
def _chart(line: Line) -> dict[str, Any]:
    props = base(line, lists=("names", "color"))
    keys = line.named()
    pos = line.positionals
    kind = first_word(pos, lambda t: t in cat.CHART_TYPES)
    if kind is not None:
        put(props, "type", kind.bare)
    put(props, "title", join(others(pos, kind)))
    for key, tok in keys.items():
        series = _SERIES.fullmatch(key)
        if key == "x" or _ERRS.fullmatch(key):
            _set_list(props, key, auto_list(tok))
        elif series:
            values, errs = [], []
            for text, quoted in tok.parts:
                pm = None if quoted else _PLUS_MINUS.fullmatch(text)
                values.append(number(pm.group(1)) if pm else coerce(text, quoted))
                errs.append(number(pm.group(2)) if pm else 0)
            _set_list(props, key, values if values != [""] else None)
            err_key = f"err{series.group(1)}"
            if any(errs) and err_key not in keys:
                props[err_key] = errs
    return props


def _set_list(props: dict[str, Any], key: str, value: list[Any] | None) -> None:
    if value is None:
        props.pop(key, None)
    else:
        props[key] = value


@reader("stat")
def _stat(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    value_tok = next((t for t in pos if quantity_token(t)), None)
    if value_tok is not None:
        value, unit = quantity_token(value_tok) or (None, None)
        put(props, "value", value)
        put(props, "unit", unit)
    elif pos:
        value_tok = pos[0]
        put(props, "value", value_tok.text)
    put(props, "label", join(others(pos, value_tok)))
    return props


@reader("calc")
def _calc(line: Line) -> dict[str, Any]:
    """Reserved keys are props; every other key is a variable (range or quantity)."""
    props: dict[str, Any] = dict.fromkeys(line.flags(), True)
    for key, tok in line.named().items():
        if key in CALC_TEXT:
            props[key] = tok.text
        elif key in ("plot", "digits"):
            props[key] = tok.value()
        else:
            props[key] = _variable(tok)
    put(props, "title", join(line.positionals))
    return props


def _variable(tok: Token) -> Any:
    text = tok.text
    if not tok.quoted:
        rng = _CALC_RANGE.fullmatch(text)
        if rng:
            low, high = number(rng.group(1)), number(rng.group(2))
            mid = (low + high) / 2
            var: dict[str, Any] = {"min": low, "max": high}
            var["value"] = number(rng.group(3)) if rng.group(3) else _tidy(mid)
            if rng.group(4):
                var["unit"] = rng.group(4)
            return var
        amount = quantity(text)
        if amount is not None:
            return {"value": amount[0]} | ({"unit": amount[1]} if amount[1] else {})
    return tok.value()


def _tidy(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


@reader("area")
def _area(line: Line) -> dict[str, Any]:
    props = base(line, lists=("codes",))
    codes: list[str] = []
    pts: list[str] = []
    words: list[Token] = []
    for tok in line.positionals:
        texts = tok.texts()
        if tok.quoted:
            words.append(tok)
        elif all(CODES.fullmatch(t) for t in texts):
            codes.extend(texts)
        elif tok.is_options and all(LATLON.fullmatch(t) for t in texts):
            pts.extend(texts)
        else:
            words.append(tok)
    put(props, "codes", codes)
    put(props, "pts", pts)
    put(props, "label", join(words))
    return props


@reader("pin")
def _pin(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    at = first_word(pos, lambda t: LATLON.fullmatch(t) is not None)
    if at is not None:
        put(props, "at", at.bare)
    put(props, "label", join(others(pos, at)))
    return props


@reader("route")
def _route(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    stops = next((t for t in pos if t.is_options and not t.quoted), None)
    if stops is not None:
        put(props, "pts", stops.texts())
    put(props, "label", join(others(pos, stops)))
    return props


@reader("game")
def _game(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    kind = first_word(pos, lambda t: t[:1].isalpha())
    if kind is not None:
        put(props, "kind", kind.bare)
    put(props, "title", join(others(pos, kind)))
    for key in ("x", "o"):
        tok = line.named().get(key)
        if tok is not None:
            cells = [number(t) for t in tok.texts() if NUMBER.fullmatch(t)]
            _set_list(props, key, cells or None)
    return props


def _lead_word(line: Line, key: str, test: Any, lists: tuple[str, ...] = ()) -> dict[str, Any]:
    """Music presets: one bare word read as `key`, the rest of the words are the title."""
    props = base(line, lists=lists)
    pos = line.positionals
    word = first_word(pos, test)
    if word is not None:
        bare = word.bare or ""
        bpm = _BPM.fullmatch(bare) if key == "bpm" else None
        put(props, key, number(bpm.group(1)) if bpm else bare)
    put(props, "title", join(others(pos, word)))
    return props


@reader("loop", "metronome")
def _loop(line: Line) -> dict[str, Any]:
    return _lead_word(line, "bpm", lambda t: _BPM.fullmatch(t) is not None, ("rows", "p"))


@reader("drums")
def _drums(line: Line) -> dict[str, Any]:
    return _lead_word(line, "grid", lambda t: _GRID.fullmatch(t) is not None, ("pads",))


@reader("tuner")
def _tuner(line: Line) -> dict[str, Any]:
    return _lead_word(line, "instrument", lambda t: t in cat.INSTRUMENTS, ("strings",))


@reader("keys")
def _keys(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    key = first_word(pos, lambda t: _KEY.fullmatch(t) is not None)
    scale = first_word(pos, lambda t: t in cat.SCALES)
    if key is not None:
        put(props, "key", key.bare)
    if scale is not None:
        put(props, "scale", scale.bare)
    put(props, "title", join(others(pos, key, scale)))
    return props


def _is_prog(text: str) -> bool:
    return "-" in text and all(_ROMAN.fullmatch(p) for p in text.split("-"))


@reader("chords")
def _chords(line: Line) -> dict[str, Any]:
    props = base(line, lists=("chords",))
    prog_tok = line.named().get("prog")
    if prog_tok is not None:
        props["prog"] = [p for t in prog_tok.texts() for p in t.split("-") if p]
    pos = line.positionals
    key = first_word(pos, lambda t: _KEY.fullmatch(t) is not None)
    prog = first_word(pos, _is_prog)
    names = next((t for t in pos if t.is_options), None)
    if key is not None:
        put(props, "key", key.bare)
    if prog is not None:
        put(props, "prog", (prog.bare or "").split("-"))
    if names is not None:
        put(props, "chords", names.texts())
    put(props, "title", join(others(pos, key, prog, names)))
    return props


@reader("query")
def _query(line: Line) -> dict[str, Any]:
    lists = ("where", "sort", "cols", "sum", "avg", "min", "max")
    props = base(line, lists=lists, texts=("group", "check"))
    pos = list(line.positionals)
    if pos and pos[0].bare is not None:
        put(props, "table", pos.pop(0).bare)
    for i, tok in enumerate(pos):
        view = pos[i + 1].bare if i + 1 < len(pos) else None
        if tok.bare == "as" and view in cat.QUERY_VIEWS:
            used = [tok, pos[i + 1]]
            put(props, "as", view)
            kind = pos[i + 2].bare if i + 2 < len(pos) else None
            if view == "chart" and kind in cat.CHART_TYPES:
                put(props, "type", kind)
                used.append(pos[i + 2])
            pos = others(pos, *used)
            break
    put(props, "title", join(pos))
    return props
