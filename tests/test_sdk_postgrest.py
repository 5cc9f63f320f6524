"""PostgREST and functions through the official clients, unchanged: supabase-py in this process
and supabase-js in Node, each asked the same things and held to the same answers.

Reads (filters, order, range, counts, embedding both ways, `!inner`, aliases, nested filters and
limits, CSV, full-text search, rpc), writes (single, bulk with and without `missing=default`,
upsert and its refusal, update and delete with filters, order and limit) and functions.invoke
on yui-agents and yui-connect. Whatever the relay refused before is refused still: an embed
never shows a row its reader couldn't select (the rows are read in the same statement, under the
same policies), another person's rows can't be written, a revoked host gets no session.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from postgrest.exceptions import APIError
from supabase_functions.errors import FunctionsHttpError

from tests.helpers.relay import LocalRelay, Person, fresh_ip
from tests.helpers.sdk import python_client, run_js

CLIENTS = ["py", "js"]
# What every supabase-js script here starts with: a client for a token, a call's rows (or its
# error's code), and the answer as the last line.
JS = """
import { createClient } from '@supabase/supabase-js'
const client = (token, headers = {}) => createClient(process.env.URL, process.env.ANON, {
  global: { headers: token ? { Authorization: `Bearer ${token}`, ...headers } : headers },
  auth: { persistSession: false, autoRefreshToken: false },
})
const rows = async (query) => {
  const { data, error } = await query
  return error ? { error: error.code } : data
}
const out = (value) => console.log(JSON.stringify(value))
"""


def outcome(call: Callable[[], Any]) -> Any:
    """The rows a supabase-py call returns, or the error code it raises."""
    try:
        return call().data
    except APIError as exc:
        return {"error": exc.code}


def env(relay: LocalRelay, **values: str) -> dict[str, str]:
    return {"URL": relay.url, "ANON": relay.anon_key, **values}


# --- reads -------------------------------------------------------------------------------------


def reading_cast(relay: LocalRelay) -> tuple[Person, dict[str, Any], dict[str, Any]]:
    """A, with Coach (three messages) and Scout (one); B, with Other and a message of his own."""
    a, b = relay.person("Reader A"), relay.person("Reader B")
    coach, _ = a.add_agent("Coach")
    scout, _ = a.add_agent("Scout")
    other, _ = b.add_agent("Other")
    for agent, body in [
        (coach, "apples and pears"),
        (coach, "the quick brown fox"),
        (coach, "pears alone"),
        (scout, "scouting report"),
    ]:
        assert a.say(agent, body).status_code == 201
    assert b.say(other, "apples from B").status_code == 201
    return a, coach, scout


def reads_py(relay: LocalRelay, token: str, coach_id: str) -> dict[str, Any]:
    with python_client(relay.url, relay.anon_key, token) as client:
        messages, agents = client.table("yui_messages"), client.table("yui_agents")
        page = messages.select("body").eq("agent_id", coach_id).order("body").range(0, 1)
        counts = {
            method: messages.select("*", count=method, head=True).execute().count
            for method in ("exact", "planned", "estimated")
        }
        down = agents.select("name, yui_messages(body)").order("name")
        limited = (
            agents.select("name, yui_messages(body)")
            .order("name")
            .order("body", desc=True, foreign_table="yui_messages")
            .limit(1, foreign_table="yui_messages")
        )
        search = messages.select("body").order("body")
        return {
            "page": page.execute().data,
            "counts": counts,
            "up": messages.select("body, yui_agents(name)").order("body").execute().data,
            "down": down.order("body", foreign_table="yui_messages").execute().data,
            "limited": limited.execute().data,
            "inner": messages.select("body, agent:yui_agents!inner(name)")
            .eq("agent.name", "Scout")
            .execute()
            .data,
            "owner": agents.select("name, yui_users(name)").order("name").execute().data,
            "csv": agents.select("name,push_muted").order("name").csv().execute().data,
            "stripped": agents.select("name,connector_id")
            .order("name")
            .strip_nulls()
            .execute()
            .data,
            "fts": search.text_search("body", "apples & pears").execute().data,
            "plain": messages.select("body")
            .text_search("body", "quick foxes", {"type": "plain", "config": "english"})
            .execute()
            .data,
            "phrase": messages.select("body")
            .text_search("body", "brown fox", {"type": "phrase"})
            .execute()
            .data,
            "web": messages.select("body")
            .text_search("body", "pears -apples", {"type": "web_search", "config": "english"})
            .execute()
            .data,
            "uid": client.rpc("yui_uid").execute().data,
        }


def expected_reads(a: Person) -> dict[str, Any]:
    coach = ["apples and pears", "pears alone", "the quick brown fox"]
    return {
        "page": [{"body": "apples and pears"}, {"body": "pears alone"}],
        "counts": {"exact": 4, "planned": 4, "estimated": 4},
        "up": [
            {"body": body, "yui_agents": {"name": name}}
            for body, name in sorted([(b, "Coach") for b in coach] + [("scouting report", "Scout")])
        ],
        "down": [
            {"name": "Coach", "yui_messages": [{"body": body} for body in coach]},
            {"name": "Scout", "yui_messages": [{"body": "scouting report"}]},
        ],
        "limited": [
            {"name": "Coach", "yui_messages": [{"body": "the quick brown fox"}]},
            {"name": "Scout", "yui_messages": [{"body": "scouting report"}]},
        ],
        "inner": [{"body": "scouting report", "agent": {"name": "Scout"}}],
        "owner": [
            {"name": "Coach", "yui_users": {"name": "Reader A"}},
            {"name": "Scout", "yui_users": {"name": "Reader A"}},
        ],
        "csv": "name,push_muted\nCoach,f\nScout,f",
        "stripped": [{"name": "Coach"}, {"name": "Scout"}],  # no host: connector_id is null
        "fts": [{"body": "apples and pears"}],
        "plain": [{"body": "the quick brown fox"}],
        "phrase": [{"body": "the quick brown fox"}],
        "web": [{"body": "pears alone"}],
        "uid": a.id,
    }


READS_JS = (
    JS
    + """
