"""The grammar's expressions as SQL: names, fields, select items, filters, order and paging.

Every name is quoted and every value bound, nothing from the client is inlined; the statements
(`rest_sql`) and the embedded resources (`rest_embed`) are built from these pieces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from psycopg import sql

from relay.gateway.rest_ast import Column, Condition, Field, Filter, OrderTerm, Star
from relay.gateway.rest_grammar import IS_VALUES
from relay.gateway.rest_http import ApiError

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
    "sl": "<<",
    "sr": ">>",
    "nxr": "&<",
    "nxl": "&>",
    "adj": "-|-",
}
# Full-text search: `fts` and its kin, each a tsquery parser (`(config)` picks the language).
_TSQUERY = {
    "fts": "to_tsquery",
    "plfts": "plainto_tsquery",
    "phfts": "phraseto_tsquery",
    "wfts": "websearch_to_tsquery",
}
# `is` takes the grammar's words, each a SQL keyword spelled the same; only these reach the SQL.
_IS_KEYWORDS = {word: word for word in IS_VALUES}


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


def item_sql(item: Star | Column, source: sql.Composable, params: Params) -> sql.Composable:
    """One select item of a row's own columns (embeds are `rest_embed`'s)."""
    if isinstance(item, Star):
        return sql.SQL("{}.*").format(source)
    expr = field_sql(source, item.field, params)
    if item.cast:
        expr = sql.SQL("cast({} as {})").format(expr, _type_sql(item.cast))
    return sql.SQL("{} as {}").format(expr, ident(item.output_name))


def _filter_sql(
    condition: Filter, source: sql.Composable, params: Params, embeds: Mapping[str, sql.Composable]
) -> sql.Composable:
    field = condition.field
    if field.column in embeds and not field.path and condition.operator == "is":
        # `yui_agents=is.null`: rows without (or, negated, with) an embedded row.
        left = embeds[field.column]
    else:
        left = field_sql(source, field, params)
    if condition.operator == "in":
        if not condition.value:
            return sql.SQL("false")
        items = sql.SQL(", ").join(params.bind(item) for item in condition.value)
        return sql.SQL("{} in ({})").format(left, items)
    if condition.operator == "is":
        return sql.SQL("{} is {}").format(left, sql.SQL(_IS_KEYWORDS[str(condition.value)]))
    value = params.bind(condition.value)
    if condition.operator in _TSQUERY:
        parser = sql.SQL(_TSQUERY[condition.operator])
        if condition.config is None:
            return sql.SQL("{} @@ {}({})").format(left, parser, value)
        config = params.bind(condition.config)
        return sql.SQL("{} @@ {}({}::regconfig, {})").format(left, parser, config, value)
    operator = sql.SQL(_COMPARISONS[condition.operator])
    if condition.quantifier is not None:  # `like(any).{a%,b%}`: the value is an array literal
        return sql.SQL("{} {} {}({})").format(left, operator, sql.SQL(condition.quantifier), value)
    return sql.SQL("{} {} {}").format(left, operator, value)


def condition_sql(
    condition: Condition,
    source: sql.Composable,
    params: Params,
    embeds: Mapping[str, sql.Composable] | None = None,
) -> sql.Composable:
    """A filter or logic tree over `source`'s columns; `embeds` maps an embed's name to its
    value, for `name=is.null`."""
    if isinstance(condition, Filter):
        expr = _filter_sql(condition, source, params, embeds or {})
    else:
        joiner = sql.SQL(f" {condition.operator} ")
        expr = joiner.join(
            condition_sql(child, source, params, embeds) for child in condition.conditions
        )
    template = "not ({})" if condition.negated else "({})"
    return sql.SQL(template).format(expr)


def where_sql(
    conditions: Sequence[Condition],
    source: sql.Composable,
    params: Params,
    embeds: Mapping[str, sql.Composable] | None = None,
    extra: Sequence[sql.Composable] = (),
) -> sql.Composable:
    """` where …` joining the conditions and any `extra` SQL ones; empty for none."""
    parts = [condition_sql(c, source, params, embeds) for c in conditions] + list(extra)
    if not parts:
        return sql.SQL("")
    return sql.SQL(" where {}").format(sql.SQL(" and ").join(parts))


def order_sql(terms: Sequence[OrderTerm], source: sql.Composable, params: Params) -> sql.Composable:
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


def paging_sql(limit: int | None, offset: int, params: Params) -> sql.Composable:
    parts: list[sql.Composable] = []
    if limit is not None:
        parts.append(sql.SQL(" limit {}").format(params.bind(limit)))
    if offset:
        parts.append(sql.SQL(" offset {}").format(params.bind(offset)))
    return sql.Composed(parts)
