"""Fuzzing the gateway's PostgREST grammar: alone (pure, fast) and through the real gateway.

Alone: whatever the query string, `Prefer`, `Accept` or body, `rest_grammar` returns its AST (which
always builds SQL) or raises `ApiError` 400 (406 for `Accept`), never anything else.

Through the session's relay, over HTTP, with a person's token, a host's session token, no token
or a forged one: random filters, logic trees, JSON paths, casts, orders, paging, selects, Prefer
and Accept headers, and random JSON bodies for POST/PATCH on `yui_messages`, `yui_limits` and
`rpc/<name>`. The status is never 5xx; every 4xx is PostgREST's JSON error with `code` and
`message`; a refused request changes nothing (the person's rows, the limits, their rate buckets);
and the rows written before the fuzz are all there afterwards, unchanged.

The regression tests at the end pin what the fuzz found, now fixed.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest
import requests
from hypothesis import event, given
from hypothesis import strategies as st

from relay.gateway.rest_grammar import (
    Query,
    decode_json,
    parse_prefer,
    parse_query,
    wants_object,
)
from relay.gateway.rest_http import ApiError
from relay.gateway.rest_sql import (
    delete_statement,
    insert_statement,
    read_statement,
    table_ident,
    update_statement,
)
from tests.helpers.fuzzing import fuzz_settings, json_values, tricky_text
from tests.helpers.relay import Host, LocalRelay

PARSER_EXAMPLES = 600
HTTP_EXAMPLES = 200

# Inputs behind findings the fuzz made (each fixed, each pinned by a regression test below).
DEEP = 400  # finding R1/R3: logic trees and JSON bodies nested this deep overflow the stack
HUGE_DIGITS = "9" * 4400  # finding R2: an index, limit or offset past Python's 4300 digits


# Built on demand (st.builds), so hypothesis never spends time printing their huge reprs.
def _huge_digits() -> str:
    return HUGE_DIGITS


def _deep_tree() -> str:
    return "(" + "and(" * DEEP + "id.eq.1" + ")" * (DEEP + 1)


def _deep_json() -> bytes:
    return b"[" * 100_000


UNKNOWN_CAST = "unknown"  # finding R4: `col::unknown` is Postgres's XX000, a 500
OTHER_METHODS = ["PUT", "OPTIONS"]  # finding R5: Starlette's plain-text 405, not PostgREST's
# finding R6: a body key that is a lone surrogate (`{"\\ud800": 1}`) is a 500; keys keep none
# finding R7: a table or function name with a line feed inside gets Starlette's plain-text 404


# --- the grammar, as strategies ---------------------------------------------------------------

COLUMNS = ["id", "user_id", "agent_id", "sender", "body", "kind", "meta", "created_at"]
COLUMNS += ["delivered_at", "handled_at", "name", "value", "note", "nope"]
OPERATORS = ["eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "match", "imatch", "cs"]
OPERATORS += ["cd", "ov", "isdistinct", "in", "is", "fts", "plfts", "phfts", "wfts", "sl", "sr"]
BAD_OPERATORS = ["EQ", "", "not", "eq.eq", "fts(", "slx"]
# Real type names (pseudo-types included), a keyword alias and nonsense.
TYPES = ["text", "int", "integer", "bigint", "float", "numeric", "bool", "boolean", "json"]
TYPES += ["jsonb", "uuid", "date", "timestamptz", "interval", "bytea", "xml", "money", "inet"]
TYPES += ["regclass", "regproc", "regtype", "regrole", "oid", "xid", "tid", "pg_lsn", "tsvector"]
TYPES += ["cstring", "internal", "record", "void", "trigger", "anyelement", "anyarray"]
TYPES += ["pg_node_tree", "pg_snapshot", "aclitem", "int2vector", "char", "name", "nope"]
TYPES += [UNKNOWN_CAST]
COUNTS = ["0", "1", "2", "10", "-1", "1.5", "", "a", "٣", "1e3", " 1", "9" * 20]
COUNTS += [HUGE_DIGITS]

digits = st.text("0123456789-", min_size=1, max_size=25)
plain = st.text("abcxyz019_ -", min_size=1, max_size=8)
tame = st.sampled_from(["hi", "x", "1", "0", "turn", "2020-01-01", "user", "text"])


def grammar(odd: st.SearchStrategy[str]) -> st.SearchStrategy[list[tuple[str, str]]]:
    """Query strings whose free text is `odd` (tricky) or plain (mostly well-formed)."""
    names = st.one_of(
        st.sampled_from(COLUMNS),
        st.sampled_from(COLUMNS),
        odd,
        odd.map(lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    )
    json_keys = st.one_of(
        st.sampled_from(["turn", "op", "a", "0", "1", "-1", "x y", "->", '"a.b"']),
        digits,
        odd,
        st.builds(_huge_digits),
    )
    paths = st.builds(
        lambda column, keys, last: column + "".join("->" + key for key in keys) + last,
        names,
        st.lists(json_keys, max_size=2),
        st.one_of(
            st.just(""), json_keys.map(lambda k: "->" + k), json_keys.map(lambda k: "->>" + k)
        ),
    )
    early = st.builds(lambda f, k: f"{f}->>{k}->{k}", names, json_keys)  # ->> before the end
    fields = st.one_of(paths, paths, paths, early)
    operators = st.one_of(
        st.sampled_from(OPERATORS), st.sampled_from(OPERATORS), st.sampled_from(BAD_OPERATORS), odd
    )
    values = st.one_of(
        odd,
        st.sampled_from(["null", "true", "false", "unknown", "NULL", "{}", "[]", '{"a":1}', "*"]),
        st.lists(odd, max_size=4).map(lambda items: "(" + ",".join(items) + ")"),
        st.lists(odd, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(odd, max_size=3).map(lambda items: "{" + ",".join(items) + "}"),
        st.sampled_from(["(", ")", '("a,b",c)', '"x"', "[", "{", '{"a":"}"}']),
    )
    negation = st.sampled_from(["", "", "not.", "not.not."])
    filter_values = st.builds(lambda n, o, v: f"{n}{o}.{v}", negation, operators, values)
    conditions = st.builds(lambda f, v: f"{f}.{v}", fields, filter_values)
    trees = st.recursive(
        conditions,
        lambda inner: st.builds(
            lambda n, op, children: f"{n}{op}(" + ",".join(children) + ")",
            negation,
            st.sampled_from(["and", "or", "and", "or", "AND", "xor"]),
            st.lists(inner, min_size=1, max_size=3),
        ),
        max_leaves=8,
    )
    logic_values = st.one_of(
        st.lists(trees, min_size=1, max_size=3).map(lambda items: "(" + ",".join(items) + ")"),
        odd,
        st.builds(_deep_tree),
    )
    select_items = st.one_of(
        st.just("*"),
        fields,
        st.builds(lambda a, f: f"{a}:{f}", names, fields),
        st.builds(lambda f, t: f"{f}::{t}", fields, st.sampled_from(TYPES) | odd),
        st.sampled_from(["x(y)", "x!inner(y)", "count()", "...x", " *", "*,*", "a:", ":a"]),
        odd,
    )
    selects = st.lists(select_items, max_size=4).map(",".join)
    modifiers = [".asc", ".desc", ".nullsfirst", ".desc.nullslast", ".x", ".", ".asc.asc", ""]
    order_terms = st.builds(lambda f, m: f + m, fields, st.sampled_from(modifiers))
    orders = st.lists(order_terms, min_size=1, max_size=3).map(",".join) | odd
    param = st.one_of(
        st.tuples(fields, filter_values),
        st.tuples(fields, filter_values),
        st.tuples(st.sampled_from(["or", "and", "not.or", "not.and"]), logic_values),
        st.tuples(st.just("select"), selects),
        st.tuples(st.just("order"), orders),
        st.tuples(
            st.sampled_from(["limit", "offset"]),
            st.integers(0, 10**6).map(str) | st.sampled_from(COUNTS) | digits,
        ),
        st.tuples(
            st.sampled_from(["columns", "on_conflict"]),
            st.lists(names, min_size=1, max_size=3).map(",".join) | odd,
        ),
    )
    return st.lists(param | st.tuples(odd, odd), max_size=4) | st.lists(param, max_size=3)


def _replace_surrogates(text: str) -> str:
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


# A query string reaches the parser decoded by Starlette, invalid UTF-8 as U+FFFD: never a lone
# surrogate. (In a JSON body one can arrive: finding R6.)
query_strings = st.one_of(grammar(plain), grammar(plain), grammar(tricky_text)).map(
    lambda params: [(_replace_surrogates(k), _replace_surrogates(v)) for k, v in params]
)

prefer_tokens = st.sampled_from(
    [
        "return=representation",
        "return=minimal",
        "return=headers-only",
        "return=",
        "count=exact",
        "count=planned",
        "resolution=merge-duplicates",
        "resolution=ignore-duplicates",
        "missing=default",
        "tx=rollback",
        "handling=strict",
        "=",
        "",
    ]
)
prefers = st.lists(prefer_tokens | tricky_text, max_size=4).map(", ".join)
accepts = st.one_of(
    st.sampled_from(
        [
            "",
            "*/*",
            "application/json",
            "application/vnd.pgrst.object+json",
            "application/vnd.pgrst.object",
            "text/csv",
            "application/geo+json",
            "application/json;q=0.1, text/html",
            "APPLICATION/JSON",
            "application/*",
            ",",
            ";",
        ]
    ),
    tricky_text,
)


# --- the parser alone -------------------------------------------------------------------------


def _check_refusal(exc: ApiError, statuses: tuple[int, ...] = (400,)) -> None:
    assert exc.status in statuses, (exc.status, exc.code, exc.message)
    assert exc.code.startswith("PGRST") and exc.message.strip()


def _statements(query: Query) -> None:
    """Every statement the gateway may build from a parsed query renders as SQL."""
    table = table_ident("yui_messages")
    read_statement(query, from_=table, source=table, count_exact=True).query.as_string(None)
    update_statement("yui_messages", ["body"], "{}", query, representation=True).query.as_string(
        None
    )
    delete_statement("yui_messages", query, representation=False).query.as_string(None)
    columns = list(query.columns or ["body"])
    insert_statement(
        "yui_messages",
        columns,
        "[]",
        query,
        representation=True,
        resolution="merge-duplicates",
        conflict_columns=list(query.on_conflict or ["id"]),
    ).query.as_string(None)


@fuzz_settings(PARSER_EXAMPLES)
@given(params=query_strings)
def test_any_query_string_parses_or_is_a_400(params: list[tuple[str, str]]) -> None:
    """An AST that builds SQL, or ApiError 400; never another exception."""
    try:
        query = parse_query(params)
        _statements(query)
    except ApiError as exc:
        _check_refusal(exc)
        event("refused")
        return
    event("parsed")
    assert isinstance(query, Query)


@fuzz_settings(PARSER_EXAMPLES // 2)
@given(prefer=prefers | st.text(), accept=accepts | st.text())
def test_any_prefer_or_accept_header_is_read_or_a_406(prefer: str, accept: str) -> None:
    """Prefer never fails (unknown preferences are ignored); Accept is a bool or 406."""
    prefs = parse_prefer(prefer)
    assert prefs.returning in ("minimal", "representation", "headers-only")
    try:
        assert wants_object(accept) in (True, False)
    except ApiError as exc:
        _check_refusal(exc, (406,))


bodies = st.one_of(
    json_values().map(lambda v: json.dumps(v).encode()),
    json_values().map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.binary(max_size=100),
    st.sampled_from([b"", b"\xef\xbb\xbf{}", b"\x00", b"{", b"1" * 5000, b"NaN", b"[" * 50]),
    st.builds(_deep_json),
)


@fuzz_settings(PARSER_EXAMPLES // 2)
@given(body=bodies)
def test_any_body_decodes_or_is_a_400(body: bytes) -> None:
    try:
        text, value = decode_json(body)
    except ApiError as exc:
        _check_refusal(exc)
        return
    assert isinstance(text, str)
    assert value is None or isinstance(value, bool | int | float | str | list | dict)


# --- through the real gateway -----------------------------------------------------------------


@dataclass
class World:
    """A person with one agent on a paired host, and the rows written before the fuzz."""

    relay: LocalRelay
    person_id: str
    person_token: str
    host_token: str
    connector_id: str
    agent_id: str
    seeded: dict[str, tuple[Any, ...]] = field(default_factory=dict)


SEED_COLUMNS = "id::text, user_id::text, agent_id::text, sender, body, kind, meta::text"
SINGLE = "application/vnd.pgrst.object+json"
RPC_NAMES = ["yui_uid", "yui_cid", "yui_claims", "yui_claim_uuid", "yui_owns_agent"]
RPC_NAMES += ["yui_connector_serves", "yui_media_agent", "yui_media_quota_ok", "yui_limit"]
RPC_NAMES += ["yui_take", "yui_suspend", "yui_messages_guard", "yui_presence", "nope", "pg_sleep"]


@pytest.fixture(scope="module")
def world(relay: LocalRelay) -> World:
    person = relay.person("Fuzz person")
    agent, code = person.add_agent("Fuzz agent")
    host = Host.pair(relay, code, ref="fuzz")
    bodies = ["hi", 'quotes " and \\ and | = 🙂', "x" * 32_000]
    for body in bodies:
        assert person.say(agent, body).status_code == 201
    for body in ["hello", "a reply\nover two lines"]:
        assert host.reply(agent, body).status_code == 201
    rows = relay.sql(f"select {SEED_COLUMNS} from yui_messages where user_id = %s", (person.id,))
    assert len(rows) == 5
    return World(
        relay,
        person.id,
        person.token,
        host.jwt,
        host.connector["id"],
        agent["id"],
        {row[0]: row for row in rows},
    )


def digest(world: World) -> str:
    """A hash of everything a refused request must leave alone."""
    buckets = [f"msg:u:{world.person_id}", f"msg:c:{world.connector_id}"]
    rows = world.relay.sql(
        "select (select coalesce(string_agg(m::text, '|' order by m.id), '')"
        "        from yui_messages m where m.user_id = %s),"
        " (select string_agg(l::text, '|' order by l.name) from yui_limits l),"
        " (select coalesce(string_agg(b::text, '|' order by b.key), '')"
        "        from yui_rate_buckets b where b.key = any(%s))",
        (world.person_id, buckets),
    )
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@dataclass(frozen=True)
class Call:
    who: str  # "person" | "host" | "anon" | "forged"
    method: str
    target: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


def _header_value(text: str) -> str:
    """What HTTP lets a header value hold (RFC 9110: visible Latin-1, inner spaces and tabs);
    anything else never reaches the gateway (the HTTP server refuses the request)."""
    kept = "".join(
        ch if ch == "\t" or " " <= ch <= "~" or "\xa0" <= ch <= "\xff" else "?" for ch in text
    )
    return kept.strip(" \t")


def _path_part(text: str) -> str:
    # dots encoded too, or the client would resolve `..` and leave /rest/v1/
    return quote(text, safe="", errors="surrogatepass").replace(".", "%2E")


def _encode(params: list[tuple[str, str]]) -> str:
    return "&".join(
        quote(k, safe="", errors="surrogatepass") + "=" + quote(v, safe="", errors="surrogatepass")
        for k, v in params
    )


def calls(world: World) -> st.SearchStrategy[Call]:
    """Requests as a client might send them, right or wrong, with this world's ids in reach."""
    ids = [world.person_id, world.agent_id, *world.seeded, str(uuid.uuid4()), "not-a-uuid"]
    row_values = {
        "id": st.sampled_from(ids) | st.uuids().map(str),
        "user_id": st.sampled_from(ids),
        "agent_id": st.sampled_from(ids),
        "sender": st.sampled_from(["user", "agent", "host", ""]),
        "body": tricky_text | st.just("y" * 32_001),
        "kind": st.sampled_from(["text", "event", "control", "nope"]),
        "meta": json_values(6),
        "created_at": st.sampled_from(["2020-01-01T00:00:00Z", "now", "", "infinity"]),
        "handled_at": st.sampled_from(["2020-01-01T00:00:00Z", "yesterday", None]),
        "delivered_at": st.sampled_from(["2020-01-01T00:00:00Z", None]),
        "name": st.sampled_from(["msg_user_burst", "x"]) | tricky_text,
        "value": json_values(2),
        "note": tricky_text,
    }
    rows = st.fixed_dictionaries(
        {}, optional={**row_values, "extra": json_values(3), "": st.none()}
    ) | st.dictionaries(tricky_text, json_values(3), max_size=3)
    json_bodies = st.one_of(
        rows,
        st.lists(rows, max_size=3),
        json_values(),
        st.dictionaries(tricky_text, json_values(4), max_size=4),  # rpc arguments
    ).map(lambda v: json.dumps(v).encode())
    body_bytes = st.one_of(json_bodies, json_bodies, bodies)
    tables = st.sampled_from(["yui_messages"] * 3 + ["yui_limits"])
    targets = st.one_of(
        tables,
        tables,
        tables,
        tables,
        st.sampled_from(RPC_NAMES).map(lambda n: f"rpc/{n}"),
        st.sampled_from(RPC_NAMES).map(lambda n: f"rpc/{n}"),
        tricky_text.map(lambda t: "rpc/" + _path_part(t)),
        st.sampled_from(["", "rpc/", "yui_agents", "yui_users", "pg_class", "yui_limits/x"]),
        tricky_text.map(_path_part),
    )
    raw_queries = st.sampled_from(["%ZZ=1", "a=%", "%00=eq.1", "select=%ff", "&&=&", "a", "=="])
    queries = st.one_of(
        grammar(tame).map(_encode),
        grammar(tame).map(_encode),
        grammar(plain).map(_encode),
        query_strings.map(_encode),
        raw_queries,
    )
    hostile_headers = st.lists(
        st.one_of(
            st.tuples(st.just("prefer"), prefers),
            st.tuples(st.just("accept"), accepts),
            st.tuples(st.sampled_from(["accept-profile", "content-profile"]), tricky_text),
            st.tuples(st.just("content-type"), st.sampled_from(["text/plain", "", "a/b"])),
            st.tuples(st.just("range"), st.sampled_from(["0-1", "items=0-0", "x"])),
        ),
        max_size=3,
    ).map(lambda pairs: tuple((name, _header_value(value)) for name, value in pairs))
    good_headers = st.lists(
        st.tuples(st.just("prefer"), st.lists(prefer_tokens, max_size=3).map(", ".join))
        | st.tuples(st.just("accept"), st.sampled_from(["application/json", "*/*", SINGLE])),
        max_size=2,
    ).map(tuple)
    headers = st.one_of(st.just(()), good_headers, hostile_headers)

    @st.composite
    def build(draw: st.DrawFn) -> Call:
        who = draw(st.sampled_from(["person"] * 5 + ["host"] * 3 + ["anon", "forged"]))
        methods = ["GET", "HEAD", "POST", "PATCH", *OTHER_METHODS]
        if who != "person":  # only the person may delete: a good delete is no refusal
            methods.append("DELETE")
        method = draw(st.sampled_from(methods))
        body = draw(body_bytes) if method in ("POST", "PATCH", "PUT") else b""
        return Call(who, method, draw(targets), draw(queries), draw(headers), body)

    return build()


