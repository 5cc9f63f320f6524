"""A REST statement's text is kept by shape (issue 21): requests that differ only in values
share one text and bind their own values; any difference the text shows is another shape."""

from __future__ import annotations

from typing import Any

import pytest

from relay.gateway import rest_sql
from relay.gateway.rest_grammar import parse_query
from relay.gateway.rest_sql import Render, Slots, Statement, compiled, read_statement, table_ident

NO_CONNECTION: Any = None  # identifiers rendered as psycopg does without one


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rest_sql, "_COMPILED", type(rest_sql._COMPILED)())


def read(items: list[tuple[str, str]]) -> tuple[Statement, Statement]:
    """The statement as the cache gives it, and as built from the query itself."""
    query = parse_query(items)
    source = table_ident("yui_messages")

    def build(q: Any) -> Statement:
        return read_statement(q, from_=source, source=source, count_exact=False, render=Render())

    slots = Slots()
    shape = slots.query(query)
    assert shape is not None
    cached = compiled(NO_CONNECTION, Slots.key(shape), slots.values, lambda: build(shape))
    built = build(query)
    return cached, built


def text(statement: Statement) -> bytes:
    return statement.query.as_bytes(NO_CONNECTION)


def test_same_shape_other_values_share_the_text_and_bind_their_own() -> None:
    first, _ = read([("id", "in.(a,b)"), ("body", "eq.hi"), ("limit", "5")])
    second, built = read([("id", "in.(c,d)"), ("body", "eq.yo"), ("limit", "9")])
    assert second.query is first.query
    assert text(second) == text(built)
    assert second.params == built.params
    assert sorted(map(str, second.params.values())) == ["9", "c", "d", "yo"]


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("in.(a,b)", "in.(a,b,c)"),
        ("is.null", "is.true"),
        ("eq.a", "neq.a"),
        ("eq.a", "not.eq.a"),
        ("fts.a", "fts(english).a"),
    ],
)
def test_what_the_text_shows_is_another_shape(one: str, other: str) -> None:
    first, _ = read([("body", one)])
    second, built = read([("body", other)])
    assert text(second) != text(first)
    assert text(second) == text(built)
    assert second.params == built.params


def test_an_offset_of_zero_is_no_offset() -> None:
    _, _ = read([("offset", "3"), ("order", "id")])
    second, built = read([("offset", "0"), ("order", "id")])
    assert text(second) == text(built)
    assert b"offset" not in text(second)


def test_the_cache_keeps_the_shapes_used_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rest_sql, "STATEMENTS_KEPT", 3)
    for n in range(10):
        read([(f"c{n}", "eq.x")])
    assert len(rest_sql._COMPILED) == 3


def test_a_query_with_embeds_has_no_shape() -> None:
    assert Slots().query(parse_query([("select", "id,yui_agents(name)")])) is None
