"""The REST layer against a real PostgreSQL: grants, policies and PostgREST's answers.

Each request runs the way the gateway runs it: a transaction, the role and claims set locally,
`handle()`, and on failure a rollback and `ApiError.response()` or `db_error_response()`.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl

import psycopg
import pytest

from relay.gateway.rest import ApiError, RestResponse, db_error_response, handle

A1 = "00000000-0000-4000-8000-0000000000a1"
A2 = "00000000-0000-4000-8000-0000000000a2"
A3 = "00000000-0000-4000-8000-0000000000a3"
A4 = "00000000-0000-4000-8000-0000000000a4"
B1 = "00000000-0000-4000-8000-0000000000b1"
NEW = "00000000-0000-4000-8000-00000000000e"
NAMES = {A1: "a1", A2: "a2", A3: "a3", A4: "a4", B1: "b1"}

SCHEMA = """
do $$
begin
  if not exists (select from pg_roles where rolname = 'anon') then
    create role anon nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'rest_writer') then
    create role rest_writer nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'rest_reader') then
    create role rest_reader nologin;
  end if;
end
$$;
grant usage on schema public to anon, rest_writer, rest_reader;

create function public.rest_sub() returns text language sql stable as $$
  select nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub'
$$;

create table public.notes (
  id uuid primary key default gen_random_uuid(),
  owner text not null default public.rest_sub(),
  body text not null check (length(body) between 1 and 40),
  n int,
  created_at timestamptz not null default now(),
  meta jsonb not null default '{}',
  done boolean not null default false,
  tags text[] not null default '{}',
  secret text
);
alter table public.notes enable row level security;
grant select (id, owner, body, n, created_at, meta, done, tags),
      insert (id, body, n, created_at, meta, done, tags),
      update (body, n, done, meta), delete on public.notes to rest_writer;
grant select (id, body, n, created_at, meta, done, tags), update (done) on public.notes
  to rest_reader;

create policy notes_own on public.notes for all to rest_writer
  using (owner = public.rest_sub())
  with check (owner = public.rest_sub() and coalesce(n, 0) <> 666);
create policy notes_read on public.notes for select to rest_reader using (true);
create policy notes_tick on public.notes for update to rest_reader using (n > 0);

create table public.blanks (id uuid primary key default gen_random_uuid(),
                            at timestamptz not null default now());
grant select, insert on public.blanks to rest_writer;

create function public.add(a int, b int default 10) returns int language sql immutable
  as $$ select a + b $$;
create function public.notes_since(since timestamptz) returns table (id uuid, body text, n int)
  language sql stable as $$
  select id, body, n from public.notes where created_at >= since order by created_at, id
$$;
create function public.tags_of(note uuid) returns setof text language sql stable as $$
  select unnest(tags) from public.notes where id = note
$$;
create function public.echo(words text[], doc jsonb, at timestamptz default null)
  returns jsonb language sql immutable as $$
  select jsonb_build_object('words', words, 'count', cardinality(words), 'doc', doc,
                            'at', at)
$$;
create function public.first_note() returns public.notes language sql stable security definer
  as $$
  select * from public.notes order by created_at, id limit 1
$$;
create function public.bump() returns void language sql as $$
  update public.notes set n = coalesce(n, 0) + 1
$$;
create function public.refuse(what text) returns int language plpgsql as $$
begin
  if what = 'rate' then
    raise sqlstate 'PT429' using message = 'rate_limited';
  elsif what = 'suspended' then
    raise sqlstate 'PT403' using message = 'account_suspended', detail = 'yui_messages';
  end if;
  raise exception 'mention_needs_agent' using hint = 'name an agent';
