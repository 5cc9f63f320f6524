"""PostgREST's query-string grammar, parsed into a small AST; no SQL here.

Everything a client can put in the URL (select lists, filters, logic trees, order, paging) and in
the `Prefer` and `Accept` headers is checked here, so the SQL builder only ever sees names and
values it can quote and bind. Refusals are PostgREST's: PGRST100 for the query string, PGRST107
for Accept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn

from relay.gateway.rest_http import ApiError, body_error, grammar_error


@dataclass(frozen=True)
class JsonStep:
    arrow: str  # "->" keeps JSON, "->>" yields text
    key: str | int  # an int indexes an array


@dataclass(frozen=True)
class Field:
    column: str
    path: tuple[JsonStep, ...] = ()

    @property
    def output_name(self) -> str:
        """PostgREST names `meta->a->0` after its last key (`a`), a plain column after itself."""
        keys = [step.key for step in self.path if isinstance(step.key, str)]
        return keys[-1] if keys else self.column


@dataclass(frozen=True)
class Star:
    """`*`: every column the role may read."""


@dataclass(frozen=True)
class Column:
    field: Field
    alias: str | None = None
    cast: str | None = None

    @property
    def output_name(self) -> str:
        return self.alias or self.field.output_name


SelectItem = Star | Column


@dataclass(frozen=True)
class Filter:
    field: Field
    operator: str
    value: str | tuple[str, ...]  # a tuple for `in`; `like` values already use `%`
    negated: bool = False


@dataclass(frozen=True)
class Logic:
    operator: str  # "and" | "or"
    conditions: tuple[Condition, ...]
    negated: bool = False


Condition = Filter | Logic


@dataclass(frozen=True)
class OrderTerm:
    field: Field
    descending: bool = False
    nulls: str | None = None  # "first" | "last"


@dataclass(frozen=True)
class Query:
    select: tuple[SelectItem, ...] = (Star(),)
    conditions: tuple[Condition, ...] = ()
    order: tuple[OrderTerm, ...] = ()
    limit: int | None = None
    offset: int = 0
    columns: tuple[str, ...] | None = None
    on_conflict: tuple[str, ...] | None = None

    @property
    def shapes_rows(self) -> bool:
        """Whether anything beyond the bare rows was asked for: filters, order, paging, select."""
        return bool(
            self.conditions
            or self.order
            or self.limit is not None
            or self.offset
            or self.select != (Star(),)
        )


@dataclass(frozen=True)
class Preferences:
    returning: str = "minimal"  # "minimal" | "representation" | "headers-only"
    count_exact: bool = False
    resolution: str | None = None  # "merge-duplicates" | "ignore-duplicates"


# Operators whose value is one literal; `in` and `is` have their own value grammar.
SCALAR_OPERATORS = frozenset(
    {
        "eq",
        "neq",
        "gt",
        "gte",
        "lt",
        "lte",
        "like",
        "ilike",
        "match",
        "imatch",
        "cs",
        "cd",
        "ov",
        "isdistinct",
    }
)
IS_VALUES = frozenset({"null", "true", "false", "unknown"})
RESERVED = frozenset({"select", "order", "limit", "offset", "columns", "on_conflict"})
LOGIC_KEYS = frozenset({"and", "or", "not.and", "not.or"})
_INDEX = re.compile(r"-?\d{1,9}")  # an array index: JSON arrays are never longer
_CAST = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COUNT = re.compile(r"\d{1,18}")  # fits a bigint
_MAX_DEPTH = 32  # how deep a logic tree may nest
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


class _Cursor:
    """A position in one parameter's text; every failure names the parameter and the problem."""

    def __init__(self, what: str, text: str, shown: str | None = None) -> None:
        self.what = what
        self.text = text
        self.shown = text if shown is None else shown  # what the error message quotes
        self.pos = 0

    def fail(self, problem: str) -> NoReturn:
        raise grammar_error(self.what, self.shown, problem)

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self, token: str) -> bool:
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.take(token):
            found = repr(self.peek()) if not self.at_end() else "the end"
            self.fail(f"expected {token!r} but found {found}")

    def _name_char(self, index: int) -> bool:
        char = self.text[index]
        if char == "-":  # part of a name unless it starts an arrow
            return not self.text.startswith("->", index)
        return char.isalnum() or char in "_ $"

    def name(self) -> tuple[str, bool]:
        """A bare name (letters, digits, `_`, `$`, spaces, `-`) or a double-quoted one."""
        if self.peek() == '"':
            return self.quoted(), True
        start = self.pos
        while not self.at_end() and self._name_char(self.pos):
            self.pos += 1
        name = self.text[start : self.pos].strip()
        if not name:
            found = repr(self.peek()) if not self.at_end() else "the end"
            self.fail(f"expected a name but found {found}")
        return name, False

    def quoted(self) -> str:
        """A double-quoted string; a backslash escapes the next character."""
        self.expect('"')
        chars: list[str] = []
        while not self.at_end():
            char = self.text[self.pos]
            self.pos += 1
            if char == '"':
                return "".join(chars)
            if char == "\\" and not self.at_end():
                char = self.text[self.pos]
                self.pos += 1
            chars.append(char)
        self.fail("unterminated quoted string")

    def field(self) -> Field:
        """A column, optionally followed by a JSON path (`meta->turn`, `meta->a->>b`, `meta->0`)."""
        column, _ = self.name()
        steps: list[JsonStep] = []
        while self.text.startswith("->", self.pos):
            if steps and steps[-1].arrow == "->>":
                self.fail("->> must be the last step of a JSON path")
            arrow = "->>" if self.text.startswith("->>", self.pos) else "->"
            self.pos += len(arrow)
            key, quoted = self.name()
            if not quoted and re.fullmatch(r"-?\d+", key) and not _INDEX.fullmatch(key):
                self.fail(f"the array index {key[:12]}… is too large")
            index = not quoted and _INDEX.fullmatch(key)
            steps.append(JsonStep(arrow, int(key) if index else key))
        return Field(column, tuple(steps))

    def refuse_embedding(self) -> None:
        """Embedded resources, spreads and aggregates need PostgREST's schema cache: refused."""
        if self.peek() in ("(", "!"):
            self.fail("embedded resources and aggregates are not supported")

    def bracketed(self) -> str:
        """A `{...}` or `[...]` value taken whole, so commas inside it don't split a logic tree."""
        start, depth, in_string = self.pos, 0, False
        while not self.at_end():
            char = self.text[self.pos]
            self.pos += 1
            if in_string:
                if char == "\\":
                    self.pos += 1
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
                if depth == 0:
                    return self.text[start : self.pos]
        self.fail("unbalanced brackets in value")

    def rest(self) -> str:
        start, self.pos = self.pos, len(self.text)
        return self.text[start:]

    def until(self, stops: str) -> str:
        start = self.pos
        while not self.at_end() and self.text[self.pos] not in stops:
            self.pos += 1
        return self.text[start : self.pos]

    def in_list(self) -> tuple[str, ...]:
        """`(a,b,"c,d")`: quoted items may hold commas and parentheses."""
        if not self.take("("):
            self.fail("an in list must be enclosed in parentheses, as in in.(a,b)")
        items: list[str] = []
        if self.take(")"):
            return ()
        while True:
            if self.peek() == '"':
                items.append(self.quoted())
            else:
                items.append(self.until(",)"))
            if self.take(")"):
                return tuple(items)
            if not self.take(","):
                self.fail("malformed in list: expected ',' or ')' after an item")


