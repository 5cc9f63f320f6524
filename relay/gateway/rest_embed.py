"""Embedded resources: `select=id,yui_agents(name)` joins rows of another table along a foreign key.

The relationship is found in the catalog (foreign keys between tables of `public`, either way), as
PostgREST's schema cache would find it, and each embed becomes a LATERAL subquery of the same
statement. So embedded rows are read under the same role, claims and policies as the rows they are
embedded in: an embed never shows a row its reader couldn't select on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from relay.gateway.rest_ast import Embed, Path, SelectItem, Shaping
from relay.gateway.rest_expr import (
    SCHEMA,
    Params,
    ident,
    item_sql,
    order_sql,
    paging_sql,
    table_ident,
    where_sql,
)
from relay.gateway.rest_http import ApiError

# Every foreign key between two tables of the schema that touches one of the named tables: its
# name, the referencing (child) and referenced (parent) tables and columns, and whether the
# child's columns are unique (then the child side is one row too: one-to-one).
_FOREIGN_KEYS_SQL = """
select c.conname::text, child.relname::text, parent.relname::text,
  array(select a.attname::text
        from unnest(c.conkey) with ordinality as k(num, ord)
        join pg_catalog.pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.num
        order by k.ord),
  array(select a.attname::text
        from unnest(c.confkey) with ordinality as k(num, ord)
        join pg_catalog.pg_attribute a on a.attrelid = c.confrelid and a.attnum = k.num
        order by k.ord),
  exists(select from pg_catalog.pg_index i
         where i.indrelid = c.conrelid and i.indisunique and i.indpred is null
           and i.indkey::int2[] @> c.conkey and i.indkey::int2[] <@ c.conkey)
from pg_catalog.pg_constraint c
join pg_catalog.pg_class child on child.oid = c.conrelid
join pg_catalog.pg_namespace cn on cn.oid = child.relnamespace
join pg_catalog.pg_class parent on parent.oid = c.confrelid
join pg_catalog.pg_namespace pn on pn.oid = parent.relnamespace
where c.contype = 'f' and cn.nspname = %(schema)s and pn.nspname = %(schema)s
  and (child.relname = any(%(names)s) or parent.relname = any(%(names)s))
order by c.conname
"""


@dataclass(frozen=True)
class ForeignKey:
    name: str
    child: str
    parent: str
    child_columns: tuple[str, ...]
    parent_columns: tuple[str, ...]
    child_unique: bool

    def describe(self) -> str:
        child = f"{self.child}({', '.join(self.child_columns)})"
        parent = f"{self.parent}({', '.join(self.parent_columns)})"
        return f"{self.name} using {child} and {parent}"


@dataclass(frozen=True)
class Join:
    """How an embed's rows attach to the row they're embedded in."""

    target: str
    to_many: bool
    on: tuple[tuple[str, str], ...]  # (the target's column, the origin's column), pairwise equal


def _joins_along(key: ForeignKey, origin: str, target: str) -> list[tuple[Join, str]]:
    """The ways `key` joins `target` to `origin` (both, for a table that references itself),
    each with its cardinality as PostgREST names it."""
    found = []
    if key.child == origin and key.parent == target:
        on = tuple(zip(key.parent_columns, key.child_columns, strict=True))
        found.append((Join(target, False, on), "many-to-one"))
    if key.parent == origin and key.child == target:
        on = tuple(zip(key.child_columns, key.parent_columns, strict=True))
        many = not key.child_unique
        found.append((Join(target, many, on), "one-to-many" if many else "one-to-one"))
    return found


def choose_join(keys: Sequence[ForeignKey], origin: str, embed: Embed) -> Join:
    """The one relationship `embed` names from `origin`; PGRST200 for none, PGRST201 for more."""
    target = embed.target
    candidates = [
        (join, cardinality, key)
        for key in keys
        if embed.hint is None or embed.hint == key.name or (embed.hint,) == key.child_columns
        for join, cardinality in _joins_along(key, origin, target)
    ]
    if not candidates:
        hint = f" using the hint '{embed.hint}'" if embed.hint else ""
        raise ApiError(
            400,
            "PGRST200",
            f"Could not find a relationship between '{origin}' and '{target}' in the schema cache",
            f"Searched for a foreign key relationship between '{origin}' and '{target}'{hint}"
            f" in the schema '{SCHEMA}', but no matches were found.",
        )
    if len(candidates) > 1:
        listed = "; ".join(f"{card}: {key.describe()}" for _, card, key in candidates)
        options = ", ".join(f"'{target}!{key.name}'" for _, _, key in candidates)
        raise ApiError(
            300,
            "PGRST201",
            f"Could not embed because more than one relationship was found for '{origin}'"
            f" and '{target}'",
            listed,
            f"Try changing '{target}' to one of the following: {options}. Find the desired"
            " relationship in the 'details' key.",
        )
    return candidates[0][0]


def _embeds(items: Iterable[SelectItem]) -> list[Embed]:
    return [item for item in items if isinstance(item, Embed)]


def _tables(origin: str, items: Iterable[SelectItem]) -> set[str]:
    names = {origin}
    for embed in _embeds(items):
        names |= _tables(embed.target, embed.select)
    return names


async def _foreign_keys(conn: psycopg.AsyncConnection, names: set[str]) -> list[ForeignKey]:
    async with conn.cursor() as cursor:
        await cursor.execute(_FOREIGN_KEYS_SQL, {"schema": SCHEMA, "names": sorted(names)})
        found = await cursor.fetchall()
    return [
        ForeignKey(name, child, parent, tuple(child_columns), tuple(parent_columns), unique)
        for name, child, parent, child_columns, parent_columns, unique in found
    ]


async def resolve_joins(
    conn: psycopg.AsyncConnection, origin: str, select: Sequence[SelectItem]
) -> dict[Path, Join]:
    """The join of every embed in the select list, by path; no catalog read when none."""
    if not _embeds(select):
        return {}
    keys = await _foreign_keys(conn, _tables(origin, select))
    joins: dict[Path, Join] = {}

    def walk(table: str, items: Sequence[SelectItem], path: Path) -> None:
        for embed in _embeds(items):
            joins[(*path, embed.name)] = choose_join(keys, table, embed)
            walk(embed.target, embed.select, (*path, embed.name))

    walk(origin, select, ())
    return joins


def join_columns(joins: Mapping[Path, Join]) -> list[str]:
    """The origin's columns its top-level embeds join on (a write returns them for the embeds)."""
    return [origin for path, join in joins.items() if len(path) == 1 for _, origin in join.on]