end
$$;
"""

SEED = """
insert into public.notes (id, owner, body, n, created_at, meta, done, tags, secret) values
  (%(a1)s, 'alice', 'first', 1, '2024-01-01T10:00:00Z',
   '{"turn": ["x"], "req": "r1"}', false, '{red,blue}', 'sa1'),
  (%(a2)s, 'alice', 'second, with comma', 2, '2024-01-02T10:00:00Z',
   '{"turn": ["y"], "mentioned": ["bob"]}', false, '{red}', null),
  (%(a3)s, 'alice', 'third', null, '2024-01-03T10:00:00Z',
   '{"req": "r3", "a": {"b": "deep"}}', true, '{}', null),
  (%(a4)s, 'alice', 'Fourth', 3, '2024-01-03T10:00:00Z', '{}', false, '{}', null),
  (%(b1)s, 'bob', 'bob''s', 5, '2024-01-04T10:00:00Z', '{"turn": ["x"]}', false, '{}', 'sb1')
"""


@pytest.fixture
def db(scratch_db: str) -> str:
    """The scratch database with the notes table, its roles, policies, functions and rows."""
    with psycopg.connect(scratch_db, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute(SEED, {"a1": A1, "a2": A2, "a3": A3, "a4": A4, "b1": B1})
    return scratch_db


async def _serve(
    conninfo: str,
    role: str,
    sub: str,
    method: str,
    target: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    body: bytes,
) -> RestResponse:
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        try:
            async with conn.transaction():
                claims = json.dumps({"sub": sub, "role": role})
                await conn.execute(
                    "select set_config('role', %s, true),"
                    " set_config('request.jwt.claims', %s, true)",
                    (role, claims),
                )
                return await handle(
                    conn, method=method, target=target, query=query, headers=headers, body=body
                )
        except ApiError as exc:
            return exc.response()
        except psycopg.Error as exc:
            return db_error_response(exc, role)


def call(
    conninfo: str,
    method: str,
    target: str,
    query: str = "",
    *,
    role: str = "rest_writer",
    sub: str = "alice",
    prefer: str | None = None,
    accept: str | None = None,
    body: object = None,
) -> RestResponse:
    """One request, its query string decoded as the gateway would (`%5B` → `[`)."""
    headers = {"content-type": "application/json"}
    if prefer is not None:
        headers["prefer"] = prefer
    if accept is not None:
        headers["accept"] = accept
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    pairs = parse_qsl(query, keep_blank_values=True)
    return asyncio.run(_serve(conninfo, role, sub, method, target, pairs, headers, raw))


def rows(response: RestResponse) -> Any:
    """The JSON body: rows, one object (vnd.pgrst.object) or what a function returned."""
    assert response.body is not None
    return json.loads(response.body)


def names(response: RestResponse) -> list[str]:
    """The rows' ids as short names, in the order they came."""
    assert response.status == 200, response.body
    return [NAMES.get(row["id"], row["id"]) for row in rows(response)]


def error(response: RestResponse) -> dict:
    assert response.body is not None
    shape = json.loads(response.body)
    assert set(shape) == {"code", "message", "details", "hint"}
    return shape


def superuser_rows(conninfo: str, query: str, *params: object) -> list[tuple]:
    with psycopg.connect(conninfo) as conn:
        return conn.execute(query, params).fetchall()


# Reads


def test_select_shapes_rows_with_aliases_json_paths_and_casts(db: str) -> None:
    response = call(
        db,
        "GET",
        "notes",
        f"select=id,text:body,meta->turn,meta->>req,meta->a->>b,n::text,"
        f"first:meta->turn->0,created_at&id=in.({A1},{A3})&order=created_at",
    )
    assert response.status == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.headers["content-range"] == "0-1/*"
    first, third = rows(response)
    assert first == {
        "id": A1,
        "text": "first",
        "turn": ["x"],
        "req": "r1",
        "b": None,
        "n": "1",
        "first": "x",
        "created_at": first["created_at"],
    }
    assert datetime.fromisoformat(first["created_at"]) == datetime.fromisoformat(
        "2024-01-01T10:00:00+00:00"
    )
    assert third["b"] == "deep" and third["turn"] is None and third["n"] is None


def test_rls_decides_which_rows_each_person_sees(db: str) -> None:
    assert sorted(names(call(db, "GET", "notes", "select=id"))) == ["a1", "a2", "a3", "a4"]
    assert names(call(db, "GET", "notes", "select=id", sub="bob")) == ["b1"]
    assert len(rows(call(db, "GET", "notes", "select=id", role="rest_reader"))) == 5


