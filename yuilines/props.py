"""What a preset's line says: positionals read per preset, keys typed (ref-specs §1.9).

Only what the line says is sent; the app fills in defaults. Keys win over positionals, and a
reader never sets a prop the line gave as a key. Readers raise LineError for a bad line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from yuilines import catalogue as cat
from yuilines.tokens import (
    NUMBER,
    Line,
    Token,
    coerce,
    duration,
    join,
    make_token,
    number,
    pieces,
    quantity,
    range_of,
    split_raw,
    timespec,
    tokenize,
)


class LineError(ValueError):
    """A line the parser reports as an `error` op; the message says why."""


Reader = Callable[[Line], dict[str, Any]]
READERS: dict[str, Reader] = {}

# Keys whose value is always a list of words (numbers stay text), per preset or everywhere.
TEXT_LISTS = frozenset(
    ["caps", "notes", "labels", "items", "frames", "points", "facts", "next", "pts"]
)
CODES = re.compile(r"[A-Z]{2,3}")
LATLON = re.compile(r"-?\d+(?:\.\d+)?,-?\d+(?:\.\d+)?")


def reader(*names: str) -> Callable[[Reader], Reader]:
    def register(func: Reader) -> Reader:
        for name in names:
            READERS[name] = func
        return func

    return register


def read(preset: str, text: str, start: int) -> dict[str, Any]:
    """The props of `preset` from the arguments in `text[start:]`."""
    if preset == "math":
        return _math(text[start:])
    if preset == "step":
        return _step(text, start)
    tokens, _ = tokenize(text, start)
    return READERS.get(preset, _generic)(Line(tokens))


def text_list(tok: Token) -> list[str] | None:
    """A list of words, split on `|` even inside quotes; `key=` is no list at all."""
    items = [part for text in tok.texts() for part in text.split("|")]
    return None if items == [""] else items


def auto_list(tok: Token) -> list[Any] | None:
    items = [coerce(t, q) for t, q in tok.parts]
    return None if items == [""] else items


def base(line: Line, lists: Iterable[str] = (), texts: Iterable[str] = ()) -> dict[str, Any]:
    """Flags, then keys over them; `lists` keys always lists, `texts` keys always words."""
    props: dict[str, Any] = dict.fromkeys(line.flags(), True)
    lists, texts = set(lists) | TEXT_LISTS, set(texts)
    for key, tok in line.named().items():
        if key in texts:
            props[key] = tok.text
        elif key in lists:
            value = text_list(tok)
            if value is None:
                props.pop(key, None)
            else:
                props[key] = value
        else:
            props[key] = tok.value()
    return props


def put(props: dict[str, Any], key: str, value: Any) -> None:
    """Set a positional's prop unless the line gave it as a key (or it is empty)."""
    if value not in (None, "", []) and key not in props:
        props[key] = value


def is_url(tok: Token) -> bool:
    return tok.bare is not None and tok.bare.startswith(cat.URL_PREFIXES)


def first_word(tokens: list[Token], test: Callable[[str], bool]) -> Token | None:
    """The first bare single-piece token whose text passes `test`."""
    for tok in tokens:
        if tok.bare is not None and test(tok.bare):
            return tok
    return None


def others(tokens: list[Token], *skip: Token | None) -> list[Token]:
    return [t for t in tokens if all(t is not s for s in skip)]


def _generic(line: Line) -> dict[str, Any]:
    props = base(line)
    put(props, "title", join(line.positionals))
    return props


@reader("say")
def _say(line: Line) -> dict[str, Any]:
    props = base(line)
    props.setdefault("text", join(line.positionals))
    return props


