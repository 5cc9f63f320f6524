"""What an insert into yui_messages costs PostgreSQL (issue 21, 0039_insert_cost.sql).

The helpers its triggers and policies call are planned once, not on every call; the sender's
rate bucket, whose row stays locked until the transaction ends, is taken after every other
trigger has run; and what the bucket charges is unchanged: a token a row, none for a resend.
"""

from __future__ import annotations

import threading
import time
import uuid

import psycopg

from tests.helpers.relay import Host, LocalRelay

# SQL helpers on an insert's path, inlined where they are called (a SQL function PostgreSQL
# can't inline is planned anew on every call), and a role that calls them: the triggers that
# read turn ids run as the migrations' owner.
INLINED = {
    "yui_uuid_or_null": ("postgres", "select public.yui_uuid_or_null(x) from (values ('a')) v(x)"),
    "yui_limited_caller": ("yui_user", "select public.yui_limited_caller()"),
}
# Security definer helpers (never inlined), in plpgsql, whose plans a session keeps.
PLANNED_ONCE = ("yui_limit", "yui_message_exists", "yui_served_agents", "yui_owned_agents")


def explain(relay: LocalRelay, role: str, query: str) -> str:
    with psycopg.connect(relay.superuser) as conn, conn.transaction():
        conn.execute(f"set local role {role}")
        rows = conn.execute(f"explain (verbose, costs off) {query}").fetchall()
    return "\n".join(line for (line,) in rows)


def test_the_sql_helpers_of_an_insert_are_inlined(relay: LocalRelay) -> None:
    for name, (role, query) in INLINED.items():
        text = explain(relay, role, query)
        assert f"{name}(" not in text, text


def test_the_security_definer_helpers_keep_their_plans(relay: LocalRelay) -> None:
    rows = relay.sql(
        "select p.proname, l.lanname from pg_proc p join pg_language l on l.oid = p.prolang"
        " where p.pronamespace = 'public'::regnamespace and p.proname = any(%s)",
        (list(PLANNED_ONCE),),
    )
    assert dict(rows) == dict.fromkeys(PLANNED_ONCE, "plpgsql")


def test_the_bucket_is_taken_after_every_other_trigger(relay: LocalRelay) -> None:
    """The bucket's row is locked from the take until the transaction ends: a person writing to
    several agents at once waits on it, so it is taken last, once the row is in."""
    rows = relay.sql(
        "select t.tgname, t.tgtype & 2 <> 0, p.prosrc ~ 'yui_take'"
        " from pg_trigger t join pg_proc p on p.oid = t.tgfoid"
        " where t.tgrelid = 'public.yui_messages'::regclass and not t.tgisinternal"
        " and t.tgtype & 4 <> 0 order by t.tgtype & 2 <> 0, t.tgname"
    )
    takers = [(name, before) for name, before, takes in rows if takes]
    assert takers == [("yui_messages_spend", False)]
    after = [name for name, before, _ in rows if not before]
    assert after[-1] == "yui_messages_spend", after  # AFTER triggers fire in name order


def test_a_token_a_row_and_none_for_a_resend(relay: LocalRelay) -> None:
    person = relay.person("Bucket")
    agent, code = person.add_agent("Counted")
    host = Host.pair(relay, code, "counted")
    key = f"msg:u:{person.id}"
    with relay.limits(msg_user_burst=10, msg_user_per_min=0):
        first = str(uuid.uuid4())
        assert person.say(agent, "one", id=first).status_code == 201
        (left,) = relay.sql("select tokens from yui_rate_buckets where key = %s", (key,))[0]
        two = [
            {"id": str(uuid.uuid4()), "user_id": person.id, "agent_id": agent["id"],
             "sender": "user", "body": f"row {n}"}
            for n in range(2)
        ]  # fmt: skip
        assert relay.rest("POST", "yui_messages", person.token, body=two).status_code == 201
        assert person.say(agent, "one", id=first).status_code == 409
        (now,) = relay.sql("select tokens from yui_rate_buckets where key = %s", (key,))[0]
    assert left - now == 2
    assert host.reply(agent, "answer").status_code == 201
    ((connector_id,),) = relay.sql(
        "select connector_id::text from yui_agents where id = %s", (agent["id"],)
    )
    assert relay.sql("select 1 from yui_rate_buckets where key = %s", (f"msg:c:{connector_id}",))


def test_a_person_writes_only_to_their_own_agents(relay: LocalRelay) -> None:
    """0039's policy checks the row's agent by id: another person's agent, a made-up one and
    a control row to either are all refused, and nothing lands."""
    me, other = relay.person("Me"), relay.person("Other")
    mine, _ = me.add_agent("Mine")
    theirs, _ = other.add_agent("Theirs")
    assert me.say(mine, "hello").status_code == 201
    refused = [
        me.say(agent, body, **row).status_code
        for agent in (theirs, {"id": str(uuid.uuid4())})
        for body, row in (("hello", {}), ("stop", {"kind": "control", "meta": {"control": "stop"}}))
    ]
    assert all(code >= 400 for code in refused), refused
    rows = relay.sql("select body from yui_messages where user_id = %s", (me.id,))
    assert rows == [("hello",)]


def served_lists(relay: LocalRelay) -> dict[str, list[str]]:
    """Each host's kept list (0040), next to what yui_agents says it serves."""
    rows = relay.sql(
        "select c.id::text,"
        " array(select x::text from unnest(coalesce(s.agent_ids, '{}')) x order by 1),"
        " array(select a.id::text from yui_agents a where a.connector_id = c.id order by 1)"
        " from yui_connectors c left join yui_served s on s.connector_id = c.id"
    )
    assert [row[0] for row in rows if row[1] != row[2]] == []
    return {cid: kept for cid, kept, _ in rows}


def test_a_hosts_list_follows_its_agents(relay: LocalRelay) -> None:
    """Paired, moved to another host, unbound, deleted, two added at once, the host removed:
    the kept list is always the host's agents, and the host reads exactly those."""
    person = relay.person("Lists")
    first, code = person.add_agent("First")
    host = Host.pair(relay, code, "first")
    second, code = person.add_agent("Second")
    Host.pair(relay, code, "second")
    here, there = (
        relay.sql("select connector_id::text from yui_agents where id = %s", (a["id"],))[0][0]
        for a in (first, second)
    )
    assert served_lists(relay)[here] == [first["id"]]
    relay.sql("update yui_agents set connector_id = %s where id = %s", (here, second["id"]))
    lists = served_lists(relay)
    assert (lists[here], lists[there]) == (sorted([first["id"], second["id"]]), [])
    seen = relay.rest("GET", "yui_agents", host.jwt, params={"select": "id"}).json()
    assert sorted(row["id"] for row in seen) == lists[here]
    relay.sql("update yui_agents set connector_id = null where id = %s", (first["id"],))
    relay.sql("delete from yui_agents where id = %s", (second["id"],))
    assert served_lists(relay)[here] == []

    add = "insert into yui_agents (user_id, name, handle, connector_id) values (%s, %s, %s, %s)"
    with psycopg.connect(relay.superuser) as one, psycopg.connect(relay.superuser) as two:
        one.execute(add, (person.id, "Third", "third", here))  # holds the list's row

        def add_fourth() -> None:
            two.execute(add, (person.id, "Fourth", "fourth", here))  # waits for the first
            two.commit()

        waiting = threading.Thread(target=add_fourth)
        waiting.start()
        time.sleep(0.3)
        one.commit()
        waiting.join(10)
    assert len(served_lists(relay)[here]) == 2
    relay.sql("delete from yui_connectors where id = %s", (here,))
    assert here not in served_lists(relay)