def test_empty_select_yields_empty_objects(db: str) -> None:
    assert rows(call(db, "GET", "notes", f"select=&id=eq.{A1}")) == [{}]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("n=eq.2", ["a2"]),
        ("n=neq.2", ["a1", "a4"]),
        ("n=gt.1", ["a2", "a4"]),
        ("n=gte.2", ["a2", "a4"]),
        ("n=lt.2", ["a1"]),
        ("n=lte.2", ["a1", "a2"]),
        ("body=like.*ourth", ["a4"]),
        ("body=like.*OURTH", []),
        ("body=ilike.*OURTH", ["a4"]),
        ("body=match.^f", ["a1"]),
        ("body=imatch.^f", ["a1", "a4"]),
        ("n=is.null", ["a3"]),
        ("n=not.is.null", ["a1", "a2", "a4"]),
        ("done=is.true", ["a3"]),
        ("done=is.false", ["a1", "a2", "a4"]),
        ("n=not.eq.1", ["a2", "a4"]),
        ("n=isdistinct.1", ["a2", "a3", "a4"]),
        (f"id=in.({A1},{A3})", ["a1", "a3"]),
        (f"id=not.in.({A1},{A3})", ["a2", "a4"]),
        ('body=in.("second, with comma",third)', ["a2", "a3"]),
        ("body=in.()", []),
        ("meta->turn=cs.%5B%22x%22%5D", ["a1"]),
        ('meta=cs.{"req": "r3"}', ["a3"]),
        ('meta=cd.{"turn": ["x"], "req": "r1", "more": 1}', ["a1", "a4"]),
        ("tags=cs.{red}", ["a1", "a2"]),
        ("tags=cd.{red}", ["a2", "a3", "a4"]),
        ("tags=ov.{blue,green}", ["a1"]),
        ("meta->>req=eq.r1", ["a1"]),
        ("meta->mentioned=not.is.null", ["a2"]),
        ("meta->a->>b=eq.deep", ["a3"]),
        ("created_at=gt.2024-01-02T00:00:00Z", ["a2", "a3", "a4"]),
        ("n=gt.0&n=lt.3", ["a1", "a2"]),
        ("or=(n.eq.1,done.is.true)", ["a1", "a3"]),
        ("or=(n.gt.2,and(n.is.null,done.is.true))", ["a3", "a4"]),
        ("not.or=(n.eq.1,n.eq.2)", ["a4"]),
        ("and=(n.gte.1,n.lte.2)", ["a1", "a2"]),
        ('or=(body.eq."second, with comma",n.eq.3)', ["a2", "a4"]),
        ('or=(meta->turn.cs.["y"],meta->>req.eq.r3)', ["a2", "a3"]),
        ("or=(id.in.(" + A1 + "," + A4 + "),n.is.null)", ["a1", "a3", "a4"]),
    ],
)
def test_filters(db: str, query: str, expected: list[str]) -> None:
    found = names(call(db, "GET", "notes", f"select=id&{query}&order=id"))
    assert found == expected


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("created_at.desc,body.asc", ["a4", "a3", "a2", "a1"]),
        ("created_at.desc,body.desc", ["a3", "a4", "a2", "a1"]),
        ("n.desc", ["a3", "a4", "a2", "a1"]),
        ("n.desc.nullslast", ["a4", "a2", "a1", "a3"]),
        ("n.nullsfirst", ["a3", "a1", "a2", "a4"]),
        ("meta->>req.asc.nullslast,n.desc", ["a1", "a3", "a4", "a2"]),
    ],
)
def test_order_by_several_keys(db: str, order: str, expected: list[str]) -> None:
    assert names(call(db, "GET", "notes", f"select=id&order={order}")) == expected


