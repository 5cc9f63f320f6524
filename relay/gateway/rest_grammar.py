"""PostgREST's query-string grammar, parsed into a small AST (`rest_ast`); no SQL here.

Everything a client can put in the URL (select lists with embedded resources, filters, logic
trees, order, paging, and the same per embed as `name.limit`) and in the `Prefer` and `Accept`
headers is checked here, so the SQL builder only ever sees names and values it can quote and bind.
Refusals are PostgREST's: PGRST100 for the query string, PGRST108 for a filter on an embed the
select doesn't have, PGRST123 for aggregates, PGRST107 for Accept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from relay.gateway.rest_ast import (
    Column,
    Condition,
    Embed,
    Field,
    Filter,
    JsonStep,
    Logic,
    OrderTerm,
    Path,
    Preferences,
    Query,
    SelectItem,
    Shaping,
    Star,
)
from relay.gateway.rest_cursor import Cursor
from relay.gateway.rest_http import ApiError, body_error, grammar_error

__all__ = [
    "Column",
    "Embed",
    "Field",
    "Filter",
    "JsonStep",
    "Logic",
    "OrderTerm",
    "Preferences",
    "Query",
    "Star",
]

# Operators whose value is one literal; `in` and `is` have their own value grammar.
SCALAR_OPERATORS = frozenset(
    (
        "eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "match", "imatch", "cs", "cd",
        "ov", "isdistinct", "sl", "sr", "nxl", "nxr", "adj", "fts", "plfts", "phfts", "wfts",
    )
)  # fmt: skip
TEXT_SEARCH = frozenset({"fts", "plfts", "phfts", "wfts"})  # these take `(config)`
QUANTIFIABLE = frozenset({"eq", "gt", "gte", "lt", "lte", "like", "ilike", "match", "imatch"})
IS_VALUES = frozenset({"null", "true", "false", "unknown"})
RESERVED = frozenset({"select", "order", "limit", "offset", "columns", "on_conflict"})
LOGIC_KEYS = frozenset({"and", "or", "not.and", "not.or"})
AGGREGATES = frozenset({"count", "sum", "avg", "max", "min"})
_OPERATOR = re.compile(r"([a-z]+)(?:\(([^()]*)\))?")
_CAST = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COUNT = re.compile(r"\d{1,18}")  # fits a bigint
_PATH_STEP = re.compile(r'([^."]+)\.(?=.)')  # `name.` before the rest of a key
_MAX_DEPTH = 32  # how deep a logic tree, or a tree of embeds, may nest
# Pseudo-types name no values: a cast to one is meaningless (and `unknown` crashes Postgres).
_PSEUDO_TYPES = frozenset(
    (
        "any", "anyarray", "anycompatible", "anycompatiblearray", "anycompatiblemultirange",
        "anycompatiblenonarray", "anycompatiblerange", "anyelement", "anyenum", "anymultirange",
        "anynonarray", "anyrange", "cstring", "event_trigger", "fdw_handler", "index_am_handler",
        "internal", "language_handler", "opaque", "pg_ddl_command", "record", "table_am_handler",
        "trigger", "tsm_handler", "unknown", "void",
    )
)  # fmt: skip


def _aggregates_refused() -> ApiError:
    """Aggregates are off, as on a hosted project by default (`db-aggregates-enabled`)."""
    return ApiError(400, "PGRST123", "Use of aggregate functions is not allowed")


def _operator(cursor: Cursor, text: str) -> tuple[str, str | None, str | None]:
    """`eq`, `like(any)`, `fts(english)`: the operator, its quantifier and its configuration."""
    match = _OPERATOR.fullmatch(text)
    if match is None or match[1] not in SCALAR_OPERATORS | {"in", "is"}:
        cursor.fail(f"unknown operator {text!r}")
    operator, argument = match[1], match[2]
    if argument is None:
        return operator, None, None
    if operator in TEXT_SEARCH and argument:
        return operator, None, argument
    if operator in QUANTIFIABLE and argument in ("any", "all"):
        return operator, argument, None
    cursor.fail(f"unknown operator {text!r}")


def _operation(cursor: Cursor, in_tree: bool, field: Field) -> Filter:
    """`[not.]op.value` after a field; inside a logic tree a value ends at `,` or `)`."""
    negated = cursor.take("not.")
    text = cursor.until(".")
    if cursor.at_end():
        cursor.fail("expected <operator>.<value>, as in eq.5")
    cursor.expect(".")
    operator, quantifier, config = _operator(cursor, text)
    if operator == "in":
        return Filter(field, operator, cursor.in_list(), negated)
    if operator == "is":
        word = cursor.until(",)") if in_tree else cursor.rest()
        if word.lower() not in IS_VALUES:
            cursor.fail(f"is takes null, true, false or unknown, not {word!r}")
        return Filter(field, operator, word.lower(), negated)
    if not in_tree:
        value = cursor.rest()
    elif cursor.peek() == '"':
        value = cursor.quoted()
    elif cursor.peek() in ("[", "{"):
        value = cursor.bracketed()
    else:
        value = cursor.until(",)")
    if operator in ("like", "ilike"):
        value = value.replace("*", "%")
    return Filter(field, operator, value, negated, config, quantifier)


def parse_filter(key: str, value: str) -> Filter:
    """`meta->>req=eq.x`, `id=in.(a,b)`, `meta->mentioned=not.is.null`, `body=fts(english).cat`."""
    shown = f"{key}={value}"
    field_cursor = Cursor("filter", key, shown)
    field = field_cursor.field()
    field_cursor.refuse_embedding()
    if not field_cursor.at_end():
        field_cursor.fail(f"unexpected {field_cursor.peek()!r} in the column")
    cursor = Cursor("filter", value, shown)
    condition = _operation(cursor, in_tree=False, field=field)
    if not cursor.at_end():
        cursor.fail("unexpected text after the in list")
    return condition


def _logic_body(cursor: Cursor, operator: str, negated: bool, depth: int = 1) -> Logic:
    if depth > _MAX_DEPTH:
        cursor.fail(f"logic trees nest at most {_MAX_DEPTH} deep")
    cursor.expect("(")
    conditions: list[Condition] = []
    while True:
        conditions.append(_tree_condition(cursor, depth))
        if cursor.take(")"):
            return Logic(operator, tuple(conditions), negated)
        cursor.expect(",")


def _tree_condition(cursor: Cursor, depth: int) -> Condition:
    """One member of a logic tree: a nested `[not.]and(...)`/`[not.]or(...)` or `field.op.value`."""
    for negated, prefix in ((True, "not."), (False, "")):
        for operator in ("and", "or"):
            if cursor.take(f"{prefix}{operator}("):
                cursor.pos -= 1
                return _logic_body(cursor, operator, negated, depth + 1)
    field = cursor.field()
    cursor.refuse_embedding()
    cursor.expect(".")
    return _operation(cursor, in_tree=True, field=field)


def parse_logic(key: str, value: str) -> Logic:
    """`or=(a.eq.1,and(b.gt.2,c.is.null))`, `not.and=(...)`."""
    cursor = Cursor("logic tree", value, f"{key}={value}")
    negated = key.startswith("not.")
    tree = _logic_body(cursor, key.removeprefix("not."), negated)
    if not cursor.at_end():
        cursor.fail("unexpected text after the closing parenthesis")
    return tree


def parse_select(value: str) -> tuple[SelectItem, ...]:
    """`*`, `id,body`, `alias:col`, `meta->turn`, `meta->>req`, `col::text`, and embedded
    resources: `yui_agents(name)`, `agent:yui_agents!agent_id!inner(name,yui_users(*))`."""
    cursor = Cursor("select", value)
    if not value.strip():
        return ()
    items = _select_list(cursor, depth=0)
    if not cursor.at_end():
        cursor.fail(f"unexpected {cursor.peek()!r}")
    return items


def _select_list(cursor: Cursor, depth: int) -> tuple[SelectItem, ...]:
    """Items up to the end of the text, or up to the `)` that closes an embed."""
    items: list[SelectItem] = []
    if cursor.peek() == ")":  # `name()`: an embed that only filters
        return ()
    while True:
        while cursor.take(" "):
            pass
        items.append(_select_item(cursor, depth))
        if cursor.at_end() or cursor.peek() == ")":
            return tuple(items)
        if not cursor.take(","):
            cursor.fail(f"unexpected {cursor.peek()!r}")


def _select_item(cursor: Cursor, depth: int) -> SelectItem:
    if cursor.take("*"):
        return Star()
    if cursor.text.startswith("...", cursor.pos):
        cursor.fail("spreading an embedded resource (...) is not supported")
    start = cursor.pos
    alias: str | None = None
    name, _ = cursor.name()
    if cursor.peek() == ":" and not cursor.text.startswith("::", cursor.pos):
        cursor.pos += 1
        alias, start = name, cursor.pos
        name, _ = cursor.name()
    if cursor.peek() in ("(", "!"):
        if name in AGGREGATES and cursor.text.startswith("()", cursor.pos):
            raise _aggregates_refused()
        return _embed(cursor, name, alias, depth + 1)
    cursor.pos = start
    return _select_column(cursor, alias)


def _embed(cursor: Cursor, target: str, alias: str | None, depth: int) -> Embed:
    """After `[alias:]target`: `[!hint][!inner|!left](select list)`."""
    if depth > _MAX_DEPTH:
        cursor.fail(f"embedded resources nest at most {_MAX_DEPTH} deep")
    hint: str | None = None
    inner = False
    while cursor.take("!"):
        word, _ = cursor.name()
        if word in ("inner", "left"):
            inner = word == "inner"
        elif hint is None:
            hint = word
        else:
            cursor.fail(f"{target} has two hints, {hint!r} and {word!r}")
    cursor.expect("(")
    select = _select_list(cursor, depth)
    cursor.expect(")")
    return Embed(target, select, alias, hint, inner)


def _select_column(cursor: Cursor, alias: str | None) -> Column:
    field = cursor.field()
    cast: str | None = None
    if cursor.take("::"):
        cast = cursor.until(",()!")
        if not _CAST.fullmatch(cast):
            cursor.fail(f"{cast!r} is not a type name")
        if cast.lower() in _PSEUDO_TYPES:
            cursor.fail(f"{cast!r} is a pseudo-type: nothing can be cast to it")
    if cursor.peek() == ".":
        function = cursor.text[cursor.pos + 1 :].split("(")[0]
        if function in AGGREGATES and cursor.text.startswith("()", cursor.pos + 1 + len(function)):
            raise _aggregates_refused()
    cursor.refuse_embedding()
    return Column(field, alias, cast.lower() if cast else None)


def parse_order(value: str) -> tuple[OrderTerm, ...]:
    """`created_at.asc,id.desc.nullslast,meta->>n.desc`."""
    cursor = Cursor("order", value)
    terms: list[OrderTerm] = []
    while True:
        field = cursor.field()
        cursor.refuse_embedding()
        descending, nulls = False, None
        modifiers = cursor.until(",")[1:].split(".") if cursor.peek() == "." else []
        for position, modifier in enumerate(modifiers):
            if modifier in ("asc", "desc") and position == 0:
                descending = modifier == "desc"
            elif modifier in ("nullsfirst", "nullslast") and nulls is None:
                nulls = modifier.removeprefix("nulls")
            else:
                cursor.fail(f"unknown order modifier {modifier!r}")
        if cursor.peek() not in ("", ","):
            cursor.fail(f"unexpected {cursor.peek()!r}")
        terms.append(OrderTerm(field, descending, nulls))
        if not cursor.take(","):
            return tuple(terms)


def parse_names(what: str, value: str) -> tuple[str, ...]:
    """A comma-separated list of plain column names (`columns=`, `on_conflict=`)."""
    cursor = Cursor(what, value)
    names: list[str] = []
    while True:
        names.append(cursor.name()[0])
        if cursor.at_end():
            return tuple(names)
        cursor.expect(",")


def _count(what: str, value: str) -> int:
    if not _COUNT.fullmatch(value):
        raise grammar_error(what, value, "expected a non-negative integer of at most 18 digits")
    return int(value)


def split_key(key: str) -> tuple[Path, str]:
    """`yui_agents.yui_users.name` → (("yui_agents", "yui_users"), "name"). A step is a plain
    name: a JSON path (`meta->a.b`) or a quoted name stays whole, and `x.not.or` ends in
    `not.or`."""
    path: list[str] = []
    rest = key
    while rest not in LOGIC_KEYS:
        step = _PATH_STEP.match(rest)
        if step is None or "->" in step[1]:
            break
        path.append(step[1])
        rest = rest[step.end() :]
    return tuple(path), rest


class _Shaping:
    """A `Shaping` being collected from the query string, parameter by parameter."""

    def __init__(self) -> None:
        self.conditions: list[Condition] = []
        self.order: tuple[OrderTerm, ...] = ()
        self.limit: int | None = None
        self.offset = 0

    def take(self, key: str, value: str, shown: str) -> None:
        """A parameter every level has: a filter, a logic tree, order or paging."""
        if key == "order":
            self.order = parse_order(value)
        elif key == "limit":
            self.limit = _count(shown, value)
        elif key == "offset":
            self.offset = _count(shown, value)
        elif key in LOGIC_KEYS:
            self.conditions.append(parse_logic(key, value))
        elif key in RESERVED:
            raise grammar_error(shown, value, f"{key} applies to the whole request, not an embed")
        else:
            self.conditions.append(parse_filter(key, value))

    def done(self) -> Shaping:
        return Shaping(tuple(self.conditions), self.order, self.limit, self.offset)


def embed_paths(items: Iterable[SelectItem], prefix: Path = ()) -> Iterator[Path]:
    """The path of every embed in a select list, nested ones included."""
    for item in items:
        if isinstance(item, Embed):
            path = (*prefix, item.name)
            yield path
            yield from embed_paths(item.select, path)


def parse_query(params: Iterable[tuple[str, str]]) -> Query:
    """The whole query string of a table request (or of an RPC, once its arguments are removed)."""
    select: tuple[SelectItem, ...] = (Star(),)
    top = _Shaping()
    nested: dict[Path, _Shaping] = {}
    columns = on_conflict = None
    for key, value in params:
        if "\x00" in key or "\x00" in value:
            raise grammar_error("query", key, "NUL characters are not allowed")
        path, rest = split_key(key)
        if path:
            nested.setdefault(path, _Shaping()).take(rest, value, key)
        elif key == "select":
            select = parse_select(value)
        elif key == "columns":
            columns = parse_names("columns", value)
        elif key == "on_conflict":
            on_conflict = parse_names("on_conflict", value)
        else:
            top.take(key, value, key)
    known = set(embed_paths(select))
    for path in nested:
        if path not in known:
            name = ".".join(path)
            raise ApiError(
                400,
                "PGRST108",
                f"'{name}' is not an embedded resource in this request",
                hint=f"Verify that '{name}' is included in the 'select' query parameter.",
            )
    shaping = top.done()
    return Query(
        select,
        shaping.conditions,
        shaping.order,
        shaping.limit,
        shaping.offset,
        columns,
        on_conflict,
        {path: collected.done() for path, collected in nested.items()},
    )


def parse_prefer(header: str) -> Preferences:
    """`Prefer: return=representation, count=exact`; like PostgREST, ignores unknown ones."""
    values: dict[str, str] = {}
    for token in header.split(","):
        name, _, value = token.strip().partition("=")
        values[name.strip()] = value.strip()
    returning = values.get("return", "minimal")
    resolution = values.get("resolution")
    return Preferences(
        returning=returning if returning in ("representation", "headers-only") else "minimal",
        count_exact=values.get("count") in ("exact", "planned", "estimated"),
        resolution=resolution if resolution in ("merge-duplicates", "ignore-duplicates") else None,
        missing_default=values.get("missing") == "default",
    )


_ARRAY_TYPES = frozenset(
    {"application/json", "application/*", "*/*", "application/vnd.pgrst.array+json"}
)
_OBJECT_TYPES = frozenset({"application/vnd.pgrst.object+json", "application/vnd.pgrst.object"})
CSV_TYPE = "text/csv"


def _chosen_media(accept: str) -> tuple[str, bool]:
    """The first media type in `Accept` that the relay renders, and whether it asks for null
    fields to be left out (`application/vnd.pgrst.array+json;nulls=stripped`, as
    `stripNulls()` sends); 406 PGRST107 for none."""
    if not accept.strip():
        return "application/json", False
    for media_range in accept.split(","):
        media_type, *parameters = (part.strip().lower() for part in media_range.split(";"))
        pgrst = media_type.startswith("application/vnd.pgrst.")
        stripped = pgrst and "nulls=stripped" in parameters
        if media_type in _ARRAY_TYPES:
            return "application/json", stripped
        if media_type in _OBJECT_TYPES or media_type == CSV_TYPE:
            return media_type, stripped
    raise ApiError(406, "PGRST107", f"None of these media types are available: {accept}")


def wants_object(accept: str) -> bool:
    """Whether `Accept` asks for one object rather than an array (or CSV)."""
    return _chosen_media(accept)[0] in _OBJECT_TYPES


def wants_csv(accept: str) -> bool:
    """Whether `Accept` asks for the rows as CSV (`text/csv`), as `.csv()` does."""
    return _chosen_media(accept)[0] == CSV_TYPE


def strips_nulls(accept: str) -> bool:
    """Whether `Accept` asks for null fields to be left out of each row."""
    return _chosen_media(accept)[1]


def decode_json(body: bytes) -> tuple[str, object]:
    """The body as text (handed to Postgres untouched, so numbers keep their digits) and parsed."""
    try:
        text = body.decode("utf-8")
        return text, json.loads(text)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both are
        raise body_error("Empty or invalid json") from exc
    except RecursionError as exc:
        raise body_error("JSON nested too deeply") from exc
