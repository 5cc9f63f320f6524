"""`/rest/v1/rpc/<function>`: find the function in `public`, call it by name, render its result.

Arguments travel as one JSON object that `jsonb_to_record` turns into typed columns, so Postgres
coerces each value to its parameter's type (a JSON array into `text[]`, a string into `uuid`) just
as PostgREST does, and nothing the client sent is ever part of the SQL text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

import psycopg
from psycopg import sql

from relay.gateway.rest_embed import resolve_joins
from relay.gateway.rest_grammar import (
    RESERVED,
    Preferences,
    Query,
    decode_json,
    parse_query,
)
from relay.gateway.rest_http import (
    JSON_TYPE,
    ApiError,
    RestResponse,
    body_error,
    page_response,
)
from relay.gateway.rest_sql import (
    SCHEMA,
    Params,
    Render,
    Statement,
    execute,
    fetch_rows,
    fetch_value,
    ident,
    read_statement,
)

# Each overload of the name in `public`: its input arguments in order, defaults, and result shape.
_FUNCTIONS_SQL = """
select p.proretset, p.pronargdefaults,
  case when p.prorettype = 'pg_catalog.void'::pg_catalog.regtype then 'void'
       when rt.typtype = 'c' or p.prorettype = 'pg_catalog.record'::pg_catalog.regtype
         then 'composite'
       else 'scalar' end,
  coalesce((
    select json_agg(json_build_object('name', coalesce(a.name, ''), 'variadic', a.mode = 'v',
                                      'schema', tn.nspname, 'type', arg_type.typname)
                    order by a.ord)
    from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]), p.proargmodes::text[],
                p.proargnames) with ordinality as a(type_oid, mode, name, ord)
    join pg_catalog.pg_type arg_type on arg_type.oid = a.type_oid
    join pg_catalog.pg_namespace tn on tn.oid = arg_type.typnamespace
    where coalesce(a.mode, 'i') in ('i', 'b', 'v')), '[]')