def test_limit_offset_and_counts(db: str) -> None:
    page = call(db, "GET", "notes", "select=id&order=n.asc.nullslast&limit=2&offset=1")
    assert names(page) == ["a2", "a4"]
    assert page.headers["content-range"] == "1-2/*"
    counted = call(db, "GET", "notes", "select=id&order=n&limit=2&offset=1", prefer="count=exact")
    assert counted.status == 206
    assert counted.headers["content-range"] == "1-2/4"
    whole = call(db, "GET", "notes", "select=id", prefer="count=exact")
    assert whole.status == 200 and whole.headers["content-range"] == "0-3/4"
    empty = call(db, "GET", "notes", "select=id&n=eq.99")
    assert (empty.status, empty.body, empty.headers["content-range"]) == (200, b"[]", "*/*")
    beyond = call(db, "GET", "notes", "select=id&offset=9", prefer="count=exact")
    assert (beyond.status, error(beyond)["code"]) == (416, "PGRST103")


def test_head_has_headers_and_no_body(db: str) -> None:
    response = call(db, "HEAD", "notes", "select=id", prefer="count=exact")
    assert (response.status, response.body) == (200, None)
    assert response.headers["content-range"] == "0-3/4"


def test_single_object_accept(db: str) -> None:
    accept = "application/vnd.pgrst.object+json"
    one = call(db, "GET", "notes", f"select=id,body&id=eq.{A1}", accept=accept)
    assert one.status == 200
    assert one.headers["content-type"] == "application/vnd.pgrst.object+json; charset=utf-8"
    assert rows(one) == {"id": A1, "body": "first"}
    many = call(db, "GET", "notes", "select=id", accept=accept)
    assert (many.status, error(many)["code"]) == (406, "PGRST116")
    assert error(many)["details"] == "The result contains 4 rows"
    html = call(db, "GET", "notes", "select=id", accept="text/html")
    assert (html.status, error(html)["code"]) == (406, "PGRST107")


def test_only_public_is_reachable(db: str) -> None:
    assert call(db, "GET", "pg_catalog.pg_roles").status == 404
    assert call(db, "GET", "rest_sub").status == 404
    response = asyncio.run(
        _serve(db, "rest_writer", "alice", "GET", "notes", [], {"accept-profile": "yui_meta"}, b"")
    )
    assert (response.status, error(response)["code"]) == (406, "PGRST106")


# Writes


def test_insert_minimal_is_the_default(db: str) -> None:
    response = call(db, "POST", "notes", body={"id": NEW, "body": "new", "meta": {"turn": [A1]}})
    assert (response.status, response.body) == (201, None)
    assert superuser_rows(db, "select owner, done, tags, meta from notes where id = %s", NEW) == [
        ("alice", False, [], {"turn": [A1]})
    ]


def test_insert_representation_shaped_by_select(db: str) -> None:
    response = call(
        db,
        "POST",
        "notes",
        "select=id,body,done,meta->turn",
        prefer="return=representation",
        body={"id": NEW, "body": "new"},
    )
    assert response.status == 201
    assert rows(response) == [{"id": NEW, "body": "new", "done": False, "turn": None}]
    minimal = call(db, "POST", "notes", prefer="return=minimal", body={"body": "also"})
    headers_only = call(db, "POST", "notes", prefer="return=headers-only", body={"body": "too"})
    assert (minimal.status, minimal.body, headers_only.status, headers_only.body) == (
        201,
        None,
        201,
        None,
    )


def test_bulk_insert(db: str) -> None:
    batch = [{"body": "one", "n": 10, "tags": ["a", "b"]}, {"body": "two", "n": 11, "tags": []}]
    response = call(
        db,
        "POST",
        "notes",
        "select=body,n,tags,owner",
        prefer="return=representation,count=exact",
        body=batch,
    )
    assert response.status == 201
    assert response.headers["content-range"] == "*/2"
    assert rows(response) == [
        {"body": "one", "n": 10, "tags": ["a", "b"], "owner": "alice"},
        {"body": "two", "n": 11, "tags": [], "owner": "alice"},
    ]
    minimal = call(db, "POST", "notes", body=[{"body": "three"}, {"body": "four"}])
    assert minimal.status == 201
    assert superuser_rows(db, "select count(*) from notes")[0][0] == 9
    nothing = call(db, "POST", "notes", "select=id", prefer="return=representation", body=[])
    assert (nothing.status, rows(nothing)) == (201, [])