@reader("timer")
def _timer(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    spec_tok = next((t for t in pos if t.bare is not None and timespec(t.bare)), None)
    if spec_tok is not None:
        for key, value in (timespec(spec_tok.bare or "") or {}).items():
            put(props, key, value)
    put(props, "label", join(others(pos, spec_tok)))
    return props


@reader("ask", "choose", "pick")
def _question(line: Line) -> dict[str, Any]:
    props = base(line, lists=("options",), texts=("q", "why"))
    answer = line.named().get("answer")
    if answer is not None:
        props["answer"] = answer.text
    pos = line.positionals
    opts = next((t for t in pos if t.is_options), None)
    if opts is not None:
        options, words = opts.texts(), others(pos, opts)
    else:
        run = 0
        while run < len(pos) and pos[len(pos) - 1 - run].quoted:
            run += 1
        if run == len(pos):
            run -= 1
        options, words = [], pos
        if run >= 2:
            options, words = [t.text for t in pos[-run:]], pos[:-run]
    put(props, "options", options)
    put(props, "q", join(words))
    return props


@reader("pick")
def _pick(line: Line) -> dict[str, Any]:
    props = _question(line)
    answer = line.named().get("answer")
    if answer is not None:
        props["answer"] = answer.texts()
    return props


@reader("slide")
def _slide(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    rng = first_word(pos, lambda t: range_of(t) is not None)
    ends = next((t for t in pos if t.is_options and len(t.parts) == 2), None)
    if rng is not None:
        low, high = range_of(rng.bare or "") or (None, None)
        put(props, "min", low)
        put(props, "max", high)
    if ends is not None:
        put(props, "lo", ends.parts[0][0])
        put(props, "hi", ends.parts[1][0])
    put(props, "label", join(others(pos, rng, ends)))
    return props


FIELD_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _field(tok: Token) -> dict[str, Any] | None:
    """A form field from its raw token, or None when the token is title text."""
    raw = tok.raw
    if raw.startswith('"'):
        end = raw.find('"', 1)
        if end < 0 or end + 1 >= len(raw) or raw[end + 1] != ":":
            return None
        label, rest = raw[1:end], raw[end + 1 :]
        field: dict[str, Any] = {"key": re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")}
        field["label"] = label
    else:
        m = FIELD_KEY.match(raw)
        if not m:
            return None
        field, rest = {"key": m.group(0)}, raw[m.end() :]
    required = rest.endswith("!")
    if required:
        rest = rest[:-1]
    if rest:
        if not rest.startswith(":") or len(rest) == 1:
            return None
        spec = Token(pieces(rest[1:]))
        rng = range_of(spec.text) if not spec.is_options else None
        if spec.is_options:
            field.update(type="choice", options=spec.texts())
        elif rng is not None:
            field.update(type="range", min=rng[0], max=rng[1])
        else:
            field["type"] = spec.text
    if required:
        field["required"] = True
    return field


@reader("form")
def _form(line: Line) -> dict[str, Any]:
    props = base(line)
    fields, title = [], []
    for tok in line.positionals:
        field = _field(tok)
        if field is None:
            title.append(tok)
        else:
            fields.append(field)
    put(props, "fields", fields)
    put(props, "title", join(title))
    return props


@reader("list")
def _list(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    if pos and pos[0].bare is not None:
        put(props, "title", pos[0].bare)
        pos = pos[1:]
    put(props, "items", [text for tok in pos for text in tok.texts()])
    return props


@reader("table")
def _table(line: Line) -> dict[str, Any]:
    props = base(line, lists=("cols", "units"))
    pos = line.positionals
    head = next((i for i, t in enumerate(pos) if t.is_options), None)
    if head is None:
        put(props, "name", join(pos))
        return props
    put(props, "name", join(pos[:head]))
    put(props, "cols", pos[head].texts())
    rows = [[coerce(cell, False) for cell in tok.text.split("|")] for tok in pos[head + 1 :]]
    put(props, "rows", rows)
    return props


@reader("card", "project")
def _card(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    if pos:
        put(props, "title", pos[0].text)
        put(props, "body", join(pos[1:]))
    return props


@reader("image", "video")
def _image(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    src = next((t for t in pos if is_url(t)), None)
    words = join(others(pos, src))
    if src is not None:
        put(props, "src", src.bare)
        put(props, "caption", words)
    else:
        put(props, "prompt", words)
    return props


def _media_items(pos: list[Token], item_key: str, cap_key: str, props: dict[str, Any]) -> None:
    """URL tokens (a caption after the first `|`) become items; other text is the title."""
    items: list[str] = []
    caps: list[str] = []
    words: list[Token] = []
    for tok in pos:
        text = tok.text
        if text.startswith(cat.URL_PREFIXES):
            url, _, cap = text.partition("|")
            items.append(url)
            caps.append(cap)
        else:
            words.append(tok)
    put(props, "title", join(words))
    put(props, item_key, items)
    if any(caps):
        put(props, cap_key, caps)


@reader("gallery")
def _gallery(line: Line) -> dict[str, Any]:
    props = base(line)
    _media_items(line.positionals, "items", "caps", props)
    return props


@reader("storyboard")
def _storyboard(line: Line) -> dict[str, Any]:
    props = base(line)
    _media_items(line.positionals, "frames", "notes", props)
    return props


@reader("compare")
def _compare(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    urls = [t for t in pos if is_url(t)][:2]
    for key, tok in zip(("before", "after"), urls, strict=False):
        put(props, key, tok.bare)
    put(props, "title", join(others(pos, *urls)))
    if "hl" in props:
        boxes = []
        for box in str(line.named()["hl"].text).split("|"):
            cells = box.split(",")
            if len(cells) == 4 and all(NUMBER.fullmatch(c) for c in cells):
                boxes.append([number(c) for c in cells])
        if boxes:
            props["hl"] = boxes
        else:
            del props["hl"]
    return props


@reader("page")
def _page(line: Line) -> dict[str, Any]:
    props = base(line, texts=("notes", "body"))
    pos = line.positionals
    img = next((t for t in pos if is_url(t)), None)
    if img is not None:
        put(props, "img", img.bare)
    words = others(pos, img)
    if words:
        put(props, "title", words[0].text)
        put(props, "body", join(words[1:]))
    return props


@reader("done", "now", "next")
def _row_kind(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    url = first_word(pos, lambda t: t.startswith(("https://", "http://")))
    if url is not None:
        put(props, "url", url.bare)
    put(props, "text", join(others(pos, url)))
    return props


@reader("row")
def _row(line: Line) -> dict[str, Any]:
    props = base(line)
    put(props, "text", join(line.positionals))
    return props


@reader("after")
def _after(line: Line) -> dict[str, Any]:
    props = base(line)
    put(props, "label", join(line.positionals))
    return props


def _kind_first(line: Line, text_key: str, lists: Iterable[str] = ()) -> dict[str, Any]:
    """`shape`/`part`/`game`: the first bare word starting with a letter is the kind."""
    props = base(line, lists=lists)
    pos = line.positionals
    kind = first_word(pos, lambda t: t[:1].isalpha())
    if kind is not None:
        put(props, "kind", kind.bare)
    put(props, text_key, join(others(pos, kind)))
    return props


@reader("shape")
def _shape(line: Line) -> dict[str, Any]:
    return _kind_first(line, "label", lists=("sets", "pairs"))


@reader("part")
def _part(line: Line) -> dict[str, Any]:
    return _kind_first(line, "text")


@reader("camera")
def _camera(line: Line) -> dict[str, Any]:
    props = base(line)
    pos = line.positionals
    facing = first_word(pos, lambda t: t in ("front", "back"))
    if facing is not None:
        put(props, "facing", facing.bare)
    put(props, "prompt", join(others(pos, facing)))
    return props


@reader("mic")
def _mic(line: Line) -> dict[str, Any]:
    props = base(line)
    put(props, "prompt", join(line.positionals))
    return props


def _math(rest: str) -> dict[str, Any]:
    """`math`: leading caption=/size= are props, the rest of the line is TeX as written."""
    props: dict[str, Any] = {}
    tex = rest.strip()
    for raw, offset in split_raw(rest):
        tok = make_token(raw)
        if tok.key not in ("caption", "size"):
            tex = rest[offset:].strip()
            break
        props[tok.key] = tok.text
        tex = rest[offset + len(raw) :].strip()
    if len(tex) >= 2 and tex[0] == '"' and tex[-1] == '"':
        tex = tex[1:-1]
    put(props, "tex", tex)
    return props


def _step(text: str, start: int) -> dict[str, Any]:
    """`step`: words, a URL picture, and TeX after a lone `$`."""
    tokens: list[Token] = []
    tex = ""
    for raw, offset in split_raw(text, start):
        if raw == "$":
            tex = text[offset + 1 :].strip()
            break
        if raw == "#":
            break
        tokens.append(make_token(raw, offset))
    line = Line(tokens)
    props = base(line)
    if "time" in line.named():
        seconds = duration(line.named()["time"].text)
        if seconds is not None:
            props["time"] = seconds
    pos = line.positionals
    img = next((t for t in pos if is_url(t)), None)
    if img is not None:
        put(props, "img", img.bare)
    put(props, "text", join(others(pos, img)))
    put(props, "tex", tex)
    return props


def quantity_token(tok: Token) -> tuple[int | float, str | None] | None:
    return quantity(tok.bare) if tok.bare is not None else None