from pg_catalog.pg_proc p
join pg_catalog.pg_namespace n on n.oid = p.pronamespace
join pg_catalog.pg_type rt on rt.oid = p.prorettype
where n.nspname = %s and p.proname = %s and p.prokind = 'f'
"""


@dataclass(frozen=True)
class Argument:
    name: str  # "" when the function left it unnamed: such an argument can't be passed by name
    type_schema: str
    type_name: str
    variadic: bool


@dataclass(frozen=True)
class Function:
    name: str
    arguments: tuple[Argument, ...]
    defaults: int  # how many trailing arguments have defaults
    returns_set: bool
    returns: str  # "void" | "scalar" | "composite"

    def accepts(self, given: set[str]) -> bool:
        """Every given name is an argument and every argument without a default is given."""
        names = {argument.name for argument in self.arguments if argument.name}
        required = self.arguments[: len(self.arguments) - self.defaults]
        return given <= names and all(argument.name in given for argument in required)

    def signature(self) -> str:
        listed = ", ".join(f"{a.name} => {a.type_name}" for a in self.arguments)
        return f"{SCHEMA}.{self.name}({listed})"


async def _overloads(conn: psycopg.AsyncConnection, name: str) -> list[Function]:
    async with conn.cursor() as cursor:
        await cursor.execute(_FUNCTIONS_SQL, (SCHEMA, name))
        found = await cursor.fetchall()
    return [
        Function(
            name,
            tuple(Argument(a["name"], a["schema"], a["type"], a["variadic"]) for a in arguments),
            defaults,
            returns_set,
            returns,
        )
        for returns_set, defaults, returns, arguments in found
    ]


def choose(overloads: Sequence[Function], name: str, given: set[str]) -> Function:
    """The one overload callable with these named arguments; else 404 or 300, as PostgREST."""
    matching = [function for function in overloads if function.accepts(given)]
    if not matching:
        listed = ", ".join(sorted(given))
        raise ApiError(
            404,
            "PGRST202",
            f"Could not find the function {SCHEMA}.{name}({listed}) in the schema cache",
            f"No function {SCHEMA}.{name} takes exactly the named arguments given"
            f" ({listed or 'none'}).",
        )
    if len(matching) > 1:
        between = ", ".join(function.signature() for function in matching)
        raise ApiError(
            300, "PGRST203", f"Could not choose the best candidate function between: {between}"
        )
    return matching[0]


def _call_sql(function: Function, given: set[str], args_json: str, params: Params) -> sql.Composed:
    """`FROM` items calling the function; a scalar result is the column `_rest_fn.value`."""
    used = [argument for argument in function.arguments if argument.name in given]
    result = sql.SQL("" if function.returns == "composite" else "(value)")
    call = ident(SCHEMA, function.name)
    if not used:
        return sql.SQL("{}() as _rest_fn{}").format(call, result)
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(ident(a.name), ident(a.type_schema, a.type_name)) for a in used
    )
    named = sql.SQL(", ").join(
        sql.SQL("{}{} => _rest_args.{}").format(
            sql.SQL("variadic " if a.variadic else ""), ident(a.name), ident(a.name)
        )
        for a in used
    )
    return sql.SQL("jsonb_to_record({}::jsonb) as _rest_args({}), {}({}) as _rest_fn{}").format(
        params.bind(args_json), columns, call, named, result
    )


def _arguments(
    method: str, overloads: Sequence[Function], query: list[tuple[str, str]], body: bytes
) -> tuple[str, set[str], Query]:
    """The arguments as a JSON object, their names, and the rest of the query string.

    POST takes them from the body; GET from query parameters named like an argument (repeated ones
    make an array), the others being filters and shaping applied to the result.
    """
    if method == "POST":
        text, value = decode_json(body) if body.strip() else ("{}", {})
        if not isinstance(value, dict):
            raise body_error("Expected a JSON object of named arguments")
        return text, set(value), parse_query(query)
    names = {argument.name for function in overloads for argument in function.arguments}
    values: dict[str, list[str]] = {}
    rest: list[tuple[str, str]] = []
    for key, value in query:
        if key in names and key not in RESERVED:
            values.setdefault(key, []).append(value)
        else:
            rest.append((key, value))
    args = {key: items[0] if len(items) == 1 else items for key, items in values.items()}
    return json.dumps(args), set(args), parse_query(rest)


async def call_function(
    conn: psycopg.AsyncConnection,
    *,
    method: str,
    name: str,
    query: list[tuple[str, str]],
    prefs: Preferences,
    single: bool,
    render: Render,
    body: bytes,
) -> RestResponse:
    if method not in ("GET", "HEAD", "POST"):
        raise ApiError(405, "PGRST101", "Only GET and POST verbs are allowed")
    overloads = await _overloads(conn, name)
    args_json, given, shaping = _arguments(method, overloads, query, body)
    function = choose(overloads, name, given)
    if method != "POST":
        # As PostgREST does: a GET must not write, whatever the function's volatility says.
        await conn.execute("set transaction read only")
    params = Params()
    call = _call_sql(function, given, args_json, params)
    with_body = method != "HEAD"
    if function.returns == "composite":
        preamble = sql.SQL("with _rest_src as materialized (select _rest_fn.* from {})").format(
            call
        )
        source = sql.Identifier("_rest_src")
        # A function's rows have no foreign keys: an embed is PGRST200, naming the function.
        render = replace(render, joins=await resolve_joins(conn, name, shaping.select))
        statement = read_statement(
            shaping,
            from_=source,
            source=source,
            params=params,
            count_exact=prefs.count_exact,
            preamble=preamble,
            render=render,
        )
        rows = await fetch_rows(conn, statement)
        if not function.returns_set and not render.csv:  # one composite value: an object
            return _json_response(rows.first, with_body)
        return page_response(
            rows, shaping.offset, single=single, with_body=with_body, csv=render.csv
        )
    if render.csv:  # a scalar is no table
        raise ApiError(406, "PGRST107", "None of these media types are available: text/csv")
    if shaping.shapes_rows:
        raise ApiError(
            400,
            "PGRST100",
            f"{SCHEMA}.{name} doesn't return rows, so its result can't be filtered,"
            " ordered, paged or shaped by select",
        )
    if function.returns == "void":
        await execute(conn, Statement(sql.SQL("select from {}").format(call), params.values))
        return RestResponse(204, None, {})
    if function.returns_set:
        total = sql.SQL("count(*)" if prefs.count_exact else "null::bigint")
        select = sql.SQL(
            "select coalesce(json_agg(_rest_fn.value), '[]')::text,"
            " (json_agg(_rest_fn.value) -> 0)::text, count(*), {} from {}"
        ).format(total, call)
        rows = await fetch_rows(conn, Statement(select, params.values))
        return page_response(rows, 0, single=single, with_body=with_body)
    select = sql.SQL("select to_json(_rest_fn.value)::text from {}").format(call)
    return _json_response(await fetch_value(conn, Statement(select, params.values)), with_body)


def _json_response(value: str | None, with_body: bool) -> RestResponse:
    """One JSON value; SQL NULL is JSON `null`."""
    body = (value or "null").encode() if with_body else None
    return RestResponse(200, body, {"content-type": JSON_TYPE})
