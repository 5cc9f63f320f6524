"""The REST grammar's AST: what a query string and the `Prefer` header ask for, as plain values.

`rest_grammar` builds it and `rest_sql` (with `rest_embed` for embedded resources) turns it into
SQL; neither ever sees the client's text again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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


@dataclass(frozen=True)
class Embed:
    """`alias:target!hint!inner(select)`: the rows of another table that a foreign key joins to
    each row, rendered as an object (to-one) or an array (to-many) under `name`."""

    target: str
    select: tuple[SelectItem, ...]
    alias: str | None = None
    hint: str | None = None  # a foreign key's name, or its column, when several join the two
    inner: bool = False  # `!inner`: a row without any embedded row is left out

    @property
    def name(self) -> str:
        return self.alias or self.target


SelectItem = Star | Column | Embed


@dataclass(frozen=True)
class Filter:
    field: Field
    operator: str
    value: str | tuple[str, ...]  # a tuple for `in`; `like` values already use `%`
    negated: bool = False
    config: str | None = None  # the text search configuration of `fts(english)` and its kin
    quantifier: str | None = None  # "any" | "all": `like(any).{a*,b*}` matches one or all


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
class Shaping:
    """What `name.order`, `name.limit`, `name.offset` and `name.col=…` ask of an embed's rows."""

    conditions: tuple[Condition, ...] = ()
    order: tuple[OrderTerm, ...] = ()
    limit: int | None = None
    offset: int = 0


Path = tuple[str, ...]  # the names of nested embeds, outermost first


@dataclass(frozen=True)
class Query:
    select: tuple[SelectItem, ...] = (Star(),)
    conditions: tuple[Condition, ...] = ()
    order: tuple[OrderTerm, ...] = ()
    limit: int | None = None
    offset: int = 0
    columns: tuple[str, ...] | None = None
    on_conflict: tuple[str, ...] | None = None
    nested: Mapping[Path, Shaping] = field(default_factory=dict)

    @property
    def shapes_rows(self) -> bool:
        """Whether anything beyond the bare rows was asked for: filters, order, paging, select."""
        return bool(
            self.conditions
            or self.order
            or self.limit is not None
            or self.offset
            or self.select != (Star(),)
            or self.nested
        )


@dataclass(frozen=True)
class Preferences:
    returning: str = "minimal"  # "minimal" | "representation" | "headers-only"
    # `count=exact`, `planned` or `estimated`: all three are counted exactly, since a planner's
    # estimate counts rows the caller may not read.
    count_exact: bool = False
    resolution: str | None = None  # "merge-duplicates" | "ignore-duplicates"
    missing_default: bool = False  # `missing=default`: a key left out takes the column default
