"""The grammar's AST as statements: reads, inserts, updates and deletes, with their embeds.

Rows come back as one JSON array built by Postgres itself (`json_agg` over a subquery), so values
render exactly as PostgREST renders them: timestamptz as ISO-8601 with its offset, jsonb as JSON;
or, for `Accept: text/csv`, as PostgREST's CSV (a header of the column names, a row per line).

Building and rendering a statement costs more Python than the rest of a request (issue 21), and
a client asks the same few shapes again and again with other values: `compiled` keeps each
shape's text, its values bound in the places `Slots` marks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import psycopg
from psycopg import sql

from relay.gateway.db import one, run
from relay.gateway.rest_ast import Column, Condition, Embed, Logic, Path, Query, Star
from relay.gateway.rest_embed import Join, Planner, join_columns
from relay.gateway.rest_expr import (
    SCHEMA,
    Params,
    ident,
    order_sql,
    paging_sql,
    table_ident,
    where_sql,
)
from relay.gateway.rest_http import ApiError, Rows

__all__ = [
    "SCHEMA",
    "Params",
    "Render",
    "Slots",
    "Statement",
    "compiled",
    "delete_statement",
    "execute",
    "fetch_rows",
    "fetch_value",
    "ident",
    "insert_statement",
    "read_statement",
    "table_ident",
    "update_statement",
]

# What every row-returning statement ends with: the rows rendered, the first one as JSON (for
# `Accept: application/vnd.pgrst.object+json`), and how many there are.
_JSON_ROWS = sql.SQL(
    "coalesce(json_agg({row}), '[]')::text, (json_agg({row}) -> 0)::text, count(*)"
)
# PostgREST's CSV: the first row's keys, then each row's record text without its parentheses.
_CSV_ROWS = sql.SQL(
    "coalesce((select string_agg(_rest_key, ',')"
    " from json_object_keys(json_agg(_rest_rows) -> 0) as _rest_key), '')"
    " || chr(10) || coalesce(string_agg(substr(_rest_rows::text, 2,"
    " length(_rest_rows::text) - 2), chr(10)), ''), null::text, count(*)"
)
_DML_ROWS = sql.Identifier("_rest_dml")
STATEMENTS_KEPT = 256  # shapes whose text is kept: a client can make any number of them
_COMPILED: OrderedDict[Hashable, tuple[sql.Composed, dict[str, object], bool]] = OrderedDict()


@dataclass(frozen=True)
class Render:
    """How rows come back: the joins of the select list's embeds (by path), as CSV or JSON."""

    joins: Mapping[Path, Join] = field(default_factory=dict)
    csv: bool = False
    strip_nulls: bool = False  # leave out null fields, nested ones too (`nulls=stripped`)

    @property
    def aggregates(self) -> sql.Composable:
        if self.csv:
            return _CSV_ROWS
        row = "json_strip_nulls(to_json(_rest_rows))" if self.strip_nulls else "_rest_rows"
        return _JSON_ROWS.format(row=sql.SQL(row))


@dataclass(frozen=True)
class Statement:
    query: sql.Composed  # what `SQL.format` and `Composed([...])` build; `execute` takes it
    params: dict[str, object]
    returns_rows: bool = True  # whether it yields `Rows` rather than a bare row count


@dataclass(frozen=True)
class Slot:
    """A request's value as its statement's shape holds it: bound in the value's place."""

    index: int


class Slots:
    """A request's values, each taken out of its query into a `Slot`, in slot order."""

    def __init__(self) -> None:
        self.values: list[object] = []

    def slot(self, value: object) -> Any:  # a Slot, standing in for a value of any type
        self.values.append(value)
        return Slot(len(self.values) - 1)

    def query(self, query: Query) -> Query | None:
        """The query's shape: each value a statement binds, a Slot. None with embeds, whose
        statements `rest_embed` builds from values too: those are built each time."""
        if query.nested or any(isinstance(item, Embed) for item in query.select):
            return None
        return replace(
            query,
            conditions=tuple(map(self._condition, query.conditions)),
            limit=None if query.limit is None else self.slot(query.limit),
            offset=self.slot(query.offset) if query.offset else 0,
        )

    @staticmethod
    def key(shape: Query) -> tuple[object, ...]:
        """A shape's fields, hashable: all but `nested`, which a shape has empty."""
        return tuple(getattr(shape, f.name) for f in fields(shape) if f.name != "nested")

    def _condition(self, condition: Condition) -> Condition:
        if isinstance(condition, Logic):
            return replace(condition, conditions=tuple(map(self._condition, condition.conditions)))
        if condition.operator == "is":  # a keyword of the statement's text, not a value
            value = condition.value
        elif condition.operator == "in":
            value = tuple(self.slot(item) for item in condition.value)
        else:
            value = self.slot(condition.value)
        config = None if condition.config is None else self.slot(condition.config)
        return replace(condition, value=value, config=config)


