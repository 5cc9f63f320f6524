"""What a join's `postgres_changes` ask for, and whether a change matches: event, table, filter.

The hosted publication (`supabase_realtime`) carries `yui_messages` (and `yui_chats`, a table
this relay doesn't have), so a subscription names public.yui_messages, or all of `public` (or
`*`), which here is the same thing. Events: INSERT, UPDATE, DELETE or `*`. A filter is
`column=op.value` with Realtime's operators eq, neq, lt, lte, gt, gte and in (`in.(a,b)`),
several joined by commas (all must hold), values compared as the column's type, as PostgreSQL
would. A filter reads the row its subscriber may read, never more; of a deleted row only id,
user_id and agent_id are known, so a filter on another column never matches a DELETE. `select`
narrows the record to the columns named. A refusal (ValueError) names what would be served.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from relay.gateway import realtime_limits as limits
from relay.gateway.realtime_limits import Refused

SCHEMA, TABLE = "public", "yui_messages"
OPS = ("INSERT", "UPDATE", "DELETE")
EVENTS = (*OPS, "*")
OPERATORS = ("eq", "neq", "lt", "lte", "gt", "gte", "in")
SERVED = f"only changes to {SCHEMA}.{TABLE} are published (INSERT, UPDATE, DELETE or *)"
_SPLIT = re.compile(r'"(?:[^"\\]|\\.)*"|[^,]+')  # a quoted value or a run without commas


def _when(value: Any) -> dt.datetime:
    moment = dt.datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text not in ("true", "false", "t", "f"):
        raise ValueError(text)
    return text in ("true", "t")


# PostgreSQL type → how a filter's text and a record's JSON value become comparable.
CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "uuid": lambda v: uuid.UUID(str(v)),
    "text": str,
    "varchar": str,
    "bpchar": str,
    "name": str,
    "timestamptz": _when,
    "timestamp": lambda v: dt.datetime.fromisoformat(str(v)),
    "date": lambda v: dt.date.fromisoformat(str(v)),
    "int2": int,
    "int4": int,
    "int8": int,
    "float4": lambda v: Decimal(str(v)),
    "float8": lambda v: Decimal(str(v)),
    "numeric": lambda v: Decimal(str(v)),
    "bool": _boolean,
}

TESTS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: bool(a == b),
    "neq": lambda a, b: bool(a != b),
    "lt": lambda a, b: bool(a < b),
    "lte": lambda a, b: bool(a <= b),
    "gt": lambda a, b: bool(a > b),
    "gte": lambda a, b: bool(a >= b),
    "in": lambda a, b: a in b,
}


@dataclass(frozen=True)
class Condition:
    """One `column=op.value`; a null column matches nothing, as in SQL."""

    column: str
    op: str
    value: Any  # converted; a frozenset for `in`
    convert: Callable[[Any], Any]

    def holds(self, record: dict[str, Any]) -> bool:
        found = record.get(self.column)
        if found is None:
            return False
        try:
            return TESTS[self.op](self.convert(found), self.value)
        except (ValueError, TypeError, ArithmeticError):
            return False


@dataclass(frozen=True)
class Subscription:
    """One postgres_changes entry of a join: its id, the events it hears, its conditions, the
    columns it wants (None: all), and the entry as the join's reply echoes it."""

    id: int
    ops: frozenset[str]
    conditions: tuple[Condition, ...]
    select: tuple[str, ...] | None
    echo: dict[str, Any]

    def matches(self, record: dict[str, Any]) -> bool:
        return all(c.holds(record) for c in self.conditions)

    def might_match(self, told: dict[str, Any]) -> bool:
        """Whether a row of which only `told`'s columns are known could match."""
        return all(c.holds(told) for c in self.conditions if c.column in told)


def subscriptions(config: Any, types: dict[str, str], ids: Callable[[], int]) -> list[Subscription]:
    """The postgres_changes a join's config asks for; ValueError (Refused past a bound) if any
    can't be served: better refused than silently never delivered."""
    entries = (config.get("postgres_changes") if isinstance(config, dict) else None) or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("config.postgres_changes must be a list of objects")
    if len(entries) > limits.MAX_CHANGES:
        raise Refused(f"at most {limits.MAX_CHANGES} postgres_changes per join")
    return [_subscription(entry, types, ids) for entry in entries]