def send(world: World, call: Call) -> requests.Response:
    headers = {"content-type": "application/json", "apikey": world.relay.anon_key}
    token = {
        "person": world.person_token,
        "host": world.host_token,
        "forged": "eyJhbGciOiJIUzI1NiJ9.eyJyb2xlIjoic2VydmljZV9yb2xlIn0.forged",
    }.get(call.who)
    if token:
        headers["authorization"] = f"Bearer {token}"
    headers.update(dict(call.headers))
    url = f"{world.relay.url}/rest/v1/{call.target}" + (f"?{call.query}" if call.query else "")
    return requests.request(call.method, url, data=call.body, headers=headers, timeout=30)


def check_response(call: Call, response: requests.Response) -> None:
    """Never 5xx; every 4xx is PostgREST's JSON error."""
    status = response.status_code
    assert status < 500, (status, response.text[:300])
    if status >= 400 and call.method != "HEAD":
        error = response.json()
        assert isinstance(error, dict), response.text[:300]
        assert isinstance(error.get("code"), str) and error["code"], response.text[:300]
        assert isinstance(error.get("message"), str) and error["message"], response.text[:300]


def test_the_gateway_answers_any_request_without_5xx_or_loss(world: World) -> None:
    """No 5xx, JSON errors, refusals change nothing, and the seeded rows survive."""
    statuses: dict[int, int] = {}

    @fuzz_settings(HTTP_EXAMPLES)
    @given(call=calls(world))
    def fuzz(call: Call) -> None:
        before = digest(world)
        response = send(world, call)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        event(f"{call.method} {response.status_code}")
        check_response(call, response)
        if response.status_code >= 400:
            assert digest(world) == before, f"a refused {call.method} changed rows: {call}"

    fuzz()
    print(f"rest fuzz: {sum(statuses.values())} requests, by status {sorted(statuses.items())}")
    rows = world.relay.sql(
        f"select {SEED_COLUMNS} from yui_messages where id = any(%s::uuid[])", (list(world.seeded),)
    )
    assert {row[0]: row for row in rows} == world.seeded
    assert sum(n for s, n in statuses.items() if s < 300) > 0, statuses  # not all refused


