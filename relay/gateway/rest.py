"""The PostgREST-compatible REST layer (`/rest/v1/...`), independent of any web framework.

The gateway opens a transaction, sets the role and `request.jwt.claims`, and calls `handle()`;
the database's grants and policies decide who sees what, and this module only turns PostgREST's
HTTP grammar into SQL and the result back into PostgREST's responses. The parts:
`rest_grammar` (query string and headers → the AST of `rest_ast`, read with `rest_cursor`),
`rest_expr` (expressions → SQL), `rest_embed` (embedded resources along foreign keys),
`rest_sql` (statements), `rest_rpc` (functions), `rest_http` (responses, errors and statuses).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import psycopg

from relay.gateway.rest_embed import resolve_joins
from relay.gateway.rest_grammar import (
    Preferences,
    Query,
    decode_json,
    parse_prefer,
    parse_query,
    strips_nulls,
    wants_csv,
    wants_object,
)
from relay.gateway.rest_http import (
    ApiError,
    RestResponse,
    Rows,
    body_error,
    content_range,
    db_error_response,
    page_response,
    rows_response,
    single_row,
)
from relay.gateway.rest_rpc import call_function
from relay.gateway.rest_sql import (
    SCHEMA,
    Render,
    Slots,
    Statement,
    compiled,
    delete_statement,
    execute,
    fetch_rows,
    insert_statement,
    read_statement,
    table_ident,
    update_statement,
)

__all__ = ["ApiError", "RestResponse", "db_error_response", "handle"]

_PRIMARY_KEY_SQL = """
select a.attname
from pg_catalog.pg_index i
join pg_catalog.pg_class c on c.oid = i.indrelid
join pg_catalog.pg_namespace n on n.oid = c.relnamespace
join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum = any(i.indkey)
where i.indisprimary and n.nspname = %s and c.relname = %s
order by array_position(i.indkey::int2[], a.attnum)
"""
# The default expressions of some columns, as SQL text (generated columns have none to give).
_DEFAULTS_SQL = """
select a.attname::text, pg_catalog.pg_get_expr(d.adbin, d.adrelid)
from pg_catalog.pg_attribute a
join pg_catalog.pg_class c on c.oid = a.attrelid
join pg_catalog.pg_namespace n on n.oid = c.relnamespace
join pg_catalog.pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
where n.nspname = %s and c.relname = %s and a.attname = any(%s)
  and a.attgenerated = '' and not a.attisdropped