def _subscription(
    entry: dict[str, Any], types: dict[str, str], ids: Callable[[], int]
) -> Subscription:
    event, schema, table = entry.get("event"), entry.get("schema"), entry.get("table")
    if event not in EVENTS:
        raise ValueError("postgres_changes event must be INSERT, UPDATE, DELETE or *")
    if schema not in (SCHEMA, "*") or table not in (None, "*", TABLE):
        raise ValueError(SERVED)
    echo = {k: entry[k] for k in ("event", "schema", "table", "filter") if entry.get(k)}
    text = entry.get("filter") or ""
    if not isinstance(text, str):
        raise ValueError("a postgres_changes filter is a string: column=operator.value")
    if (text or entry.get("select")) and not types:
        raise ValueError("not connected to PostgreSQL yet: join again in a moment")
    conditions = _conditions(text, types) if text else ()
    select = _select(entry.get("select"), types)
    ops = frozenset(OPS) if event == "*" else frozenset({event})
    return Subscription(ids(), ops, conditions, select, echo)


def _select(names: Any, types: dict[str, str]) -> tuple[str, ...] | None:
    if names is None:
        return None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError("postgres_changes select is a list of column names")
    unknown = [n for n in names if n not in types]
    if unknown:
        raise ValueError(f"no column {unknown[0]} in {SCHEMA}.{TABLE}")
    return tuple(names)


def _conditions(text: str, types: dict[str, str]) -> tuple[Condition, ...]:
    parts = _split(text)
    if len(parts) > limits.MAX_CONDITIONS:
        raise Refused(f"at most {limits.MAX_CONDITIONS} conditions in a filter")
    return tuple(_condition(part, types) for part in parts)


def _split(text: str) -> list[str]:
    """Conditions split at the commas outside `in.(…)` lists and quoted values."""
    parts, depth, start, quoted, escaped = [], 0, 0, False, False
    for at, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted:
            escaped, quoted = char == "\\", char != '"'
        elif char == '"':
            quoted = True
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "," and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    parts.append(text[start:])
    return parts


def _condition(text: str, types: dict[str, str]) -> Condition:
    column, equals, rest = text.partition("=")
    op, dot, value = rest.partition(".")
    if not equals or not dot:
        raise ValueError(f"filter {text!r}: expected column=operator.value")
    if op not in OPERATORS:
        served = ", ".join(OPERATORS)
        raise ValueError(f"filter operator {op!r} is not served (only {served})")
    if column not in types:
        raise ValueError(f"no column {column} in {SCHEMA}.{TABLE}")
    convert = CONVERTERS.get(types[column])
    if convert is None:
        raise ValueError(f"filters on {column} ({types[column]}) are not served")
    if op != "in":
        return Condition(column, op, _typed(convert, value, text, types[column]), convert)
    if not (value.startswith("(") and value.endswith(")")):
        raise ValueError(f"filter {text!r}: in takes a list, in.(a,b)")
    items = _SPLIT.findall(value[1:-1])
    if not items or len(items) > limits.MAX_IN_VALUES:
        raise Refused(f"an in filter takes 1 to {limits.MAX_IN_VALUES} values")
    wanted = frozenset(_typed(convert, item, text, types[column]) for item in items)
    return Condition(column, op, wanted, convert)


def _typed(convert: Callable[[Any], Any], value: str, text: str, kind: str) -> Any:
    try:
        return convert(_unquote(value))
    except (ValueError, ArithmeticError) as exc:
        raise ValueError(f"filter {text!r}: {_unquote(value)!r} is not a {kind}") from exc


def _unquote(value: str) -> str:
    """A value as the clients' builder writes it: quoted (with backslash escapes) when it holds
    a comma, parenthesis, quote or backslash."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def columns_of(listing: str) -> dict[str, str]:
    """The columns aggregate (`[{"name", "type"}]`) as name → type."""
    return {c["name"]: c["type"] for c in json.loads(listing)}