def _operation(cursor: _Cursor, in_tree: bool) -> tuple[str, str | tuple[str, ...], bool]:
    """`[not.]op.value` after a field; inside a logic tree a value ends at `,` or `)`."""
    negated = cursor.take("not.")
    operator = cursor.until(".")
    if cursor.at_end():
        cursor.fail("expected <operator>.<value>, as in eq.5")
    cursor.expect(".")
    if operator == "in":
        return operator, cursor.in_list(), negated
    if operator == "is":
        word = cursor.until(",)") if in_tree else cursor.rest()
        if word.lower() not in IS_VALUES:
            cursor.fail(f"is takes null, true, false or unknown, not {word!r}")
        return operator, word.lower(), negated
    if operator not in SCALAR_OPERATORS:
        cursor.fail(f"unknown operator {operator!r}")
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
    return operator, value, negated


def parse_filter(key: str, value: str) -> Filter:
    """`meta->>req=eq.x`, `id=in.(a,b)`, `meta->mentioned=not.is.null`."""
    shown = f"{key}={value}"
    field_cursor = _Cursor("filter", key, shown)
    field = field_cursor.field()
    field_cursor.refuse_embedding()
    if not field_cursor.at_end():
        field_cursor.fail(f"unexpected {field_cursor.peek()!r} in the column")
    cursor = _Cursor("filter", value, shown)
    operator, operand, negated = _operation(cursor, in_tree=False)
    if not cursor.at_end():
        cursor.fail("unexpected text after the in list")
    return Filter(field, operator, operand, negated)


def _logic_body(cursor: _Cursor, operator: str, negated: bool, depth: int = 1) -> Logic:
    if depth > _MAX_DEPTH:
        cursor.fail(f"logic trees nest at most {_MAX_DEPTH} deep")
    cursor.expect("(")
    conditions: list[Condition] = []
    while True:
        conditions.append(_tree_condition(cursor, depth))
        if cursor.take(")"):
            return Logic(operator, tuple(conditions), negated)
        cursor.expect(",")