# --- regression tests for the findings --------------------------------------------------------


def _get(world: World, query: str, method: str = "GET", body: bytes = b"") -> requests.Response:
    call = Call("person", method, "yui_messages", query, (), body)
    return send(world, call)


def _assert_refused_as_json(response: requests.Response, status: int = 400) -> None:
    assert response.status_code == status, (response.status_code, response.text[:200])
    assert response.json()["code"] and response.json()["message"]


@pytest.mark.parametrize("depth", [DEEP, 1000])
def test_r1_a_deeply_nested_logic_tree_is_a_400(world: World, depth: int) -> None:
    tree = "(" + "and(" * depth + "id.eq.1" + ")" * (depth + 1)
    _assert_refused_as_json(_get(world, "or=" + quote(tree)))


def test_r1_the_parser_refuses_a_deep_logic_tree() -> None:
    tree = "(" + "and(" * DEEP + "id.eq.1" + ")" * (DEEP + 1)
    with pytest.raises(ApiError) as refused:
        parse_query([("or", tree)])
    assert refused.value.status == 400


@pytest.mark.parametrize(
    "query",
    [
        f"meta->{HUGE_DIGITS}=eq.1",
        f"select=meta->{HUGE_DIGITS}",
        f"order=meta->{HUGE_DIGITS}",
        f"limit={HUGE_DIGITS}",
        f"offset={HUGE_DIGITS}",
    ],
)
def test_r2_a_huge_index_limit_or_offset_is_a_400(world: World, query: str) -> None:
    _assert_refused_as_json(_get(world, query))