def test_insert_of_defaults_only(db: str) -> None:
    response = call(
        db, "POST", "blanks", "select=id", prefer="return=representation", body=[{}, {}]
    )
    assert response.status == 201 and len(rows(response)) == 2


def test_insert_bodies_the_grammar_refuses(db: str) -> None:
    mismatched = call(db, "POST", "notes", body=[{"body": "a"}, {"body": "b", "n": 1}])
    assert (mismatched.status, error(mismatched)["code"]) == (400, "PGRST102")
    assert error(mismatched)["message"] == "All object keys must match"
    for broken in (b"{not json", b"", b"\xff", b"42"):
        response = call(db, "POST", "notes", body=broken)
        assert (response.status, error(response)["code"]) == (400, "PGRST102"), broken


def test_duplicate_key_is_409(db: str) -> None:
    response = call(db, "POST", "notes", body={"id": A1, "body": "again"})
    shape = error(response)
    assert (response.status, shape["code"]) == (409, "23505")
    assert "duplicate key" in shape["message"]
    assert response.body is not None and "insert" not in response.body.decode().lower()


def test_check_violation_and_bad_input_are_400(db: str) -> None:
    too_long = call(db, "POST", "notes", body={"body": "x" * 41})
    assert (too_long.status, error(too_long)["code"]) == (400, "23514")
    bad_uuid = call(db, "GET", "notes", "id=eq.nope")
    assert (bad_uuid.status, error(bad_uuid)["code"]) == (400, "22P02")
    missing = call(db, "POST", "notes", body={"n": 1})
    assert (missing.status, error(missing)["code"]) == (400, "23502")


def test_grants_and_policies_refuse_with_401_or_403(db: str) -> None:
    secret = call(db, "POST", "notes", body={"body": "b", "secret": "s"})
    assert (secret.status, error(secret)["code"]) == (403, "42501")
    policy = call(db, "POST", "notes", body={"body": "b", "n": 666})
    assert (policy.status, error(policy)["code"]) == (403, "42501")
    assert "row-level security" in error(policy)["message"]
    anon = call(db, "GET", "notes", role="anon")
    assert (anon.status, error(anon)["code"]) == (401, "42501")
    star = call(db, "GET", "notes", role="rest_reader")
    assert (star.status, error(star)["code"]) == (403, "42501")
    body = call(db, "PATCH", "notes", f"id=eq.{A1}", role="rest_reader", body={"body": "x"})
    assert (body.status, error(body)["code"]) == (403, "42501")


def test_upserts(db: str) -> None:
    merged = call(
        db,
        "POST",
        "notes",
        "on_conflict=id&select=id,body",
        prefer="resolution=merge-duplicates,return=representation",
        body=[{"id": A1, "body": "merged"}, {"id": NEW, "body": "fresh"}],
    )
    assert (merged.status, rows(merged)) == (
        201,
        [{"id": A1, "body": "merged"}, {"id": NEW, "body": "fresh"}],
    )
    ignored = call(
        db,
        "POST",
        "notes",
        "select=id",
        prefer="resolution=ignore-duplicates,return=representation",
        body={"id": A2, "body": "ignored"},
    )
    assert (ignored.status, rows(ignored)) == (201, [])
    assert superuser_rows(
        db, "select body from notes where id in (%s, %s) order by id", A1, A2
    ) == [("merged",), ("second, with comma",)]


def test_patch(db: str) -> None:
    changed = call(
        db,
        "PATCH",
        "notes",
        f"id=in.({A1},{A2})&select=id,done,meta",
        prefer="return=representation",
        body={"done": True, "meta": {"k": 1}},
    )
    assert changed.status == 200
    assert sorted(rows(changed), key=lambda row: row["id"]) == [
        {"id": A1, "done": True, "meta": {"k": 1}},
        {"id": A2, "done": True, "meta": {"k": 1}},
    ]
    minimal = call(db, "PATCH", "notes", f"id=eq.{A3}", body={"n": 7})
    assert (minimal.status, minimal.body, minimal.headers["content-range"]) == (204, None, "0-0/*")
    ticked = call(
        db,
        "PATCH",
        "notes",
        "n=gt.0&select=id",
        role="rest_reader",
        sub="carol",
        prefer="return=representation",
        body={"done": True},
    )
    assert sorted(names(ticked)) == ["a1", "a2", "a3", "a4", "b1"]
    empty = call(db, "PATCH", "notes", body={})
    assert (empty.status, empty.body) == (204, None)


