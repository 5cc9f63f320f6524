"""The grammar's AST as SQL: every name quoted, every value bound, nothing from the client inlined.

Rows come back as one JSON array built by Postgres itself (`json_agg` over a subquery), so values
render exactly as PostgREST renders them: timestamptz as ISO-8601 with its offset, jsonb as JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg import sql

from relay.gateway.db import one
from relay.gateway.rest_grammar import (
    IS_VALUES,
    Condition,
    Field,
    Filter,
    OrderTerm,
    Query,
    SelectItem,
    Star,
)
from relay.gateway.rest_http import ApiError, Rows

SCHEMA = "public"

# SQL keywords Postgres accepts as type names but that aren't names in pg_type, so can't be quoted.
_TYPE_NAMES = {
    "int": "int4",
    "integer": "int4",
    "smallint": "int2",
    "bigint": "int8",
    "real": "float4",
    "float": "float8",
    "boolean": "bool",
    "decimal": "numeric",
    "char": "bpchar",
}
_COMPARISONS = {
    "eq": "=",
    "neq": "<>",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "like": "like",
    "ilike": "ilike",
    "match": "~",
    "imatch": "~*",
    "cs": "@>",
    "cd": "<@",
    "ov": "&&",
    "isdistinct": "is distinct from",
}
# `is` takes the grammar's words, each a SQL keyword spelled the same; only these reach the SQL.
_IS_KEYWORDS = {word: word for word in IS_VALUES}

# The aggregates every row-returning statement ends with: the array, its first element, its size.
_AGGREGATES = sql.SQL(
    "coalesce(json_agg(_rest_rows), '[]')::text, (json_agg(_rest_rows) -> 0)::text, count(*)"
)


def ident(*parts: str) -> sql.Identifier:
    """A quoted, maybe qualified name; `%` doubled so psycopg's placeholder pass leaves it be."""
    if any("\x00" in part for part in parts):
        raise ApiError(400, "PGRST100", "names cannot contain NUL characters")
    try:
        for part in parts:
            part.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape
        raise ApiError(400, "PGRST100", "names must be valid Unicode") from None
    return sql.Identifier(*(part.replace("%", "%%") for part in parts))


def table_ident(name: str) -> sql.Identifier:
    """Only `public` is reachable, whatever the name says (`yui_meta.x` is one odd table name)."""
    return ident(SCHEMA, name)


