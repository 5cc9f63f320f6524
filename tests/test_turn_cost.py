"""What a turn costs PostgreSQL, and that it doesn't grow with a thread's history (issue 21).

Row-level security checks the caller on every row a statement looks at: the claim helpers are
inlined, and a row's agent is compared with the caller's agents fetched once per statement
(0037_turn_cost.sql). Counted, not timed: the plans, the sequential scans of yui_messages during
real turns, and the rows a turn reads on a fresh thread and on one with 20,000 rows.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench.turn_cost import add_history
from tests.helpers.bridge import Bridge, FakeWebhook, Machine
from tests.helpers.relay import LocalRelay, Person

HISTORY = 20_000
TURNS = 6
# Functions a policy would call once per row it looks at, if it weren't written to avoid it.
PER_ROW_CALLS = ("yui_claims(", "yui_claim_uuid(", "yui_uid(", "yui_cid(", "yui_connector_serves(")


def plan(relay: LocalRelay, role: str, claims: dict[str, str], query: str, *params: Any) -> str:
    """EXPLAIN VERBOSE of `query` run as `role` with these JWT claims, as the gateway runs it."""
    with psycopg.connect(relay.superuser) as conn, conn.transaction():
        conn.execute(f"set local role {role}")
        conn.execute("select set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
        rows = conn.execute(f"explain (verbose, costs off) {query}", params).fetchall()
    return "\n".join(line for (line,) in rows)


def message_table_reads(relay: LocalRelay) -> tuple[int, int, int]:
    """(sequential scans, index scans, rows fetched by index) of yui_messages so far."""
    ((seq, idx, fetched),) = relay.sql(
        "select seq_scan, coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0)"
        " from pg_stat_user_tables where relid = 'public.yui_messages'::regclass"
    )
    return int(seq), int(idx), int(fetched)


def index_reads(relay: LocalRelay) -> dict[str, int]:
    """Entries read so far from each index of yui_messages."""
    rows = relay.sql(
        "select indexrelname, idx_tup_read from pg_stat_user_indexes"
        " where relid = 'public.yui_messages'::regclass"
    )
    return {str(name): int(count) for name, count in rows}


def settled_reads(relay: LocalRelay, before: tuple[int, int, int]) -> tuple[int, int, int]:
    """The counters once every backend of the turns has reported (stats arrive within ~1 s of
    a backend going idle); the difference from `before`."""
    last, still = message_table_reads(relay), 0
    while still < 3:
        time.sleep(0.6)
        now = message_table_reads(relay)
        still = still + 1 if now == last else 0
        last = now
    return tuple(a - b for a, b in zip(last, before, strict=True))  # type: ignore[return-value]


def turns(person: Person, agent: dict[str, Any], bridge: Bridge, count: int) -> None:
    """`count` turns one after another, each answered and acked before the next."""
    for n in range(count):
        row_id = str(uuid.uuid4())
        person.say(agent, f"turn {n}", id=row_id)
        bridge.acked([row_id])


@pytest.fixture
def served(relay: LocalRelay, tmp_path: Path) -> Any:
    """A person, an agent and a running bridge (a machine of its own)."""
    with serving(relay, tmp_path / "host") as one:
        yield one


@contextmanager
def serving(relay: LocalRelay, home: Path) -> Iterator[tuple[Person, dict[str, Any], Bridge]]:
    hook = FakeWebhook()
    machine = Machine(home, relay)
    try:
        person = relay.person()
        agent = machine.pair(person, "Counter", "counter")["agent"]
        bridge = machine.bridge(hook.url)
        bridge.wait("start")
        turns(person, agent, bridge, 2)  # the bridge's first reads are not a turn's cost
        yield person, agent, bridge
    finally:
        machine.stop_all()
        hook.close()


def test_the_policies_call_no_function_per_row(relay: LocalRelay, served: Any) -> None:
    person, agent, _ = served
    ((connector_id,),) = relay.sql(
        "select connector_id from public.yui_agents where id = %s", (agent["id"],)
    )
    host = {"role": "yui_connector", "sub": person.id, "cid": str(connector_id)}
    app = {"role": "yui_user", "sub": person.id}
    statements = [
        ("yui_connector", host, "select * from public.yui_messages where agent_id = %s"),
        (
            "yui_connector",
            host,
            "update public.yui_messages set handled_at = now() where agent_id = %s",
        ),
        ("yui_user", app, "select * from public.yui_messages where agent_id = %s"),
    ]
    for role, claims, query in statements:
        text = plan(relay, role, claims, query, agent["id"])
        assert not [call for call in PER_ROW_CALLS if call in text], (query, text)
        # the caller's agents are fetched once, as an initplan, not per row
        assert "InitPlan" in text, text


def reads_per_turn(
    relay: LocalRelay, person: Person, agent: dict[str, Any], bridge: Bridge
) -> tuple[int, list[int]]:
    """Sequential scans of yui_messages over TURNS turns, and the rows each turn read by index
    (a bridge's periodic reads, a catch-up every 20 s, a heartbeat, land in one turn or another:
    the median keeps them out of what a turn costs)."""
    before = last = message_table_reads(relay)
    fetched = []
    for _ in range(TURNS):
        turns(person, agent, bridge, 1)
        time.sleep(1.2)  # a backend reports its counts within a second of going idle
        now = message_table_reads(relay)
        fetched.append(now[2] - last[2])
        last = now
    seq_scans, _, _ = settled_reads(relay, before)
    return seq_scans, fetched


def test_a_long_history_costs_a_turn_nothing_more(relay: LocalRelay, tmp_path: Path) -> None:
    """Two people, one with a fresh thread and one with 20,000 rows, on one table: the long
    thread's turns read no more rows than the fresh one's, and no turn scans the table."""
    with (
        serving(relay, tmp_path / "fresh") as (fresh, fresh_agent, fresh_bridge),
        serving(relay, tmp_path / "long") as (long, long_agent, long_bridge),
    ):
        add_history(relay.superuser, long.id, long_agent["id"], HISTORY)
        seq_fresh, fetched_fresh = reads_per_turn(relay, fresh, fresh_agent, fresh_bridge)
        walked = index_reads(relay)
        seq_long, fetched_long = reads_per_turn(relay, long, long_agent, long_bridge)
        walked = {name: n - walked.get(name, 0) for name, n in index_reads(relay).items()}

    assert (seq_fresh, seq_long) == (0, 0)  # no turn reads yui_messages from end to end
    fresh_median, long_median = statistics.median(fetched_fresh), statistics.median(fetched_long)
    assert fresh_median > 0
    # On failure: each turn's count, and which index the long thread's turns walked.
    assert long_median <= 1.2 * fresh_median, (fetched_fresh, fetched_long, walked)


def test_looking_for_the_answer_of_an_unanswered_row_reads_no_history(
    relay: LocalRelay, tmp_path: Path
) -> None:
    """A row marked delivered but not handled (a crash mid-turn) is looked for an answer
    before it is asked again. With none to find, that look reads what came after the row, not
    the 20,000 rows before it."""
    with serving(relay, tmp_path / "long") as (long, agent, bridge):
        add_history(relay.superuser, long.id, agent["id"], HISTORY)
        before = message_table_reads(relay)
        asked = str(uuid.uuid4())
        relay.sql(
            "insert into public.yui_messages (id, user_id, agent_id, sender, body, delivered_at)"
            " values (%s, %s, %s, 'user', 'asked before a crash', now())",
            (asked, long.id, agent["id"]),
        )
        bridge.acked([asked])
        _, _, fetched = settled_reads(relay, before)
    assert fetched < 200, fetched