const db = client(process.env.TOKEN)
const messages = () => db.from('yui_messages')
const agents = () => db.from('yui_agents')
const search = (query, options) =>
  rows(messages().select('body').textSearch('body', query, options))
const counts = {}
for (const count of ['exact', 'planned', 'estimated']) {
  counts[count] = (await messages().select('*', { count, head: true })).count
}
const inMessages = { referencedTable: 'yui_messages' }
out({
  page: await rows(messages().select('body').eq('agent_id', process.env.COACH).order('body')
    .range(0, 1)),
  counts,
  up: await rows(messages().select('body, yui_agents(name)').order('body')),
  down: await rows(agents().select('name, yui_messages(body)').order('name')
    .order('body', inMessages)),
  limited: await rows(agents().select('name, yui_messages(body)').order('name')
    .order('body', { ...inMessages, ascending: false }).limit(1, inMessages)),
  inner: await rows(messages().select('body, agent:yui_agents!inner(name)')
    .eq('agent.name', 'Scout')),
  owner: await rows(agents().select('name, yui_users(name)').order('name')),
  csv: await rows(agents().select('name,push_muted').order('name').csv()),
  stripped: await rows(agents().select('name,connector_id').order('name').stripNulls()),
  fts: await rows(messages().select('body').order('body').textSearch('body', 'apples & pears')),
  plain: await search('quick foxes', { type: 'plain', config: 'english' }),
  phrase: await search('brown fox', { type: 'phrase' }),
  web: await search('pears -apples', { type: 'websearch', config: 'english' }),
  uid: await rows(db.rpc('yui_uid')),
})
"""
)


@pytest.mark.parametrize("client", CLIENTS)
def test_reads_filters_counts_embeds_csv_search_and_rpc(relay: LocalRelay, client: str) -> None:
    a, coach, _ = reading_cast(relay)
    if client == "py":
        got = reads_py(relay, a.token, coach["id"])
    else:
        got = run_js(READS_JS, env=env(relay, TOKEN=a.token, COACH=coach["id"]))
    assert got == expected_reads(a)


# --- an embed never shows another person's rows ------------------------------------------------


def crossed(relay: LocalRelay) -> tuple[Person, Person, str, str]:
    """Two people, each with a notification (inserted as the database's owner, as yui-push does)
    that points at a message of the other: the embed along that foreign key is the only way
    either could reach the other's row."""
    a, b = relay.person("Crossed A"), relay.person("Crossed B")
    alpha, _ = a.add_agent("Alpha")
    bravo, _ = b.add_agent("Bravo")
    ids = []
    for person, agent, body in [(a, alpha, "A's secret"), (b, bravo, "B's secret")]:
        message = str(uuid.uuid4())
        assert person.say(agent, body, id=message).status_code == 201
        ids.append(message)
    for person, agent, message in [(a, alpha, ids[1]), (b, bravo, ids[0])]:
        relay.sql(
            "insert into yui_notifications (user_id, agent_id, message_id, title, body, payload,"
            " environment, status) values (%s, %s, %s, 'to ' || %s, 'x', '{}', 'sandbox', 'sunk')",
            (person.id, agent["id"], message, person.id),
        )
    return a, b, ids[0], ids[1]


def isolation_py(relay: LocalRelay, token: str) -> dict[str, Any]:
    with python_client(relay.url, relay.anon_key, token) as client:
        notes, messages = client.table("yui_notifications"), client.table("yui_messages")
        return {
            "left": notes.select("title, yui_messages(body)").execute().data,
            "inner": notes.select("title, yui_messages!inner(body)").execute().data,
            "reverse": messages.select("body, yui_notifications(title)").execute().data,
            "filtered": notes.select("title, yui_messages(body)")
            .not_.is_("yui_messages", "null")
            .execute()
            .data,
        }


ISOLATION_JS = (
    JS
    + """
const db = client(process.env.TOKEN)
const notes = () => db.from('yui_notifications')
out({
  left: await rows(notes().select('title, yui_messages(body)')),
  inner: await rows(notes().select('title, yui_messages!inner(body)')),
  reverse: await rows(db.from('yui_messages').select('body, yui_notifications(title)')),
  filtered: await rows(notes().select('title, yui_messages(body)').not('yui_messages', 'is', null)),
})
"""
)


@pytest.mark.parametrize("client", CLIENTS)
def test_an_embed_never_shows_another_persons_rows(relay: LocalRelay, client: str) -> None:
    a, b, _, _ = crossed(relay)
    for person, other in [(a, b), (b, a)]:
        if client == "py":
            got = isolation_py(relay, person.token)
        else:
            got = run_js(ISOLATION_JS, env=env(relay, TOKEN=person.token))
        own = "A's secret" if person is a else "B's secret"
        assert got == {
            "left": [{"title": f"to {person.id}", "yui_messages": None}],
            "inner": [],
            "reverse": [{"body": own, "yui_notifications": []}],
            "filtered": [],
        }, (person.id, other.id)


# --- writes ------------------------------------------------------------------------------------


def writes_py(relay: LocalRelay, a: Person, b_agent: str, ids: list[str]) -> dict[str, Any]:
    coach = a.agents["Coach"]["id"]

    def row(body: str, **extra: Any) -> dict[str, Any]:
        return {"user_id": a.id, "agent_id": coach, "sender": "user", "body": body, **extra}

    with python_client(relay.url, relay.anon_key, a.token) as client:
        messages, agents = client.table("yui_messages"), client.table("yui_agents")
        bulk = [row("two", id=ids[1], meta={"k": 1}), row("three")]
        shown = "body, kind, meta"
        return {
            "single": outcome(
                lambda: messages.insert(row("one", id=ids[0])).select(shown).execute()
            ),
            "nulls": outcome(lambda: messages.insert(bulk).execute()),
            "defaults": outcome(
                lambda: messages.insert(bulk, default_to_null=False).select(shown).execute()
            ),
            "counted": messages.insert([row("four"), row("five")], count="exact").execute().count,
            "resend": outcome(
                lambda: messages.upsert(row("one", id=ids[0]), ignore_duplicates=True).execute()
            ),
            "merge": outcome(lambda: messages.upsert(row("one!", id=ids[0])).execute()),
            "renamed": outcome(
                lambda: agents.update({"name": "Coach 2"}).eq("id", coach).select("name").execute()
            ),
            "not_mine": outcome(
                lambda: agents.update({"name": "Mine"}).eq("id", b_agent).select("name").execute()
            ),
            "first_only": outcome(
                lambda: agents.update({"sort": 9}).order("name").limit(1).select("name, sort")
                .execute()
            ),
            "deleted": outcome(lambda: messages.delete().eq("id", ids[1]).select("body").execute()),
            "oldest": outcome(
                lambda: messages.delete().eq("agent_id", coach).order("body").limit(1)
                .select("body").execute()
            ),
            "left": outcome(lambda: messages.select("body").order("body").execute()),
        }  # fmt: skip


WRITES_JS = (
    JS
    + """
const db = client(process.env.TOKEN)
const messages = () => db.from('yui_messages')
const agents = () => db.from('yui_agents')
const row = (body, extra = {}) => ({
  user_id: process.env.UID, agent_id: process.env.COACH, sender: 'user', body, ...extra,
})
const bulk = [row('two', { id: process.env.ID1, meta: { k: 1 } }), row('three')]
const shown = 'body, kind, meta'
const id0 = { id: process.env.ID0 }
out({
  single: await rows(messages().insert(row('one', id0)).select(shown)),
  nulls: await rows(messages().insert(bulk)),
  defaults: await rows(messages().insert(bulk, { defaultToNull: false }).select(shown)),
  counted: (await messages().insert([row('four'), row('five')], { count: 'exact' })).count,
  resend: await rows(messages().upsert(row('one', id0), { ignoreDuplicates: true }).select()),
  merge: await rows(messages().upsert(row('one!', id0))),
  renamed: await rows(agents().update({ name: 'Coach 2' }).eq('id', process.env.COACH)
    .select('name')),
  not_mine: await rows(agents().update({ name: 'Mine' }).eq('id', process.env.OTHER)
    .select('name')),
  first_only: await rows(agents().update({ sort: 9 }).order('name').limit(1)
    .select('name, sort')),
  deleted: await rows(messages().delete().eq('id', process.env.ID1).select('body')),
  oldest: await rows(messages().delete().eq('agent_id', process.env.COACH).order('body')
    .limit(1).select('body')),
  left: await rows(messages().select('body').order('body')),
})
"""
)


@pytest.mark.parametrize("client", CLIENTS)
def test_writes_single_bulk_defaults_upsert_update_and_limited_delete(
    relay: LocalRelay, client: str
) -> None:
    a, b = relay.person("Writer A"), relay.person("Writer B")
    a.add_agent("Coach")
    a.add_agent("Apple")
    other, _ = b.add_agent("Other")
    ids = [str(uuid.uuid4()) for _ in range(2)]
    if client == "py":
        got = writes_py(relay, a, other["id"], ids)
    else:
        values = {"TOKEN": a.token, "UID": a.id, "COACH": a.agents["Coach"]["id"]}
        values |= {"OTHER": other["id"], "ID0": ids[0], "ID1": ids[1]}
        got = run_js(WRITES_JS, env=env(relay, **values))
    assert got == {
        "single": [{"body": "one", "kind": "text", "meta": {}}],
        "nulls": {"error": "23502"},  # without missing=default a left-out meta is NULL
        "defaults": [
            {"body": "two", "kind": "text", "meta": {"k": 1}},
            {"body": "three", "kind": "text", "meta": {}},
        ],
        "counted": 2,
        "resend": [],  # the id was there: nothing inserted, and no 409 either
        "merge": {"error": "42501"},  # a person never edits a message
        "renamed": [{"name": "Coach 2"}],
        "not_mine": [],
        "first_only": [{"name": "Apple", "sort": 9}],
        "deleted": [{"body": "two"}],
        "oldest": [{"body": "five"}],
        "left": [{"body": "four"}, {"body": "one"}, {"body": "three"}],
    }
    assert relay.sql("select name from yui_agents where id = %s", (other["id"],)) == [("Other",)]
    coach = relay.sql("select sort from yui_agents where id = %s", (a.agents["Coach"]["id"],))
    assert coach == [(0,)]  # the limit held: only the first agent by name was updated
    three = relay.sql(
        "select id, created_at from yui_messages where body = 'three' and user_id = %s", (a.id,)
    )
    assert len(three) == 1 and all(three[0])  # its id and time came from the defaults


# --- functions.invoke ----------------------------------------------------------------------------


def functions_py(relay: LocalRelay, a: Person, b: Person, ip: str) -> dict[str, Any]:
    def invoke(token: str | None, name: str, body: dict[str, Any]) -> Any:
        options = {"body": body, "responseType": "json", "headers": {"x-forwarded-for": ip}}
        with python_client(relay.url, relay.anon_key, token) as client:
            try:
                return client.functions.invoke(name, invoke_options=options)
            except FunctionsHttpError as exc:
                return {"status": exc.status, "error": exc.message}

    made = invoke(a.token, "yui-agents", {"action": "create", "name": "Fn", "pair": True})
    listed = invoke(a.token, "yui-agents", {"action": "list"})
    pair = {"action": "pair", "code": made["pairing"]["code"], "remote_ref": "fn"}
    paired = invoke(None, "yui-connect", {**pair, "host_name": "SDK host"})
    host = paired["connector_token"]
    session = invoke(host, "yui-connect", {"action": "session"})
    revoke = {"action": "connector_revoke", "id": paired["connector"]["id"]}
    return {
        "listed": [agent["name"] for agent in listed["agents"]],
        "served": [agent["remote_ref"] for agent in session["agents"]],
        "session": bool(session["access_token"]),
        "stolen": invoke(b.token, "yui-agents", {"action": "delete", "id": made["agent"]["id"]}),
        "revoked": invoke(a.token, "yui-agents", revoke),
        "after": invoke(host, "yui-connect", {"action": "session"}),
    }


FUNCTIONS_JS = (
    JS
    + """
const headers = { 'x-forwarded-for': process.env.IP }
const invoke = async (token, name, body) => {
  const { data, error } = await client(token).functions.invoke(name, { body, headers })
  if (!error) return data
  return { status: error.context.status, error: (await error.context.json()).error }
}
const a = process.env.TOKEN
const made = await invoke(a, 'yui-agents', { action: 'create', name: 'Fn', pair: true })
const listed = await invoke(a, 'yui-agents', { action: 'list' })
const paired = await invoke(null, 'yui-connect', {
  action: 'pair', code: made.pairing.code, remote_ref: 'fn', host_name: 'SDK host',
})
const host = paired.connector_token
const session = await invoke(host, 'yui-connect', { action: 'session' })
out({
  listed: listed.agents.map((agent) => agent.name),
  served: session.agents.map((agent) => agent.remote_ref),
  session: Boolean(session.access_token),
  stolen: await invoke(process.env.OTHER_TOKEN, 'yui-agents',
    { action: 'delete', id: made.agent.id }),
  revoked: await invoke(a, 'yui-agents', { action: 'connector_revoke', id: paired.connector.id }),
  after: await invoke(host, 'yui-connect', { action: 'session' }),
})
"""
)


@pytest.mark.parametrize("client", CLIENTS)
def test_functions_invoke_yui_agents_and_yui_connect(relay: LocalRelay, client: str) -> None:
    a, b = relay.person("Invoker A"), relay.person("Invoker B")
    ip = fresh_ip()
    if client == "py":
        got = functions_py(relay, a, b, ip)
    else:
        values = {"TOKEN": a.token, "OTHER_TOKEN": b.token, "IP": ip}
        got = run_js(FUNCTIONS_JS, env=env(relay, **values))
    assert got == {
        "listed": ["Fn"],
        "served": ["fn"],
        "session": True,
        "stolen": {"status": 404, "error": "not_found"},
        "revoked": {"revoked": True},
        "after": {"status": 401, "error": "unauthorized"},
    }


def test_a_suspended_person_is_refused_by_both_apis(relay: LocalRelay) -> None:
    person = relay.person("Suspended")
    agent, _ = person.add_agent("Bot")
    relay.sql("update yui_users set suspended_at = now() where id = %s", (person.id,))
    row = {"user_id": person.id, "agent_id": agent["id"], "sender": "user", "body": "hi"}
    with python_client(relay.url, relay.anon_key, person.token) as client:
        assert outcome(lambda: client.table("yui_messages").insert(row).execute()) == {
            "error": "PT403"
        }
        with pytest.raises(FunctionsHttpError) as refused:
            client.functions.invoke("yui-agents", invoke_options={"body": {"action": "list"}})
    assert (refused.value.status, refused.value.message) == (403, "account_suspended")
    code = """
import { createClient } from '@supabase/supabase-js'
const db = createClient(process.env.URL, process.env.ANON, {
  global: { headers: { Authorization: `Bearer ${process.env.TOKEN}` } },
  auth: { persistSession: false, autoRefreshToken: false },
})
const row = JSON.parse(process.env.ROW)
const insert = await db.from('yui_messages').insert(row)
const fn = await db.functions.invoke('yui-agents', { body: { action: 'list' } })
console.log(JSON.stringify({
  insert: [insert.status, insert.error?.message],
  fn: [fn.error.context.status, (await fn.error.context.json()).error],
}))
"""
    got = run_js(code, env=env(relay, TOKEN=person.token, ROW=json.dumps(row)))
    assert got == {"insert": [403, "account_suspended"], "fn": [403, "account_suspended"]}