def _tree_condition(cursor: _Cursor, depth: int) -> Condition:
    """One member of a logic tree: a nested `[not.]and(...)`/`[not.]or(...)` or `field.op.value`."""
    for negated, prefix in ((True, "not."), (False, "")):
        for operator in ("and", "or"):
            if cursor.take(f"{prefix}{operator}("):
                cursor.pos -= 1
                return _logic_body(cursor, operator, negated, depth + 1)
    field = cursor.field()
    cursor.refuse_embedding()
    cursor.expect(".")
    operator, operand, negated = _operation(cursor, in_tree=True)
    return Filter(field, operator, operand, negated)


def parse_logic(key: str, value: str) -> Logic:
    """`or=(a.eq.1,and(b.gt.2,c.is.null))`, `not.and=(...)`."""
    cursor = _Cursor("logic tree", value, f"{key}={value}")
    negated = key.startswith("not.")
    tree = _logic_body(cursor, key.removeprefix("not."), negated)
    if not cursor.at_end():
        cursor.fail("unexpected text after the closing parenthesis")
    return tree


def parse_select(value: str) -> tuple[SelectItem, ...]:
    """`*`, `id,body`, `alias:col`, `meta->turn`, `meta->>req`, `col::text`; nothing embedded."""
    cursor = _Cursor("select", value)
    if not value.strip():
        return ()
    items: list[SelectItem] = []
    while True:
        while cursor.take(" "):
            pass
        if cursor.take("*"):
            items.append(Star())
        else:
            items.append(_select_column(cursor))
        cursor.refuse_embedding()
        if cursor.at_end():
            return tuple(items)
        if not cursor.take(","):
            cursor.fail(f"unexpected {cursor.peek()!r}")


def _select_column(cursor: _Cursor) -> Column:
    start = cursor.pos
    alias: str | None = None
    first, _ = cursor.name()
    if cursor.peek() == ":" and not cursor.text.startswith("::", cursor.pos):
        cursor.pos += 1
        alias = first
    else:
        cursor.pos = start
    field = cursor.field()
    cast: str | None = None
    if cursor.take("::"):
        cast = cursor.until(",(!")
        if not _CAST.fullmatch(cast):
            cursor.fail(f"{cast!r} is not a type name")
        if cast.lower() in _PSEUDO_TYPES:
            cursor.fail(f"{cast!r} is a pseudo-type: nothing can be cast to it")
    return Column(field, alias, cast.lower() if cast else None)


def parse_order(value: str) -> tuple[OrderTerm, ...]:
    """`created_at.asc,id.desc.nullslast,meta->>n.desc`."""
    cursor = _Cursor("order", value)
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
    cursor = _Cursor(what, value)
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


def parse_query(params: Iterable[tuple[str, str]]) -> Query:
    """The whole query string of a table request (or of an RPC, once its arguments are removed)."""
    select: tuple[SelectItem, ...] = (Star(),)
    conditions: list[Condition] = []
    order: tuple[OrderTerm, ...] = ()
    limit: int | None = None
    offset = 0
    columns = on_conflict = None
    for key, value in params:
        if "\x00" in key or "\x00" in value:
            raise grammar_error("query", key, "NUL characters are not allowed")
        if key == "select":
            select = parse_select(value)
        elif key == "order":
            order = parse_order(value)
        elif key == "limit":
            limit = _count("limit", value)
        elif key == "offset":
            offset = _count("offset", value)
        elif key == "columns":
            columns = parse_names("columns", value)
        elif key == "on_conflict":
            on_conflict = parse_names("on_conflict", value)
        elif key in LOGIC_KEYS:
            conditions.append(parse_logic(key, value))
        else:
            conditions.append(parse_filter(key, value))
    return Query(select, tuple(conditions), order, limit, offset, columns, on_conflict)


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
        count_exact=values.get("count") == "exact",
        resolution=resolution if resolution in ("merge-duplicates", "ignore-duplicates") else None,
    )


_ARRAY_TYPES = frozenset({"application/json", "application/*", "*/*"})
_OBJECT_TYPE = "application/vnd.pgrst.object+json"


def wants_object(accept: str) -> bool:
    """Whether `Accept` asks for one object rather than an array; 406 PGRST107 for neither."""
    if not accept.strip():
        return False
    for media_range in accept.split(","):
        media_type = media_range.split(";")[0].strip().lower()
        if media_type in _ARRAY_TYPES:
            return False
        if media_type in (_OBJECT_TYPE, "application/vnd.pgrst.object"):
            return True
    raise ApiError(406, "PGRST107", f"None of these media types are available: {accept}")


def decode_json(body: bytes) -> tuple[str, object]:
    """The body as text (handed to Postgres untouched, so numbers keep their digits) and parsed."""
    try:
        text = body.decode("utf-8")
        return text, json.loads(text)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both are
        raise body_error("Empty or invalid json") from exc
    except RecursionError as exc:
        raise body_error("JSON nested too deeply") from exc
