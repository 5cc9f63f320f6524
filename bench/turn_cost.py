"""What one turn costs PostgreSQL, on a fresh thread and on one with 20,000 rows (issue 21).

Two agents of their own on one host: one thread as new, the other given 20,000 handled rows
straight into the table. The same closed series of turns on each, and from PostgreSQL's own
counters: CPU of its processes, transactions, rows read from the message table (by index and by
sequential scan) and the calls of the row-level security helpers (`track_functions = all` on
the bench's relay). A change's effect on a turn is the difference between two runs' tables.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench.bridge import BridgeProcess
from bench.cpu import _stat, children
from bench.relay import Person, Relay, pair_host

HISTORY = 20_000
# The functions a policy or a trigger runs in a turn that are worth watching by name.
WATCHED = (
    "yui_claims",
    "yui_uid",
    "yui_connector_serves",
    "yui_served_agents",
    "yui_owned_agents",
    "yui_turn_open",
    "yui_limit",
    "yui_take",
)
STATS = (
    "select coalesce(sum(seq_scan), 0), coalesce(sum(seq_tup_read), 0),"
    " coalesce(sum(idx_tup_fetch), 0) from pg_stat_user_tables"
    " where relid = 'public.yui_messages'::regclass"
)


@dataclass(frozen=True)
class Counters:
    cpu: float  # seconds, every PostgreSQL process
    commits: int
    seq_scans: int
    seq_rows: int
    index_rows: int
    calls: dict[str, int]

    @classmethod
    def read(cls, relay: Relay) -> Counters:
        postmaster = relay.postmaster_pid()
        cpu = sum(_stat(pid)[1] for pid in children(postmaster))
        ((commits,),) = relay.sql(
            "select xact_commit from pg_stat_database where datname = current_database()"
        )
        ((seq, seq_rows, index_rows),) = relay.sql(STATS)
        calls = dict(relay.sql("select funcname, calls from pg_stat_user_functions"))
        return cls(cpu, commits, seq, seq_rows, index_rows, calls)

    def per_turn(self, before: Counters, turns: int) -> dict[str, float]:
        row = {
            "PostgreSQL CPU (ms)": 1000 * (self.cpu - before.cpu) / turns,
            "transactions": (self.commits - before.commits) / turns,
            "messages read by index": (self.index_rows - before.index_rows) / turns,
            "sequential scans of messages": (self.seq_scans - before.seq_scans) / turns,
            "messages read by those scans": (self.seq_rows - before.seq_rows) / turns,
        }
        for name in WATCHED:
            row[f"{name}() calls"] = (self.calls.get(name, 0) - before.calls.get(name, 0)) / turns
        return row


SETTLE = 11.0
"""Seconds until every backend has reported its last transaction. An idle backend reports
within a second, unless another holds the shared entry it adds to: then it tries again 10 s
later (PostgreSQL's PGSTAT_IDLE_INTERVAL), and a shorter wait let one series' counts leak into
the next (~1.8× on every count, none on CPU, which /proc gives at once)."""


def settled(relay: Relay, wait: float) -> Counters:
    """The counters once PostgreSQL has had `wait` seconds to report them."""
    time.sleep(wait)
    return Counters.read(relay)


def add_history(superuser: str, user_id: str, agent_id: str, count: int) -> None:
    """`count` handled rows in one thread (half the person's, half the agent's answers),
    written straight into the table without triggers, then vacuumed and analyzed: left to
    autovacuum, that work would land in whichever series runs when it wakes (every minute)."""
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute("set session_replication_role = replica")
        conn.execute(
            "insert into public.yui_messages"
            " (user_id, agent_id, sender, body, meta, created_at, delivered_at, handled_at)"
            " select %s, %s, case when g %% 2 = 0 then 'user' else 'agent' end, 'old ' || g,"
            "  case when g %% 2 = 1 then jsonb_build_object('turn', jsonb_build_array("
            "   gen_random_uuid())) else '{}'::jsonb end,"
            "  now() - interval '2 days' + g * interval '1 second', now() - interval '1 day',"
            "  now() - interval '1 day'"
            " from generate_series(1, %s) g",
            (user_id, agent_id, count),
        )
        conn.execute("vacuum (analyze) public.yui_messages")


def series(
    relay: Relay, person: Person, agent_id: str, bridge: BridgeProcess, turns: int, wait: float
) -> Any:
    """`turns` turns one after another, each acked before the next; the cost of one."""
    before = settled(relay, wait)
    for _ in range(turns):
        row = person.say(agent_id)
        if not bridge.wait_acked(row, timeout=30):
            raise TimeoutError(f"turn {row} was never acked")
    return settled(relay, wait).per_turn(before, turns)


def run(
    relay: Relay, person: Person, root: Path, hook_url: str, turns: int, wait: float = SETTLE
) -> Any:
    """Pair a host of its own with two agents, serve both with a live bridge, and measure:
    per-turn cost on the fresh thread and on the 20,000-row one (`wait`: see SETTLE)."""
    host = pair_host(person, root / "hosts", "cost", 2)
    fresh, long = host.ids
    bridge = BridgeProcess(
        root, host.state, relay.url, hook_url, poll_only=False, anon_key=relay.anon_key
    )
    relay.sql("alter system set track_functions = 'all'")
    relay.sql("select pg_reload_conf()")
    try:
        bridge.ready()
        for agent_id in (fresh, long):  # the bridge's first reads are not a turn's cost
            series(relay, person, agent_id, bridge, 2, 0.0)
        add_history(relay.superuser, person.id, long, HISTORY)
        return {
            "fresh thread": series(relay, person, fresh, bridge, turns, wait),
            f"{HISTORY:,}-row thread": series(relay, person, long, bridge, turns, wait),
        }
    finally:
        bridge.stop()
        relay.sql("alter system reset track_functions")
        relay.sql("select pg_reload_conf()")