def compiled(
    conn: psycopg.AsyncConnection,
    key: Hashable,
    values: list[object],
    build: Callable[[], Statement],
) -> Statement:
    """The statement of the shape `key` names, with `values` bound in its slots: built (from
    a query of Slots) and rendered on its first use; the STATEMENTS_KEPT shapes used last kept."""
    found = _COMPILED.get(key)
    if found is None:
        statement = build()
        text = sql.Composed([sql.SQL(statement.query.as_string(conn))])  # rendered: one piece
        found = _COMPILED[key] = (text, statement.params, statement.returns_rows)
        if len(_COMPILED) > STATEMENTS_KEPT:
            _COMPILED.popitem(last=False)
    else:
        _COMPILED.move_to_end(key)
    text, bound, returns_rows = found
    params = {name: values[v.index] if isinstance(v, Slot) else v for name, v in bound.items()}
    return Statement(text, params, returns_rows)


async def fetch_rows(
    conn: psycopg.AsyncConnection, statement: Statement, *, commit: bool = False
) -> Rows:
    """Run a statement that yields (rows, first row, page size, total); with `commit`, as the
    transaction's last."""
    async with conn.cursor() as cursor:
        await run(conn, cursor, statement.query, statement.params, commit=commit)
        # An aggregate without GROUP BY: always exactly one row.
        array, first, count, total = one(await cursor.fetchone(), "a rows statement")
    return Rows(array, first, count, total)


async def fetch_value(conn: psycopg.AsyncConnection, statement: Statement) -> str | None:
    async with conn.cursor() as cursor:
        await cursor.execute(statement.query, statement.params)
        found = await cursor.fetchone()
    return found[0] if found else None


async def execute(
    conn: psycopg.AsyncConnection, statement: Statement, *, commit: bool = False
) -> int:
    """Run a statement for its effect (with `commit`, as the transaction's last); the number of
    rows it touched."""
    async with conn.cursor() as cursor:
        await run(conn, cursor, statement.query, statement.params, commit=commit)
        return cursor.rowcount


def read_statement(
    query: Query,
    *,
    from_: sql.Composable,
    source: sql.Composable,
    count_exact: bool,
    params: Params | None = None,
    preamble: sql.Composable | None = None,
    render: Render | None = None,
) -> Statement:
    """Rows of `from_` (a table, or the `_rest_src` CTE `preamble` defines), rendered whole.

    Yields (rows, first row, rows on the page, total or null).
    """
    params = params or Params()
    render = render or Render()
    frame = Planner(render.joins, query.nested, params).frame(query.select, source)
    where = where_sql(query.conditions, source, params, frame.embeds, frame.inner)
    rows = sql.SQL("select {} from {}{}{}{}{}").format(
        frame.select,
        from_,
        frame.joins,
        where,
        order_sql(query.order, source, params),
        paging_sql(query.limit, query.offset, params),
    )
    total = (
        sql.SQL("(select count(*) from {}{}{})").format(from_, frame.joins, where)
        if count_exact
        else sql.SQL("null::bigint")
    )
    statement = sql.SQL("select {}, {} from ({}) as _rest_rows").format(
        render.aggregates, total, rows
    )
    if preamble is not None:
        statement = sql.Composed([preamble, sql.SQL(" "), statement])
    return Statement(statement, params.values, returns_rows=True)


def _returning(query: Query, table: sql.Composable, joins: Mapping[Path, Join]) -> sql.Composable:
    """The written rows' columns the select list reads: all for `*`, else the columns it names
    and those its embeds join on."""
    if any(isinstance(item, Star) for item in query.select):
        return sql.SQL("{}.*").format(table)
    named = [item.field.column for item in query.select if isinstance(item, Column)]
    columns = list(dict.fromkeys(named + join_columns(joins)))
    if not columns:
        return sql.SQL("null")
    return sql.SQL(", ").join(sql.SQL("{}.{}").format(table, ident(c)) for c in columns)


def _with_returning(
    dml: sql.Composed,
    query: Query,
    table: sql.Composable,
    params: Params,
    representation: bool,
    render: Render | None,
) -> Statement:
    """Without a representation there is no RETURNING: it would apply SELECT grants and policies.
    With one, the select list (embeds included) is read from the written rows."""
    if not representation:
        return Statement(dml, params.values, returns_rows=False)
    render = render or Render()
    frame = Planner(render.joins, query.nested, params).frame(query.select, _DML_ROWS)
    statement = sql.SQL(
        "with {dml_rows} as ({dml} returning {returning})"
        " select {aggregates}, null::bigint from"
        " (select {select} from {dml_rows}{joins}{where}) as _rest_rows"
    ).format(
        dml_rows=_DML_ROWS,
        dml=dml,
        returning=_returning(query, table, render.joins),
        aggregates=render.aggregates,
        select=frame.select,
        joins=frame.joins,
        where=where_sql((), _DML_ROWS, params, extra=frame.inner),
    )
    return Statement(statement, params.values, returns_rows=True)


