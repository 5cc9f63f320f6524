"""The PostgREST shapes the SDKs build, on the wire through the real gateway: the statuses,
headers and error shapes a hosted project gives (tests/test_sdk_postgrest.py drives the same
shapes through the clients themselves)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.helpers.relay import Host, LocalRelay, Person

OBJECT = "application/vnd.pgrst.object+json"


def keys(error: requests.Response) -> tuple[int, str]:
    """The status and PostgREST code of an answer, checking the four keys of its error shape."""
    body = error.json()
    assert set(body) == {"code", "message", "details", "hint"}, body
    return error.status_code, body["code"]


@pytest.fixture
def ann(relay: LocalRelay) -> Person:
    """A person with agents Coach (two messages) and Loose (one)."""
    person = relay.person("Ann")
    coach, _ = person.add_agent("Coach")
    loose, _ = person.add_agent("Loose")
    for agent, body in [(coach, "first"), (coach, 'a "quoted", comma'), (loose, "loose end")]:
        assert person.say(agent, body).status_code == 201
    return person


def get(relay: LocalRelay, who: Person, table: str, **kwargs: Any) -> requests.Response:
    return relay.rest("GET", table, who.token, **kwargs)


# --- counts and CSV --------------------------------------------------------------------------


@pytest.mark.parametrize("count", ["exact", "planned", "estimated"])
def test_every_count_puts_a_number_in_content_range(
    relay: LocalRelay, ann: Person, count: str
) -> None:
    page = get(
        relay, ann, "yui_messages", params={"select": "id", "limit": "2"}, prefer=f"count={count}"
    )
    assert (page.status_code, page.headers["content-range"]) == (206, "0-1/3")
    head = relay.http("HEAD", "/rest/v1/yui_messages", token=ann.token, prefer=f"count={count}")
    assert (head.status_code, head.headers["content-range"], head.content) == (200, "0-2/3", b"")


def test_csv_is_postgrests(relay: LocalRelay, ann: Person) -> None:
    params = {"select": "body,kind", "order": "body"}
    answer = get(relay, ann, "yui_messages", params=params, headers={"accept": "text/csv"})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/csv; charset=utf-8"
    assert answer.text == 'body,kind\n"a ""quoted"", comma",text\nfirst,text\n"loose end",text'
    none = get(
        relay,
        ann,
        "yui_messages",
        params={"id": f"eq.{uuid.uuid4()}"},
        headers={"accept": "text/csv"},
    )
    assert (none.status_code, none.text) == (200, "\n")
    scalar = relay.http(
        "POST", "/rest/v1/rpc/yui_uid", token=ann.token, headers={"accept": "text/csv"}
    )
    assert keys(scalar) == (406, "PGRST107")


def test_nulls_stripped_for_objects_and_embeds(relay: LocalRelay, ann: Person) -> None:
    params = {"select": "name,connector_id,yui_users(name,email)", "name": "eq.Loose"}
    accept = {"accept": f"{OBJECT};nulls=stripped"}
    answer = get(relay, ann, "yui_agents", params=params, headers=accept)
    assert answer.json() == {"name": "Loose", "yui_users": {"name": "Ann"}}


# --- embedding -----------------------------------------------------------------------------------


def test_embeds_nest_and_come_back_from_writes(relay: LocalRelay, ann: Person) -> None:
    coach = ann.agents["Coach"]
    nested = get(
        relay,
        ann,
        "yui_messages",
        params={
            "select": "body,yui_agents(name,yui_users(name))",
            "agent_id": f"eq.{coach['id']}",
            "order": "body",
        },
    )
    assert nested.json() == [
        {"body": body, "yui_agents": {"name": "Coach", "yui_users": {"name": "Ann"}}}
        for body in ['a "quoted", comma', "first"]
    ]
    row = {"user_id": ann.id, "agent_id": coach["id"], "sender": "user", "body": "written"}
    written = relay.rest(
        "POST",
        "yui_messages",
        ann.token,
        body=row,
        params={"select": "body,agent:yui_agents(name)"},
        prefer="return=representation",
    )
    assert written.status_code == 201
    assert written.json() == [{"body": "written", "agent": {"name": "Coach"}}]
    params = {"select": "name,yui_messages(body)", "name": "eq.Loose"}
    one = get(relay, ann, "yui_agents", params=params, headers={"accept": OBJECT})
    assert one.json() == {"name": "Loose", "yui_messages": [{"body": "loose end"}]}


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"select": "id,nope(id)"}, 400, "PGRST200"),
        ({"select": "id,yui_agents!nope(id)"}, 400, "PGRST200"),
        ({"select": "id", "yui_agents.name": "eq.x"}, 400, "PGRST108"),
        ({"select": "count()"}, 400, "PGRST123"),
        ({"select": "id,...yui_agents(name)"}, 400, "PGRST100"),
        ({"select": "id,yui_agents(name"}, 400, "PGRST100"),
    ],
)
def test_embeds_the_relay_cant_serve_are_postgrests_errors(
    relay: LocalRelay, ann: Person, params: dict[str, str], status: int, code: str
) -> None:
    assert keys(get(relay, ann, "yui_messages", params=params)) == (status, code)


@pytest.fixture
def pairs(relay: LocalRelay) -> Iterator[None]:
    """Two tables joined by two foreign keys (made by the database's owner, dropped after), so
    an embed between them is ambiguous until hinted."""
    relay.sql(
        "create table public.yui_test_dots (id int primary key);"
        " create table public.yui_test_pairs (id int primary key,"
        "  a int constraint yui_test_pairs_a references public.yui_test_dots,"
        "  b int constraint yui_test_pairs_b references public.yui_test_dots);"
        " insert into public.yui_test_dots values (1), (2);"
        " insert into public.yui_test_pairs values (10, 1, 2);"
        " grant select on public.yui_test_dots, public.yui_test_pairs to yui_user"
    )
    try:
        yield
    finally:
        relay.sql("drop table public.yui_test_pairs, public.yui_test_dots")


def test_an_ambiguous_embed_is_a_300_until_hinted(
    relay: LocalRelay, ann: Person, pairs: None
) -> None:
    ambiguous = get(relay, ann, "yui_test_pairs", params={"select": "id,yui_test_dots(id)"})
    assert keys(ambiguous) == (300, "PGRST201")
    assert "'yui_test_dots!yui_test_pairs_a'" in ambiguous.json()["hint"]
    hinted = get(
        relay,
        ann,
        "yui_test_pairs",
        params={"select": "id,a:yui_test_dots!yui_test_pairs_a(id),b:yui_test_dots!b(id)"},
    )
    assert hinted.json() == [{"id": 10, "a": {"id": 1}, "b": {"id": 2}}]
    back = get(
        relay, ann, "yui_test_dots", params={"select": "id,yui_test_pairs!b(id)", "order": "id"}
    )
    assert back.json() == [
        {"id": 1, "yui_test_pairs": []},
        {"id": 2, "yui_test_pairs": [{"id": 10}]},
    ]


def test_a_hosts_embed_reads_only_what_it_serves(relay: LocalRelay, ann: Person) -> None:
    _, code = ann.add_agent("Served")
    host = Host.pair(relay, code, "served")
    ann.say(ann.agents["Served"], "for the host")
    answer = relay.rest("GET", "yui_messages", host.jwt, params={"select": "body,yui_agents(name)"})
    assert answer.json() == [{"body": "for the host", "yui_agents": {"name": "Served"}}]
    everything = relay.rest(
        "GET", "yui_messages", host.jwt, params={"select": "body,yui_agents(*)"}
    )
    assert keys(everything) == (403, "42501")  # a host reads only some of an agent's columns
    reverse = relay.rest(
        "GET", "yui_agents", host.jwt, params={"select": "name,yui_messages(body)"}
    )
    assert reverse.json() == [{"name": "Served", "yui_messages": [{"body": "for the host"}]}]


# --- writes --------------------------------------------------------------------------------------


def test_a_limited_delete_needs_an_order(relay: LocalRelay, ann: Person) -> None:
    loose = ann.agents["Loose"]["id"]
    unordered = relay.rest(
        "DELETE", "yui_messages", ann.token, params={"agent_id": f"eq.{loose}", "limit": "1"}
    )
    assert keys(unordered) == (400, "PGRST109")
    assert len(ann.thread(ann.agents["Loose"])) == 1
    coach = ann.agents["Coach"]
    ordered = relay.rest(
        "DELETE",
        "yui_messages",
        ann.token,
        prefer="count=exact",
        params={"agent_id": f"eq.{coach['id']}", "order": "body.desc", "limit": "1"},
    )
    assert (ordered.status_code, ordered.headers["content-range"]) == (204, "0-0/1")
    assert [row["body"] for row in ann.thread(coach)] == ['a "quoted", comma']


def test_missing_keys_take_defaults_only_when_asked(relay: LocalRelay, ann: Person) -> None:
    agent = ann.agents["Loose"]["id"]
    base = {"user_id": ann.id, "agent_id": agent, "sender": "user"}
    rows = [{**base, "body": "x", "meta": {"a": 1}}, {**base, "body": "y"}]
    mismatched = relay.rest("POST", "yui_messages", ann.token, body=rows)
    assert keys(mismatched) == (400, "PGRST102")
    defaulted = relay.rest(
        "POST",
        "yui_messages",
        ann.token,
        body=rows,
        params={"select": "body,meta"},
        prefer="missing=default,return=representation",
    )
    assert defaulted.status_code == 201
    assert defaulted.json() == [{"body": "x", "meta": {"a": 1}}, {"body": "y", "meta": {}}]
    again = [
        {**base, "id": str(uuid.uuid4()), "body": "z"},
        {**rows[0], "id": existing(relay, ann)},
    ]
    upserted = relay.rest(
        "POST",
        "yui_messages",
        ann.token,
        body=again,
        params={"select": "body"},
        prefer="missing=default,resolution=ignore-duplicates,return=representation",
    )
    assert (upserted.status_code, upserted.json()) == (201, [{"body": "z"}])


def existing(relay: LocalRelay, who: Person) -> str:
    return str(relay.sql("select id from yui_messages where user_id = %s limit 1", (who.id,))[0][0])


# --- filters -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "bodies"),
    [
        ({"body": "fts.first"}, ["first"]),
        ({"body": "plfts(english).loose ends"}, ["loose end"]),
        ({"body": "not.wfts(english).quoted or loose"}, ["first"]),
        ({"body": "like(any).{fir*,loo*}"}, ["first", "loose end"]),
        ({"or": "(body.phfts.loose end,body.eq.first)"}, ["first", "loose end"]),
    ],
)
def test_text_search_and_quantified_filters(
    relay: LocalRelay, ann: Person, filters: dict[str, str], bodies: list[str]
) -> None:
    answer = get(relay, ann, "yui_messages", params={"select": "body", "order": "body", **filters})
    assert [row["body"] for row in answer.json()] == bodies


def test_text_search_refusals_are_the_databases(relay: LocalRelay, ann: Person) -> None:
    nonsense = get(relay, ann, "yui_messages", params={"body": "fts(klingon).x"})
    assert keys(nonsense) == (400, "42704")  # no such text search configuration
    on_a_uuid = get(relay, ann, "yui_messages", params={"id": "fts.x"})
    assert keys(on_a_uuid) == (404, "42883")  # no such operator, PostgREST's 404