@dataclass
class Frame:
    """One level of a read: its select list, the LATERAL joins of its embeds (to follow its
    FROM item), the conditions `!inner` adds, and each embed's value by name."""

    select: sql.Composable
    joins: sql.Composable
    inner: list[sql.Composable] = field(default_factory=list)
    embeds: dict[str, sql.Composable] = field(default_factory=dict)


class Planner:
    """Builds the frames of one statement, numbering its embeds' aliases (`_rest_e1`, …)."""

    def __init__(
        self, joins: Mapping[Path, Join], nested: Mapping[Path, Shaping], params: Params
    ) -> None:
        self.joins = joins
        self.nested = nested
        self.params = params
        self.count = 0

    def frame(self, items: Sequence[SelectItem], source: sql.Composable, path: Path = ()) -> Frame:
        select: list[sql.Composable] = []
        laterals: list[sql.Composable] = []
        frame = Frame(sql.SQL(""), sql.SQL(""))
        for item in items:
            if not isinstance(item, Embed):
                select.append(item_sql(item, source, self.params))
                continue
            value, lateral, to_many = self._embed(item, source, (*path, item.name))
            laterals.append(lateral)
            frame.embeds[item.name] = value
            if item.inner:
                frame.inner.append(sql.SQL("{} is not null").format(value))
            if item.select:  # `name()` only filters: it isn't rendered
                rendered = sql.SQL("coalesce({}, '[]'::json)" if to_many else "{}").format(value)
                select.append(sql.SQL("{} as {}").format(rendered, ident(item.name)))
        frame.select = sql.SQL(", ").join(select)
        frame.joins = sql.Composed(laterals)
        return frame

    def _embed(
        self, embed: Embed, source: sql.Composable, path: Path
    ) -> tuple[sql.Composable, sql.Composable, bool]:
        """The embed's value (JSON; null when no row joins), its LATERAL join, and whether it
        is an array."""
        join = self.joins.get(path)
        if join is None:
            raise ApiError(
                400,
                "PGRST200",
                f"Could not find a relationship for '{embed.target}' in the schema cache",
            )
        self.count += 1
        table, row, lateral = (sql.Identifier(f"_rest_{k}{self.count}") for k in "tre")
        inside = self.frame(embed.select, table, path)
        shaping = self.nested.get(path, Shaping())
        on = [
            sql.SQL("{}.{} = {}.{}").format(table, ident(target), source, ident(origin))
            for target, origin in join.on
        ]
        rows = sql.SQL("select {} from {} as {}{}{}{}{}").format(
            inside.select,
            table_ident(join.target),
            table,
            inside.joins,
            where_sql(shaping.conditions, table, self.params, inside.embeds, on + inside.inner),
            order_sql(shaping.order, table, self.params),
            paging_sql(shaping.limit, shaping.offset, self.params),
        )
        render = sql.SQL("json_agg" if join.to_many else "to_json")
        joined = sql.SQL(
            " left join lateral (select {}({}) as value from ({}) as {}) as {} on true"
        ).format(render, row, rows, row, lateral)
        return sql.SQL("{}.value").format(lateral), joined, join.to_many