def _populated(
    table: sql.Composable,
    columns: Sequence[str],
    rows: sql.Composable,
    defaults: Mapping[str, str] | None,
    params: Params,
) -> sql.Composable:
    """The incoming rows as a SELECT of `columns`. A key missing from an object is NULL, or
    with `defaults` (`Prefer: missing=default`) its column's default, computed per row."""
    names = sql.SQL(", ").join(ident(column) for column in columns)
    if defaults is None:
        return sql.SQL("select {} from jsonb_populate_recordset(null::{}, {}::jsonb)").format(
            names, table, rows
        )
    values = []
    for column in columns:
        value = sql.SQL("_rest_row.{}").format(ident(column))
        if column in defaults:  # the catalog's own expression, `%` kept from psycopg's pass
            default = sql.SQL(defaults[column].replace("%", "%%"))
            value = sql.SQL("case when _rest_in.j ? {} then {} else ({}) end").format(
                params.bind(column), value, default
            )
        values.append(value)
    return sql.SQL(
        "select {} from jsonb_array_elements({}::jsonb) with ordinality as _rest_in(j, i)"
        " cross join lateral jsonb_populate_record(null::{}, _rest_in.j) as _rest_row"
        " order by _rest_in.i"
    ).format(sql.SQL(", ").join(values), rows, table)


def insert_statement(
    table_name: str,
    columns: Sequence[str],
    rows_json: str,
    query: Query,
    *,
    representation: bool,
    resolution: str | None,
    conflict_columns: Sequence[str],
    defaults: Mapping[str, str] | None = None,
    render: Render | None = None,
) -> Statement:
    """Insert only the given columns, so column grants apply and the others take their defaults."""
    params = Params()
    table = table_ident(table_name)
    names = sql.SQL(", ").join(ident(column) for column in columns)
    target = sql.SQL(" ({})").format(names) if columns else sql.SQL("")
    rows = _populated(table, columns, params.bind(rows_json), defaults, params)
    dml = sql.SQL("insert into {}{} {}").format(table, target, rows)
    if resolution is not None:
        dml = sql.Composed([dml, _on_conflict_sql(columns, resolution, conflict_columns)])
    return _with_returning(dml, query, table, params, representation, render)


def _on_conflict_sql(
    columns: Sequence[str], resolution: str, conflict_columns: Sequence[str]
) -> sql.Composable:
    target = (
        sql.SQL(" ({})").format(sql.SQL(", ").join(ident(c) for c in conflict_columns))
        if conflict_columns
        else sql.SQL("")
    )
    # The key columns already hold the incoming values: setting them would only demand an
    # UPDATE grant on the key.
    updated = [column for column in columns if column not in conflict_columns]
    if resolution == "ignore-duplicates" or not updated:
        return sql.SQL(" on conflict{} do nothing").format(target)
    updates = sql.SQL(", ").join(
        sql.SQL("{} = excluded.{}").format(ident(c), ident(c)) for c in updated
    )
    return sql.SQL(" on conflict{} do update set {}").format(target, updates)


def _written(query: Query, table: sql.Composable, params: Params) -> sql.Composable:
    """The WHERE of an update or delete: its filters; with `limit`/`offset`, the rows that the
    filters, `order` and paging pick, by their physical address (`ctid`), as PostgREST does."""
    if query.limit is None and not query.offset:
        return where_sql(query.conditions, table, params)
    if not query.order:
        raise ApiError(
            400,
            "PGRST109",
            "A 'limit' was applied without an explicit 'order'",
            hint="Apply an 'order' using unique column(s)",
        )
    picked = sql.Identifier("_rest_picked")
    return sql.SQL(" where {}.ctid in (select {}.ctid from {} as {}{}{}{})").format(
        table,
        picked,
        table,
        picked,
        where_sql(query.conditions, picked, params),
        order_sql(query.order, picked, params),
        paging_sql(query.limit, query.offset, params),
    )


def update_statement(
    table_name: str,
    columns: Sequence[str],
    row_json: str,
    query: Query,
    *,
    representation: bool,
    render: Render | None = None,
) -> Statement:
    """Set only the body's columns, from the body read as a row of the table (Postgres coerces)."""
    params = Params()
    table = table_ident(table_name)
    assignments = sql.SQL(", ").join(
        sql.SQL("{} = _rest_body.{}").format(ident(c), ident(c)) for c in columns
    )
    dml = sql.SQL(
        "update {table} set {assignments}"
        " from jsonb_populate_record(null::{table}, {row}::jsonb) as _rest_body{where}"
    ).format(
        table=table,
        assignments=assignments,
        row=params.bind(row_json),
        where=_written(query, table, params),
    )
    return _with_returning(dml, query, table, params, representation, render)


def delete_statement(
    table_name: str, query: Query, *, representation: bool, render: Render | None = None
) -> Statement:
    params = Params()
    table = table_ident(table_name)
    dml = sql.SQL("delete from {}{}").format(table, _written(query, table, params))
    return _with_returning(dml, query, table, params, representation, render)