def test_patch_hidden_by_rls_changes_nothing(db: str) -> None:
    hidden = call(
        db,
        "PATCH",
        "notes",
        f"id=eq.{B1}&select=id",
        prefer="return=representation",
        body={"done": True},
    )
    assert (hidden.status, rows(hidden)) == (200, [])
    minimal = call(db, "PATCH", "notes", f"id=eq.{B1}", body={"done": True})
    assert (minimal.status, minimal.body) == (204, None)
    assert superuser_rows(db, "select done from notes where id = %s", B1) == [(False,)]


def test_delete(db: str) -> None:
    hidden = call(db, "DELETE", "notes", f"id=eq.{B1}&select=id", prefer="return=representation")
    assert (hidden.status, rows(hidden)) == (200, [])
    gone = call(
        db, "DELETE", "notes", "done=is.true&select=id,body", prefer="return=representation"
    )
    assert (gone.status, rows(gone)) == (200, [{"id": A3, "body": "third"}])
    minimal = call(db, "DELETE", "notes", "n=lt.3")
    assert (minimal.status, minimal.body) == (204, None)
    assert superuser_rows(db, "select body from notes order by body") == [("Fourth",), ("bob's",)]


def test_single_object_on_writes_rolls_back_when_not_one_row(db: str) -> None:
    accept = "application/vnd.pgrst.object+json"
    many = call(
        db,
        "PATCH",
        "notes",
        "n=gt.0&select=id",
        prefer="return=representation",
        accept=accept,
        body={"done": True},
    )
    assert (many.status, error(many)["code"]) == (406, "PGRST116")
    assert superuser_rows(db, "select count(*) from notes where done")[0][0] == 1
    one = call(
        db,
        "POST",
        "notes",
        "select=body",
        prefer="return=representation",
        accept=accept,
        body={"body": "solo"},
    )
    assert (one.status, rows(one)) == (201, {"body": "solo"})


# Functions


def test_rpc_scalar(db: str) -> None:
    assert rows(call(db, "POST", "rpc/add", body={"a": 1, "b": 2})) == 3
    assert rows(call(db, "POST", "rpc/add", body={"a": 1})) == 11
    assert rows(call(db, "GET", "rpc/add", "a=5&b=1")) == 6
    echoed = call(db, "POST", "rpc/echo", body={"words": ["a", "b,c"], "doc": {"k": [1, 2]}})
    assert rows(echoed) == {"words": ["a", "b,c"], "count": 2, "doc": {"k": [1, 2]}, "at": None}


def test_rpc_set_returning(db: str) -> None:
    since = call(db, "POST", "rpc/notes_since", body={"since": "2024-01-02T00:00:00Z"})
    assert names(since) == ["a2", "a3", "a4"]
    shaped = call(
        db,
        "GET",
        "rpc/notes_since",
        "since=2024-01-02T00:00:00Z&select=body&n=not.is.null&order=n.desc&limit=1",
        prefer="count=exact",
    )
    assert (rows(shaped), shaped.status) == ([{"body": "Fourth"}], 206)
    assert shaped.headers["content-range"] == "0-0/2"
    assert rows(call(db, "POST", "rpc/tags_of", body={"note": A1})) == ["red", "blue"]
    assert rows(call(db, "POST", "rpc/tags_of", body={"note": A3})) == []
    assert rows(call(db, "POST", "rpc/first_note", "select=id,body", role="rest_reader")) == {
        "id": A1,
        "body": "first",
    }


def test_rpc_void_and_read_only_get(db: str) -> None:
    done = call(db, "POST", "rpc/bump")
    assert (done.status, done.body) == (204, None)
    assert superuser_rows(db, "select n from notes where id = %s", A3) == [(1,)]
    refused = call(db, "GET", "rpc/bump")
    assert (refused.status, error(refused)["code"]) == (405, "25006")