class Params:
    """Values bound by name, so one fragment can appear twice in a statement (rows, count)."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {}

    def bind(self, value: object) -> sql.Placeholder:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return sql.Placeholder(name)


@dataclass(frozen=True)
class Statement:
    query: sql.Composed  # what `SQL.format` and `Composed([...])` build; `execute` takes it
    params: dict[str, object]
    returns_rows: bool = True  # whether it yields `Rows` rather than a bare row count


async def fetch_rows(conn: psycopg.AsyncConnection, statement: Statement) -> Rows:
    """Run a statement that yields (array, first element, page size, total)."""
    async with conn.cursor() as cursor:
        await cursor.execute(statement.query, statement.params)
        # An aggregate without GROUP BY: always exactly one row.
        array, first, count, total = one(await cursor.fetchone(), "a rows statement")
    return Rows(array, first, count, total)


async def fetch_value(conn: psycopg.AsyncConnection, statement: Statement) -> str | None:
    async with conn.cursor() as cursor:
        await cursor.execute(statement.query, statement.params)
        found = await cursor.fetchone()
    return found[0] if found else None


async def execute(conn: psycopg.AsyncConnection, statement: Statement) -> int:
    """Run a statement for its effect; the number of rows it touched."""
    async with conn.cursor() as cursor:
        await cursor.execute(statement.query, statement.params)
        return cursor.rowcount


def field_sql(source: sql.Composable, field: Field, params: Params) -> sql.Composable:
    """`source.column`, then one `->`/`->>` per JSON step with the key bound as text or int."""
    expr: sql.Composable = sql.SQL("{}.{}").format(source, ident(field.column))
    for step in field.path:
        key_type = sql.SQL("int" if isinstance(step.key, int) else "text")
        expr = sql.SQL("({} {} {}::{})").format(
            expr, sql.SQL(step.arrow), params.bind(step.key), key_type
        )
    return expr


def _type_sql(name: str) -> sql.Identifier:
    return ident(_TYPE_NAMES.get(name, name))


def select_sql(
    items: Sequence[SelectItem], source: sql.Composable, params: Params
) -> sql.Composable:
    """The select list; an empty one is valid and yields `{}` per row, as in PostgREST."""
    parts: list[sql.Composable] = []
    for item in items:
        if isinstance(item, Star):
            parts.append(sql.SQL("{}.*").format(source))
            continue
        expr = field_sql(source, item.field, params)
        if item.cast:
            expr = sql.SQL("cast({} as {})").format(expr, _type_sql(item.cast))
        parts.append(sql.SQL("{} as {}").format(expr, ident(item.output_name)))
    return sql.SQL(", ").join(parts)


def _filter_sql(condition: Filter, source: sql.Composable, params: Params) -> sql.Composable:
    left = field_sql(source, condition.field, params)
    if condition.operator == "in":
        if not condition.value:
            return sql.SQL("false")
        items = sql.SQL(", ").join(params.bind(item) for item in condition.value)
        return sql.SQL("{} in ({})").format(left, items)
    if condition.operator == "is":
        return sql.SQL("{} is {}").format(left, sql.SQL(_IS_KEYWORDS[str(condition.value)]))
    operator = sql.SQL(_COMPARISONS[condition.operator])
    return sql.SQL("{} {} {}").format(left, operator, params.bind(condition.value))


def condition_sql(condition: Condition, source: sql.Composable, params: Params) -> sql.Composable:
    if isinstance(condition, Filter):
        expr = _filter_sql(condition, source, params)
    else:
        joiner = sql.SQL(f" {condition.operator} ")
        expr = joiner.join(condition_sql(child, source, params) for child in condition.conditions)
    template = "not ({})" if condition.negated else "({})"
    return sql.SQL(template).format(expr)


def where_sql(
    conditions: Sequence[Condition], source: sql.Composable, params: Params
) -> sql.Composable:
    if not conditions:
        return sql.SQL("")
    joined = sql.SQL(" and ").join(condition_sql(c, source, params) for c in conditions)
    return sql.SQL(" where {}").format(joined)


def _order_sql(
    terms: Sequence[OrderTerm], source: sql.Composable, params: Params
) -> sql.Composable:
    if not terms:
        return sql.SQL("")
    parts = []
    for term in terms:
        direction = " desc" if term.descending else " asc"
        nulls = f" nulls {term.nulls}" if term.nulls else ""
        parts.append(
            sql.SQL("{}{}").format(
                field_sql(source, term.field, params), sql.SQL(direction + nulls)
            )
        )
    return sql.SQL(" order by {}").format(sql.SQL(", ").join(parts))


def _paging_sql(query: Query, params: Params) -> sql.Composable:
    parts: list[sql.Composable] = []
    if query.limit is not None:
        parts.append(sql.SQL(" limit {}").format(params.bind(query.limit)))
    if query.offset:
        parts.append(sql.SQL(" offset {}").format(params.bind(query.offset)))
    return sql.Composed(parts)


def read_statement(
    query: Query,
    *,
    from_: sql.Composable,
    source: sql.Composable,
    count_exact: bool,
    params: Params | None = None,
    preamble: sql.Composable | None = None,
) -> Statement:
    """Rows of `from_` (a table, or the `_rest_src` CTE `preamble` defines) as one JSON array.

    Yields (array, first element, rows on the page, total or null).
    """
    params = params or Params()
    where = where_sql(query.conditions, source, params)
    rows = sql.SQL("select {} from {}{}{}{}").format(
        select_sql(query.select, source, params),
        from_,
        where,
        _order_sql(query.order, source, params),
        _paging_sql(query, params),
    )
    total = (
        sql.SQL("(select count(*) from {}{})").format(from_, where)
        if count_exact
        else sql.SQL("null::bigint")
    )
    statement = sql.SQL("select {}, {} from ({}) as _rest_rows").format(_AGGREGATES, total, rows)
    if preamble is not None:
        statement = sql.Composed([preamble, sql.SQL(" "), statement])
    return Statement(statement, params.values, returns_rows=True)


def _with_returning(
    dml: sql.Composed, query: Query, table: sql.Composable, params: Params, representation: bool
) -> Statement:
    """Without a representation there is no RETURNING: it would apply SELECT grants and policies."""
    if not representation:
        return Statement(dml, params.values, returns_rows=False)
    statement = sql.SQL(
        "with _rest_rows as ({} returning {}) select {}, null::bigint from _rest_rows"
    ).format(dml, select_sql(query.select, table, params), _AGGREGATES)
    return Statement(statement, params.values, returns_rows=True)


def insert_statement(
    table_name: str,
    columns: Sequence[str],
    rows_json: str,
    query: Query,
    *,
    representation: bool,
    resolution: str | None,
    conflict_columns: Sequence[str],
) -> Statement:
    """Insert only the given columns, so column grants apply and the others take their defaults."""
    params = Params()
    table = table_ident(table_name)
    names = sql.SQL(", ").join(ident(column) for column in columns)
    target = sql.SQL(" ({})").format(names) if columns else sql.SQL("")
    dml = sql.SQL(
        "insert into {table}{target} select {names} from"
        " jsonb_populate_recordset(null::{table}, {rows}::jsonb)"
    ).format(table=table, target=target, names=names, rows=params.bind(rows_json))
    if resolution is not None:
        dml = sql.Composed([dml, _on_conflict_sql(columns, resolution, conflict_columns)])
    return _with_returning(dml, query, table, params, representation)


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


def update_statement(
    table_name: str, columns: Sequence[str], row_json: str, query: Query, *, representation: bool
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
        where=where_sql(query.conditions, table, params),
    )
    return _with_returning(dml, query, table, params, representation)


def delete_statement(table_name: str, query: Query, *, representation: bool) -> Statement:
    params = Params()
    table = table_ident(table_name)
    dml = sql.SQL("delete from {}{}").format(table, where_sql(query.conditions, table, params))
    return _with_returning(dml, query, table, params, representation)