"""


@dataclass(frozen=True)
class _Answer:
    """What the request asks back, besides the rows: its preferences, one object or many, and
    how rows are rendered (embeds, CSV, null fields left out)."""

    prefs: Preferences
    single: bool
    render: Render


async def handle(
    conn: psycopg.AsyncConnection,
    *,
    method: str,
    target: str,
    query: list[tuple[str, str]],
    headers: Mapping[str, str],
    body: bytes,
) -> RestResponse:
    """Serve one request inside the caller's transaction, which a table's read or write ends
    with its one statement (COMMIT sent with it), unless a write must wait for its count.

    Raises ApiError for what PostgREST refuses by itself, possibly after a write (406 when one
    object was asked for and the write touched more), so the caller must roll back on any
    exception; psycopg errors propagate for `db_error_response`.
    """
    method = method.upper()
    _check_schema(method, headers)
    prefs = parse_prefer(headers.get("prefer", ""))
    accept = headers.get("accept", "")
    single = wants_object(accept)
    render = Render(csv=wants_csv(accept), strip_nulls=strips_nulls(accept))
    name = target.removeprefix("rpc/")
    if not name or "/" in name or "\x00" in name:
        raise ApiError(404, "PGRST125", "Invalid path specified in request URL")
    if target.startswith("rpc/"):
        return await call_function(
            conn,
            method=method,
            name=name,
            query=query,
            prefs=prefs,
            single=single,
            render=render,
            body=body,
        )
    if method not in ("GET", "HEAD", "POST", "PATCH", "DELETE"):
        raise ApiError(405, "PGRST117", f"Unsupported HTTP method: {method}")
    parsed = parse_query(query)
    if method == "POST" and (parsed.order or parsed.limit is not None or parsed.offset):
        raise ApiError(400, "PGRST100", "order, limit and offset don't apply to an insert")
    joins = await resolve_joins(conn, name, parsed.select)
    answer = _Answer(prefs, single, replace(render, joins=joins))
    if method in ("GET", "HEAD"):
        return await _read(conn, name, parsed, answer, with_body=method == "GET")
    if method == "POST":
        return await _insert(conn, name, parsed, answer, body)
    if method == "PATCH":
        return await _update(conn, name, parsed, answer, body)
    representation = _represents(prefs)
    statement = _statement(
        conn,
        ("delete", name, representation),
        parsed,
        None,
        answer.render,
        lambda query, _: delete_statement(
            name, query, representation=representation, render=answer.render
        ),
    )
    return await _mutation_response(conn, statement, answer, inserting=False)


def _check_schema(method: str, headers: Mapping[str, str]) -> None:
    """Only `public` is exposed; naming another schema in a profile header is PGRST106."""
    header = "accept-profile" if method in ("GET", "HEAD") else "content-profile"
    if headers.get(header, SCHEMA) != SCHEMA:
        raise ApiError(406, "PGRST106", f"The schema must be one of the following: {SCHEMA}")


def _represents(prefs: Preferences) -> bool:
    return prefs.returning == "representation"


def _statement(
    conn: psycopg.AsyncConnection,
    key: tuple[object, ...],
    query: Query,
    body: str | None,
    render: Render,
    build: Callable[[Query, Any], Statement],  # the query or its shape, the body or its Slot
) -> Statement:
    """`build(query, body)`, from its shape's text when this shape was built before: `key` and
    `render` name all else the text depends on. With embeds, built each time."""
    slots = Slots()
    shape = None if render.joins else slots.query(query)
    if shape is None:
        return build(query, body)
    shaped_body = slots.slot(body)
    key = (*key, Slots.key(shape), render.csv, render.strip_nulls)
    return compiled(conn, key, slots.values, lambda: build(shape, shaped_body))


async def _read(
    conn: psycopg.AsyncConnection, table: str, query: Query, answer: _Answer, *, with_body: bool
) -> RestResponse:
    source = table_ident(table)
    count_exact = answer.prefs.count_exact
    statement = _statement(
        conn,
        ("read", table, count_exact),
        query,
        None,
        answer.render,
        lambda shape, _: read_statement(
            shape, from_=source, source=source, count_exact=count_exact, render=answer.render
        ),
    )
    rows = await fetch_rows(conn, statement, commit=True)  # nothing written: nothing to undo
    return page_response(
        rows, query.offset, single=answer.single, with_body=with_body, csv=answer.render.csv
    )


def _insert_payload(body: bytes, query: Query, missing_default: bool) -> tuple[str, list[str]]:
    """The rows as a JSON array, and the columns to insert: `columns=`, or the objects' keys,
    which must match unless a missing key takes its default (`Prefer: missing=default`)."""
    text, value = decode_json(body)
    if isinstance(value, dict):
        text, rows = f"[{text}]", [value]
    elif isinstance(value, list) and all(isinstance(row, dict) for row in value):
        rows = value
    else:
        raise body_error("Expected a JSON object or an array of JSON objects")
    if query.columns is not None:
        return text, list(query.columns)
    if missing_default:
        return text, list(dict.fromkeys(key for row in rows for key in row))
    keys = list(rows[0]) if rows else []
    if any(set(row) != set(keys) for row in rows):
        raise body_error("All object keys must match")
    return text, keys


async def _insert(
    conn: psycopg.AsyncConnection, table: str, query: Query, answer: _Answer, body: bytes
) -> RestResponse:
    if query.conditions:
        raise ApiError(400, "PGRST100", "filters don't apply to an insert")
    prefs = answer.prefs
    rows_json, columns = _insert_payload(body, query, prefs.missing_default)
    conflict_columns: tuple[str, ...] = ()
    if prefs.resolution is not None:
        conflict_columns = tuple(query.on_conflict or await _primary_key(conn, table))
    defaults = await _defaults(conn, table, columns) if prefs.missing_default else None
    representation = _represents(prefs)
    statement = _statement(
        conn,
        (
            "insert",
            table,
            tuple(columns),
            representation,
            prefs.resolution,
            conflict_columns,
            None if defaults is None else tuple(defaults.items()),
        ),
        query,
        rows_json,
        answer.render,
        lambda shape, rows: insert_statement(
            table,
            columns,
            rows,
            shape,
            representation=representation,
            resolution=prefs.resolution,
            conflict_columns=conflict_columns,
            defaults=defaults,
            render=answer.render,
        ),
    )
    return await _mutation_response(conn, statement, answer, inserting=True)


async def _primary_key(conn: psycopg.AsyncConnection, table: str) -> list[str]:
    async with conn.cursor() as cursor:
        await cursor.execute(_PRIMARY_KEY_SQL, (SCHEMA, table))
        return [column for (column,) in await cursor.fetchall()]


async def _defaults(
    conn: psycopg.AsyncConnection, table: str, columns: list[str]
) -> dict[str, str]:
    async with conn.cursor() as cursor:
        await cursor.execute(_DEFAULTS_SQL, (SCHEMA, table, columns))
        return dict(await cursor.fetchall())


async def _update(
    conn: psycopg.AsyncConnection, table: str, query: Query, answer: _Answer, body: bytes
) -> RestResponse:
    text, value = decode_json(body)
    if not isinstance(value, dict):
        raise body_error("Expected a JSON object")
    represented = _represents(answer.prefs)
    if not value:  # nothing to set: no statement, nothing touched
        nothing = Rows("\n" if answer.render.csv else "[]", None, 0)
        return _mutated(nothing, answer, inserting=False, represented=represented)
    columns = list(value)
    statement = _statement(
        conn,
        ("update", table, tuple(columns), represented),
        query,
        text,
        answer.render,
        lambda shape, row: update_statement(
            table, columns, row, shape, representation=represented, render=answer.render
        ),
    )
    return await _mutation_response(conn, statement, answer, inserting=False)


async def _mutation_response(
    conn: psycopg.AsyncConnection, statement: Statement, answer: _Answer, *, inserting: bool
) -> RestResponse:
    # A write asked to touch one object is undone when it touched another count: not the last.
    commit = not answer.single
    if statement.returns_rows:
        rows = await fetch_rows(conn, statement, commit=commit)
    else:
        rows = Rows("[]", None, await execute(conn, statement, commit=commit))
    return _mutated(rows, answer, inserting=inserting, represented=statement.returns_rows)


def _mutated(rows: Rows, answer: _Answer, *, inserting: bool, represented: bool) -> RestResponse:
    """Inserts answer 201 whatever `return=` says; updates and deletes 200 with rows, else 204."""
    total = rows.count if answer.prefs.count_exact else None
    # An insert's range is always the empty one, `*/<total>`, as PostgREST writes it.
    headers = {"content-range": content_range(0, 0 if inserting else rows.count, total)}
    status = 201 if inserting else 200
    if represented:
        csv = answer.render.csv
        return rows_response(status, rows, single=answer.single, headers=headers, csv=csv)
    if answer.single:
        single_row(rows.count)
    return RestResponse(201 if inserting else 204, None, headers)
