"""PostgREST's query grammar, parsed without a database: the AST, and what is refused and why."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from relay.gateway.rest_grammar import (
    Column,
    Embed,
    Field,
    Filter,
    JsonStep,
    Logic,
    OrderTerm,
    Preferences,
    Query,
    Star,
    parse_filter,
    parse_logic,
    parse_order,
    parse_prefer,
    parse_query,
    parse_select,
    wants_csv,
    wants_object,
)
from relay.gateway.rest_http import ApiError, content_range, status_for

META_TURN = Field("meta", (JsonStep("->", "turn"),))


def refusal(parse: Callable[..., object], *args: object) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse(*args)
    return caught.value


# select


def test_select_columns_aliases_paths_and_casts() -> None:
    items = parse_select("id,text:body,meta->turn,meta->>req,meta->a->>b,n::text,*")
    assert items == (
        Column(Field("id")),
        Column(Field("body"), alias="text"),
        Column(META_TURN),
        Column(Field("meta", (JsonStep("->>", "req"),))),
        Column(Field("meta", (JsonStep("->", "a"), JsonStep("->>", "b")))),
        Column(Field("n"), cast="text"),
        Star(),
    )


def columns(select: str) -> list[Column]:
    """`parse_select` of a list that names columns only (no `*`)."""
    items = parse_select(select)
    assert all(isinstance(item, Column) for item in items), items
    return [item for item in items if isinstance(item, Column)]


def test_json_path_output_names_follow_postgrest() -> None:
    first, by_index, aliased, cast = columns("meta->a->b,meta->list->0,x:meta->a,meta->>n::INT")
    assert (first.output_name, by_index.output_name, aliased.output_name) == ("b", "list", "x")
    assert by_index.field.path[-1] == JsonStep("->", 0)
    assert (cast.output_name, cast.cast) == ("n", "int")
    assert columns("meta->0")[0].output_name == "meta"
    assert columns('meta->"0"')[0].field.path == (JsonStep("->", "0"),)


def test_select_quoted_names_and_spaces() -> None:
    assert parse_select('"odd,name", body') == (Column(Field("odd,name")), Column(Field("body")))
    assert parse_select("") == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("id;drop table x", "unexpected ';'"),
        ("...author(name)", "spreading an embedded resource"),
        ("author!a!b(name)", "two hints"),
        ("author(name", "expected ')'"),
        ("author(name))", "unexpected ')'"),
        ("n::text;drop", "is not a type name"),
        ("meta->>a->b", "->> must be the last step"),
        ('"unterminated', "unterminated quoted string"),
    ],
)
def test_select_refusals(text: str, problem: str) -> None:
    error = refusal(parse_select, text)
    assert (error.status, error.code) == (400, "PGRST100")
    assert problem in error.message
    assert text in error.message


def test_embedded_resources_with_aliases_hints_inner_and_nesting() -> None:
    items = parse_select("id,agent:yui_agents!agent_id!inner(name,yui_users(*)),yui_threads()")
    assert items == (
        Column(Field("id")),
        Embed(
            "yui_agents",
            (Column(Field("name")), Embed("yui_users", (Star(),))),
            alias="agent",
            hint="agent_id",
            inner=True,
        ),
        Embed("yui_threads", ()),
    )
    assert parse_select("a!left(n::text)") == (Embed("a", (Column(Field("n"), cast="text"),)),)


@pytest.mark.parametrize("text", ["count()", "id.count()", "n.sum(),id", "yui_agents(count())"])
def test_aggregates_are_refused_as_postgrest_does_by_default(text: str) -> None:
    error = refusal(parse_select, text)
    assert (error.status, error.code) == (400, "PGRST123")


def test_nested_keys_shape_the_embed_they_name() -> None:
    query = parse_query(
        [
            ("select", "id,agent:yui_agents(name,yui_users(id))"),
            ("agent.name", "eq.x"),
            ("agent.order", "name.desc"),
            ("agent.limit", "2"),
            ("agent.yui_users.not.or", "(id.eq.1,id.eq.2)"),
            ('meta->"a.b"', "eq.1"),  # a JSON path with a dot is no embed
        ]
    )
    agent = query.nested[("agent",)]
    assert agent.conditions == (Filter(Field("name"), "eq", "x"),)
    assert (agent.order, agent.limit) == ((OrderTerm(Field("name"), descending=True),), 2)
    users = query.nested[("agent", "yui_users")].conditions
    assert users == (
        Logic("or", (Filter(Field("id"), "eq", "1"), Filter(Field("id"), "eq", "2")), True),
    )
    assert query.conditions == (Filter(Field("meta", (JsonStep("->", "a.b"),)), "eq", "1"),)


def test_a_nested_key_naming_no_embed_is_pgrst108() -> None:
    error = refusal(parse_query, [("select", "id,yui_agents(name)"), ("author.name", "eq.1")])
    assert (error.status, error.code) == (400, "PGRST108")
    assert "'author' is not an embedded resource" in error.message


# filters


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("id", "eq.5", Filter(Field("id"), "eq", "5")),
        ("body", "eq.a.b,c", Filter(Field("body"), "eq", "a.b,c")),
        ("body", "eq.", Filter(Field("body"), "eq", "")),
        ("n", "not.gte.3", Filter(Field("n"), "gte", "3", negated=True)),
        ("body", "like.*ourth*", Filter(Field("body"), "like", "%ourth%")),
        ("body", "ilike.A*", Filter(Field("body"), "ilike", "A%")),
        ("n", "is.NULL", Filter(Field("n"), "is", "null")),
        ("done", "is.true", Filter(Field("done"), "is", "true")),
        (
            "meta->mentioned",
            "not.is.null",
            Filter(Field("meta", (JsonStep("->", "mentioned"),)), "is", "null", negated=True),
        ),
        ("meta->>req", "eq.x", Filter(Field("meta", (JsonStep("->>", "req"),)), "eq", "x")),
        ("meta->turn", 'cs.["a","b"]', Filter(META_TURN, "cs", '["a","b"]')),
        ("tags", "cd.{a,b}", Filter(Field("tags"), "cd", "{a,b}")),
        ("id", "in.(a,b)", Filter(Field("id"), "in", ("a", "b"))),
        ("id", 'in.("c,d",e,"f\\"g",)', Filter(Field("id"), "in", ("c,d", "e", 'f"g', ""))),
        ("id", "in.()", Filter(Field("id"), "in", ())),
        ("id", "not.in.(1)", Filter(Field("id"), "in", ("1",), negated=True)),
        ("n", "isdistinct.2", Filter(Field("n"), "isdistinct", "2")),
        ("body", "fts.cat", Filter(Field("body"), "fts", "cat")),
        ("body", "wfts(english).a b", Filter(Field("body"), "wfts", "a b", config="english")),
        ("body", "not.phfts(simple).x", Filter(Field("body"), "phfts", "x", True, "simple")),
        ("body", "like(any).{a*,b*}", Filter(Field("body"), "like", "{a%,b%}", quantifier="any")),
        ("r", "adj.[1,2)", Filter(Field("r"), "adj", "[1,2)")),
    ],
)
def test_filters(key: str, value: str, expected: Filter) -> None:
    assert parse_filter(key, value) == expected


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("id", "foo.1", "unknown operator 'foo'"),
        ("id", "eq(english).1", "unknown operator 'eq(english)'"),
        ("id", "fts().1", "unknown operator 'fts()'"),
        ("id", "in(any).(1)", "unknown operator 'in(any)'"),
        ("id", "5", "expected <operator>.<value>"),
        ("id", "in.1,2", "enclosed in parentheses"),
        ("id", "in.(1,2", "malformed in list"),
        ("id", 'in.("a"b)', "malformed in list"),
        ("id", "in.(1)x", "unexpected text after the in list"),
        ("id", "is.maybe", "is takes null, true, false or unknown"),
        ("id;drop table x", "eq.1", "unexpected ';' in the column"),
        ("author.name", "eq.1", "unexpected '.'"),
        ("", "eq.1", "expected a name"),
    ],
)
def test_filter_refusals(key: str, value: str, problem: str) -> None:
    error = refusal(parse_filter, key, value)
    assert (error.status, error.code) == (400, "PGRST100")
    assert problem in error.message
    assert f"{key}={value}" in error.message


# logic trees


def test_logic_trees_nest_and_quote() -> None:
    tree = parse_logic(
        "or",
        '(n.eq.1,and(n.is.null,not.or(done.is.true,body.eq."a,b")),'
        'meta->turn.cs.["x","y"],id.in.(1,"2,3"),tags.cs.{a,b})',
    )
    assert tree == Logic(
        "or",
        (
            Filter(Field("n"), "eq", "1"),
            Logic(
                "and",
                (
                    Filter(Field("n"), "is", "null"),
                    Logic(
                        "or",
                        (Filter(Field("done"), "is", "true"), Filter(Field("body"), "eq", "a,b")),
                        negated=True,
                    ),
                ),
            ),
            Filter(META_TURN, "cs", '["x","y"]'),
            Filter(Field("id"), "in", ("1", "2,3")),
            Filter(Field("tags"), "cs", "{a,b}"),
        ),
    )


def test_negated_logic_keys() -> None:
    assert parse_logic("not.and", "(a.gt.1,b.not.lt.2)") == Logic(
        "and",
        (Filter(Field("a"), "gt", "1"), Filter(Field("b"), "lt", "2", negated=True)),
        negated=True,
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("a.eq.1", "expected '('"),
        ("(a.eq.1", "expected ','"),
        ("(a.eq.1))", "unexpected text after the closing parenthesis"),
        ("()", "expected a name"),
        ("(a.zz.1)", "unknown operator 'zz'"),
        ("(a.cs.[1,2)", "unbalanced brackets"),
        ("(a.eq.1,rel(b.eq.2))", "embedded resources"),
    ],
)
def test_logic_refusals(value: str, problem: str) -> None:
    error = refusal(parse_logic, "or", value)
    assert (error.status, error.code) == (400, "PGRST100")
    assert problem in error.message


# order


def test_order_terms() -> None:
    assert parse_order("created_at.asc,id.desc.nullslast,meta->>n.nullsfirst,body") == (
        OrderTerm(Field("created_at")),
        OrderTerm(Field("id"), descending=True, nulls="last"),
        OrderTerm(Field("meta", (JsonStep("->>", "n"),)), nulls="first"),
        OrderTerm(Field("body")),
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("id.sideways", "unknown order modifier 'sideways'"),
        ("id.asc.desc", "unknown order modifier 'desc'"),
        ("id.nullslast.asc", "unknown order modifier 'asc'"),
        ("id.", "unknown order modifier ''"),
        ("id;drop", "unexpected ';'"),
        ("author(name).asc", "embedded resources"),
    ],
)
def test_order_refusals(value: str, problem: str) -> None:
    error = refusal(parse_order, value)
    assert (error.status, error.code) == (400, "PGRST100")
    assert problem in error.message


# the whole query string


def test_query_sorts_parameters_into_their_roles() -> None:
    query = parse_query(
        [
            ("select", "id,body"),
            ("agent_id", "eq.7"),
            ("handled_at", "is.null"),
            ("order", "created_at.asc,id.asc"),
            ("limit", "200"),
            ("offset", "5"),
            ("or", "(a.eq.1,b.eq.2)"),
            ("on_conflict", "user_id,row_key"),
            ("columns", "a,b"),
        ]
    )
    assert query.select == (Column(Field("id")), Column(Field("body")))
    assert query.conditions == (
        Filter(Field("agent_id"), "eq", "7"),
        Filter(Field("handled_at"), "is", "null"),
        Logic("or", (Filter(Field("a"), "eq", "1"), Filter(Field("b"), "eq", "2"))),
    )
    assert (query.limit, query.offset) == (200, 5)
    assert query.on_conflict == ("user_id", "row_key")
    assert query.columns == ("a", "b")
    assert query.shapes_rows
    assert parse_query([]) == Query()
    assert not Query().shapes_rows


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("limit", "ten", "expected a non-negative integer"),
        ("limit", "-1", "expected a non-negative integer"),
        ("offset", "1.5", "expected a non-negative integer"),
        ("body", "eq.a\x00b", "NUL characters are not allowed"),
    ],
)
def test_query_refusals(key: str, value: str, problem: str) -> None:
    error = refusal(parse_query, [(key, value)])
    assert (error.status, error.code) == (400, "PGRST100")
    assert problem in error.message


# headers


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("", Preferences()),
        ("return=representation", Preferences(returning="representation")),
        (
            "return=headers-only, count=exact",
            Preferences(returning="headers-only", count_exact=True),
        ),
        ("resolution=merge-duplicates,return=minimal", Preferences(resolution="merge-duplicates")),
        ("resolution=ignore-duplicates", Preferences(resolution="ignore-duplicates")),
        ("return=bogus, tx=rollback", Preferences()),
        ("count=planned", Preferences(count_exact=True)),
        ("count=estimated, missing=default", Preferences(count_exact=True, missing_default=True)),
    ],
)
def test_prefer(header: str, expected: Preferences) -> None:
    assert parse_prefer(header) == expected


@pytest.mark.parametrize(
    ("accept", "single"),
    [
        ("", False),
        ("application/json", False),
        ("*/*", False),
        ("text/html,application/xhtml+xml,*/*;q=0.8", False),
        ("application/vnd.pgrst.object+json", True),
        ("application/vnd.pgrst.object+json;nulls=stripped", True),
    ],
)
def test_accept(accept: str, single: bool) -> None:
    assert wants_object(accept) is single


def test_accept_refuses_other_media_types() -> None:
    error = refusal(wants_object, "text/html")
    assert (error.status, error.code) == (406, "PGRST107")
    assert wants_csv("text/csv") and not wants_object("text/csv")
    assert not wants_csv("application/json, text/csv")


# responses


@pytest.mark.parametrize(
    ("sqlstate", "role", "status"),
    [
        ("23505", "yui_user", 409),
        ("23503", "yui_user", 409),
        ("23514", "yui_user", 400),
        ("23502", "yui_user", 400),
        ("22023", "yui_user", 400),
        ("22P02", "yui_user", 400),
        ("P0001", "yui_user", 400),
        ("P0002", "yui_user", 500),
        ("42703", "yui_user", 400),
        ("42501", "anon", 401),
        ("42501", "yui_connector", 403),
        ("42P01", "anon", 404),
        ("42883", "yui_user", 404),
        ("PT429", "yui_user", 429),
        ("PT403", "yui_user", 403),
        ("PTxyz", "yui_user", 500),
        ("08006", "yui_user", 503),
        ("53300", "yui_user", 503),
        ("53400", "yui_user", 500),
        ("54001", "yui_user", 413),
        ("40001", "yui_user", 500),
        ("25006", "yui_user", 405),
        ("25P02", "yui_user", 500),
        ("57014", "yui_user", 500),
        ("XX000", "yui_user", 500),
        ("28000", "yui_user", 403),
    ],
)
def test_status_for_sqlstate(sqlstate: str, role: str, status: int) -> None:
    assert status_for(sqlstate, role) == status


def test_content_range() -> None:
    assert content_range(0, 25, None) == "0-24/*"
    assert content_range(10, 5, 100) == "10-14/100"
    assert content_range(0, 0, None) == "*/*"
    assert content_range(0, 0, 0) == "*/0"


def test_api_error_response_shape() -> None:
    response = ApiError(404, "PGRST202", "Could not find it", "details").response()
    assert response.status == 404
    assert response.headers == {"content-type": "application/json; charset=utf-8"}
    assert response.body == (
        b'{"code": "PGRST202", "details": "details", "hint": null, "message": "Could not find it"}'
    )