@pytest.mark.parametrize(
    ("who", "method", "target"),
    [
        ("person", "POST", "yui_messages"),
        ("host", "PATCH", "yui_messages"),
        ("person", "POST", "rpc/yui_uid"),
    ],
)
def test_r3_a_deeply_nested_body_is_a_400(world: World, who: str, method: str, target: str) -> None:
    query = "id=eq." + next(iter(world.seeded)) if method == "PATCH" else ""
    call = Call(who, method, target, query, (), b"[" * 100_000)
    _assert_refused_as_json(send(world, call))


@pytest.mark.parametrize("select", ["body::unknown", "meta->>turn::unknown"])
def test_r4_a_cast_to_unknown_is_a_4xx(world: World, select: str) -> None:
    response = _get(world, "select=" + quote(select))
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:200])


@pytest.mark.parametrize("method", OTHER_METHODS)
def test_r5_an_unsupported_method_is_postgrests_json_405(world: World, method: str) -> None:
    _assert_refused_as_json(_get(world, "", method=method, body=b"{}"), status=405)


@pytest.mark.parametrize(("who", "method"), [("person", "POST"), ("host", "PATCH")])
def test_r6_a_lone_surrogate_key_in_a_body_is_a_400(world: World, who: str, method: str) -> None:
    query = "id=eq." + next(iter(world.seeded)) if method == "PATCH" else ""
    call = Call(who, method, "yui_messages", query, (), b'{"\\ud800": 1}')
    _assert_refused_as_json(send(world, call))


@pytest.mark.parametrize("target", ["rpc/%0Ax", "yui%0Amessages", "a%0Ab"])
def test_r7_a_name_with_a_line_feed_is_postgrests_json_404(world: World, target: str) -> None:
    _assert_refused_as_json(send(world, Call("person", "GET", target, "", (), b"")), status=404)
