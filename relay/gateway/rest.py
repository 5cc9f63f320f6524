"""The PostgREST-compatible REST layer (`/rest/v1/...`), independent of any web framework.

The gateway opens a transaction, sets the role and `request.jwt.claims`, and calls `handle()`;
the database's grants and policies decide who sees what, and this module only turns PostgREST's
HTTP grammar into SQL and the result back into PostgREST's responses. The parts:
`rest_grammar` (query string and headers → AST), `rest_sql` (AST → SQL), `rest_rpc` (functions),
`rest_http` (responses, errors and status codes).
"""

from __future__ import annotations

from collections.abc import Mapping

import psycopg

from relay.gateway.rest_grammar import (
    Preferences,
    Query,
    decode_json,
    parse_prefer,
    parse_query,
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
    Statement,
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


async def handle(
    conn: psycopg.AsyncConnection,
    *,
    method: str,
    target: str,
    query: list[tuple[str, str]],
    headers: Mapping[str, str],
    body: bytes,
) -> RestResponse:
    """Serve one request inside the caller's transaction.

    Raises ApiError for what PostgREST refuses by itself, possibly after a write (406 when one
    object was asked for and the write touched more), so the caller must roll back on any
    exception; psycopg errors propagate for `db_error_response`.
    """
    method = method.upper()
    _check_schema(method, headers)
    prefs = parse_prefer(headers.get("prefer", ""))
    single = wants_object(headers.get("accept", ""))
    name = target.removeprefix("rpc/")
    if not name or "/" in name or "\x00" in name:
        raise ApiError(404, "PGRST125", "Invalid path specified in request URL")
    if target.startswith("rpc/"):
        return await call_function(
            conn, method=method, name=name, query=query, prefs=prefs, single=single, body=body
        )
    parsed = parse_query(query)
    if method in ("GET", "HEAD"):
        return await _read(conn, name, parsed, prefs, single, with_body=method == "GET")
    if method not in ("POST", "PATCH", "DELETE"):
        raise ApiError(405, "PGRST117", f"Unsupported HTTP method: {method}")
    if parsed.order or parsed.limit is not None or parsed.offset:
        raise ApiError(
            400,
            "PGRST100",
            "order, limit and offset apply to reads only, not to inserts, updates or deletes",
        )
    if method == "POST":
        return await _insert(conn, name, parsed, prefs, single, body)
    if method == "PATCH":
        return await _update(conn, name, parsed, prefs, single, body)
    statement = delete_statement(name, parsed, representation=_represents(prefs))
    return await _mutation_response(conn, statement, prefs, single, inserting=False)


def _check_schema(method: str, headers: Mapping[str, str]) -> None:
    """Only `public` is exposed; naming another schema in a profile header is PGRST106."""
    header = "accept-profile" if method in ("GET", "HEAD") else "content-profile"
    if headers.get(header, SCHEMA) != SCHEMA:
        raise ApiError(406, "PGRST106", f"The schema must be one of the following: {SCHEMA}")


def _represents(prefs: Preferences) -> bool:
    return prefs.returning == "representation"


async def _read(
    conn: psycopg.AsyncConnection,
    table: str,
    query: Query,
    prefs: Preferences,
    single: bool,
    *,
    with_body: bool,
) -> RestResponse:
    source = table_ident(table)
    statement = read_statement(query, from_=source, source=source, count_exact=prefs.count_exact)
    rows = await fetch_rows(conn, statement)
    return page_response(rows, query.offset, single=single, with_body=with_body)


def _insert_payload(body: bytes, query: Query) -> tuple[str, list[str]]:
    """The rows as a JSON array, and the columns to insert: the objects' keys, or `columns=`."""
    text, value = decode_json(body)
    if isinstance(value, dict):
        text, rows = f"[{text}]", [value]
    elif isinstance(value, list) and all(isinstance(row, dict) for row in value):
        rows = value
    else:
        raise body_error("Expected a JSON object or an array of JSON objects")
    if query.columns is not None:
        return text, list(query.columns)
    keys = list(rows[0]) if rows else []
    if any(set(row) != set(keys) for row in rows):
        raise body_error("All object keys must match")
    return text, keys


async def _insert(
    conn: psycopg.AsyncConnection,
    table: str,
    query: Query,
    prefs: Preferences,
    single: bool,
    body: bytes,
) -> RestResponse:
    if query.conditions:
        raise ApiError(400, "PGRST100", "filters don't apply to an insert")
    rows_json, columns = _insert_payload(body, query)
    conflict_columns: list[str] = []
    if prefs.resolution is not None:
        conflict_columns = list(query.on_conflict or await _primary_key(conn, table))
    statement = insert_statement(
        table,
        columns,
        rows_json,
        query,
        representation=_represents(prefs),
        resolution=prefs.resolution,
        conflict_columns=conflict_columns,
    )
    return await _mutation_response(conn, statement, prefs, single, inserting=True)


async def _primary_key(conn: psycopg.AsyncConnection, table: str) -> list[str]:
    async with conn.cursor() as cursor:
        await cursor.execute(_PRIMARY_KEY_SQL, (SCHEMA, table))
        return [column for (column,) in await cursor.fetchall()]


async def _update(
    conn: psycopg.AsyncConnection,
    table: str,
    query: Query,
    prefs: Preferences,
    single: bool,
    body: bytes,
) -> RestResponse:
    text, value = decode_json(body)
    if not isinstance(value, dict):
        raise body_error("Expected a JSON object")
    if not value:  # nothing to set: no statement, nothing touched
        return _mutated(
            Rows("[]", None, 0), prefs, single, inserting=False, represented=_represents(prefs)
        )
    statement = update_statement(table, list(value), text, query, representation=_represents(prefs))
    return await _mutation_response(conn, statement, prefs, single, inserting=False)


async def _mutation_response(
    conn: psycopg.AsyncConnection,
    statement: Statement,
    prefs: Preferences,
    single: bool,
    *,
    inserting: bool,
) -> RestResponse:
    if statement.returns_rows:
        rows = await fetch_rows(conn, statement)
    else:
        rows = Rows("[]", None, await execute(conn, statement))
    return _mutated(rows, prefs, single, inserting=inserting, represented=statement.returns_rows)


def _mutated(
    rows: Rows, prefs: Preferences, single: bool, *, inserting: bool, represented: bool
) -> RestResponse:
    """Inserts answer 201 whatever `return=` says; updates and deletes 200 with rows, else 204."""
    total = rows.count if prefs.count_exact else None
    # An insert's range is always the empty one, `*/<total>`, as PostgREST writes it.
    headers = {"content-range": content_range(0, 0 if inserting else rows.count, total)}
    if represented:
        return rows_response(201 if inserting else 200, rows, single=single, headers=headers)
    if single:
        single_row(rows.count)
    return RestResponse(201 if inserting else 204, None, headers)