def test_rpc_errors(db: str) -> None:
    unknown = call(db, "POST", "rpc/nope", body={})
    assert (unknown.status, error(unknown)["code"]) == (404, "PGRST202")
    wrong_args = call(db, "POST", "rpc/add", body={"z": 1})
    assert (wrong_args.status, error(wrong_args)["code"]) == (404, "PGRST202")
    assert error(wrong_args)["message"] == (
        "Could not find the function public.add(z) in the schema cache"
    )
    system = call(db, "POST", "rpc/version", body={})
    assert system.status == 404
    limited = call(db, "POST", "rpc/refuse", body={"what": "rate"})
    assert (limited.status, error(limited)["message"]) == (429, "rate_limited")
    suspended = call(db, "POST", "rpc/refuse", body={"what": "suspended"})
    assert (suspended.status, error(suspended)["code"], error(suspended)["details"]) == (
        403,
        "PT403",
        "yui_messages",
    )
    raised = error(call(db, "POST", "rpc/refuse", body={"what": "other"}))
    assert (raised["code"], raised["message"], raised["hint"]) == (
        "P0001",
        "mention_needs_agent",
        "name an agent",
    )
    assert call(db, "POST", "rpc/refuse", body={"what": "other"}).status == 400
    scalar_filter = call(db, "POST", "rpc/add", "limit=1", body={"a": 1})
    assert (scalar_filter.status, error(scalar_filter)["code"]) == (400, "PGRST100")
    patch = call(db, "PATCH", "rpc/add", body={"a": 1})
    assert (patch.status, error(patch)["code"]) == (405, "PGRST101")


# Unknown names and hostile input


def test_unknown_table_and_columns(db: str) -> None:
    for method in ("GET", "POST", "PATCH", "DELETE"):
        response = call(db, method, "nope", body={"a": 1})
        assert (response.status, error(response)["code"]) == (404, "42P01"), method
    column = call(db, "GET", "notes", "select=nope")
    assert (column.status, error(column)["code"]) == (400, "42703")
    assert error(column)["message"] == "column notes.nope does not exist"
    filtered = call(db, "GET", "notes", "nope=eq.1")
    assert (filtered.status, error(filtered)["code"]) == (400, "42703")
    written = call(db, "POST", "notes", body={"body": "x", "nope": 1})
    assert (written.status, error(written)["code"]) == (400, "42703")


def test_bad_grammar_is_pgrst100(db: str) -> None:
    for query in (
        "id=foo.1",
        "id=in.1,2",
        "order=id.sideways",
        "limit=ten",
        "select=author(name",
        "or=(id.eq.1",
        "n=is.maybe",
    ):
        response = call(db, "GET", "notes", query)
        assert (response.status, error(response)["code"]) == (400, "PGRST100"), query


@pytest.mark.parametrize(
    ("method", "target", "query", "body"),
    [
        ("GET", "notes", "id;drop table notes=eq.1", None),
        ("GET", "notes", 'select="id;drop table notes"', None),
        ("GET", "notes", 'select="a%s%(p0)s"', None),
        ("GET", "notes;drop table notes", "", None),
        ("GET", "notes", "select=id&body=eq.'); drop table notes; --", None),
        ("GET", "notes", 'select=id&meta->>"x\'); drop table notes; --"=eq.1', None),
        ("GET", "notes", 'order="n; drop table notes"', None),
        ("GET", "notes", "select=id::text;drop table notes", None),
        ("POST", "notes", "", {'body") select 1; drop table notes; --': "x"}),
        ("POST", "notes", "", {"body": "'); drop table notes; --"}),
        ("POST", "rpc/add", "", {"a => 1); drop table notes; --": 1}),
        ("PATCH", "notes", "", {'"n" = 1; drop table notes; --': 1}),
    ],
)
def test_injection_attempts_are_harmless(
    db: str, method: str, target: str, query: str, body: object
) -> None:
    response = call(db, method, target, query, body=body)
    assert response.status in (200, 201, 400, 404), response.body
    count = superuser_rows(
        db, "select count(*) from notes where body <> %s", "'); drop table notes; --"
    )
    assert count == [(5,)]
