"""Realtime's feed: one LISTEN connection, and the reads that turn its notifications into rows.

The triggers' notifications carry what changed (INSERT, UPDATE or DELETE) and ids only. For each
batch of them the rows are read once per identity among the joined topics
(`realtime_limits.IDENTITY`: the claims the policies read), under that identity, so the database
decides who hears what and a person holding many tokens costs one read, not one per token; an
identity whose subscriptions want none of a batch's kinds of change costs no read at all. Each
topic's filters then test the row its identity read. A deleted row can't be read: a DELETE goes
only to the person whose thread it was (and the service role), with the primary key as
`old_record`, as Realtime sends it for a table with the default replica identity.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import psycopg

from relay.gateway import realtime_limits as limits
from relay.gateway.db import Database, one, run
from relay.gateway.realtime_changes import OPS, SCHEMA, TABLE, Subscription, columns_of
from relay.gateway.realtime_limits import Census
from relay.gateway.realtime_rooms import Rooms
from relay.metrics import FANNED_OUT

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings
    from relay.gateway.realtime import Client, Topic

log = logging.getLogger("yui.realtime")

CHANNEL = "yui_messages"  # the NOTIFY channel
TOLD = ("user_id", "agent_id", "sender", "kind")  # columns a notification may give (0004)
MAX_PENDING = 20_000  # notifications waiting to be read; past it the oldest are dropped
READ_CHUNK = 500  # ids read in one query
READERS = 4  # reads in flight at once, so REST keeps most of the pool
PING_EVERY = 20.0  # an idle listening connection is checked this often
PING_TIMEOUT = 10.0
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 10.0  # reconnecting the listener
CLOSE_WAIT = 2.0  # a socket being closed is dropped if its close can't be sent by then

READ_ROWS = (
    "select m.id::text, to_jsonb(m)::text from public.yui_messages m where m.id = any(%s::uuid[])"
)
READ_COLUMNS = """
    select coalesce(json_agg(json_build_object('name', a.attname, 'type', t.typname)
                             order by a.attnum), '[]')::text
    from pg_attribute a join pg_type t on t.oid = a.atttypid
    where a.attrelid = 'public.yui_messages'::regclass and a.attnum > 0 and not a.attisdropped
"""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Change:
    """One notification: what happened to which row, and when the feed heard it."""

    op: str
    id: str
    at: str
    user_id: str | None = None  # a DELETE's audience
    agent_id: str | None = None
    told: tuple[tuple[str, str], ...] = ()  # columns the notification gave (an insert's sender)


@dataclass
class Delivery:
    """One change as one identity may see it: the row it read (None for a DELETE), parsed and
    framed at most once however many topics hear it."""

    change: Change
    row: str | None
    columns: str
    parsed: dict[str, Any] | None = None
    framed: dict[tuple[str, ...] | None, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """What filters test: the row, or for a DELETE what the notification says of it."""
        if self.parsed is None:
            if self.row is None:
                change = self.change
                self.parsed = {"id": change.id, "user_id": change.user_id}
                self.parsed["agent_id"] = change.agent_id
            else:
                self.parsed = json.loads(self.row)
        return self.parsed

    def data(self, select: tuple[str, ...] | None) -> str:
        """The change's `data`, narrowed to `select`'s columns if given."""
        if select not in self.framed:
            self.framed[select] = self._frame(select)
        return self.framed[select]

    def _frame(self, select: tuple[str, ...] | None) -> str:
        op, columns, row = self.change.op, self.columns, self.row
        if select is not None:
            found = self.record()
            row = json.dumps({name: found.get(name) for name in select})
            kept = [c for c in json.loads(columns) if c["name"] in select]
            columns = json.dumps(kept)
        head = (
            f'{{"schema":"{SCHEMA}","table":"{TABLE}","commit_timestamp":"{self.change.at}",'
            f'"eventType":"{op}","type":"{op}",'
        )
        old = json.dumps({"id": self.change.id})
        if op == "INSERT":
            body = f'"new":{row},"record":{row},'
        elif op == "UPDATE":
            body = f'"record":{row},"old_record":{old},'
        else:
            body = f'"old_record":{old},'
        return f'{head}{body}"columns":{columns},"errors":null}}'


def _may_hear(change: Change, subs: list[Subscription]) -> bool:
    """Whether any of `subs` could hear `change`, judged on what its notification told: a row
    no filter can match isn't read (an app that follows one agent, `agent_id=eq.…`, costs
    nothing when another agent's row goes in)."""
    told = dict(change.told)
    return any(change.op in s.ops and s.might_match(told) for s in subs)


def hears_delete(claims: dict[str, Any], change: Change) -> bool:
    """Who hears of a row that can no longer be read: its person, and the service role."""
    if claims.get("role") == "service_role":
        return True
    return claims.get("role") == "yui_user" and claims.get("sub") == change.user_id


class Hub:
    """Every socket of this gateway, who holds them, the listening connection, and the
    dispatcher that turns notifications into rows each topic's identity may read."""

    def __init__(self, db: Database, settings: GatewaySettings) -> None:
        self.db = db
        self.settings = settings
        self.clients: set[Client] = set()
        self.census = Census()
        self.rooms = Rooms()
        self.topics: set[Topic] = set()  # those with postgres_changes
        self.pending: deque[Change] = deque(maxlen=MAX_PENDING)
        self.wake = asyncio.Event()
        self.listening = asyncio.Event()
        self.columns = "[]"
        self.types: dict[str, str] = {}  # column → type, for filters

    @property
    def live(self) -> bool:
        return self.listening.is_set()

    def set_live(self, live: bool) -> None:
        if live == self.live:
            return
        if live:
            self.listening.set()
        else:
            self.listening.clear()
        for topic in list(self.topics):
            topic.client.system(topic, live)

    def notify(self, payload: str) -> None:
        try:
            note = json.loads(payload)
            row_id = str(uuid.UUID(note["id"]))
            op = note.get("op", "INSERT")  # the insert trigger (0004) names no op
            if op not in OPS:
                raise ValueError(op)
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("realtime: ignored a notification that names no change to a row")
            return
        owner, agent = note.get("user_id"), note.get("agent_id")
        told = tuple((k, v) for k in TOLD if isinstance(v := note.get(k), str))
        change = Change(op, row_id, _now(), owner and str(owner), agent and str(agent), told)
        self.pending.append(change)
        self.wake.set()

    async def listen(self) -> None:
        """LISTEN on one dedicated connection; reconnect with backoff whenever it drops."""
        delay = BACKOFF_FIRST
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.settings.conninfo,
                    autocommit=True,
                    application_name="yui-realtime",
                    connect_timeout=10,
                ) as conn:
                    await conn.execute(f"listen {CHANNEL}")
                    columns = await (await conn.execute(READ_COLUMNS)).fetchone()
                    self.columns = one(columns, "the columns aggregate")[0]
                    self.types = columns_of(self.columns)
                    self.set_live(True)
                    delay = BACKOFF_FIRST
                    while True:
                        async for notice in conn.notifies(timeout=PING_EVERY):
                            self.notify(notice.payload)
                        await asyncio.wait_for(conn.execute("select 1"), PING_TIMEOUT)
            except (psycopg.Error, OSError, TimeoutError) as exc:
                log.warning("realtime: no connection to PostgreSQL (%s); retrying", exc)
            self.set_live(False)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def dispatch(self) -> None:
        """Read what is pending, a batch at a time; what arrives meanwhile forms the next."""
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.pending:
                batch = [self.pending.popleft() for _ in range(min(READ_CHUNK, len(self.pending)))]
                try:
                    await self.deliver(batch)
                except Exception:
                    log.exception("realtime: a delivery failed")

    async def deliver(self, batch: list[Change]) -> None:
        for topic in [t for t in self.topics if t.expired]:
            topic.client.shut(topic.name, "Token has expired", topic.join_ref)
        groups: dict[str, tuple[dict[str, Any], list[Topic]]] = {}
        for topic in self.topics:
            groups.setdefault(topic.key, (topic.claims, []))[1].append(topic)
        gate = asyncio.Semaphore(READERS)

        async def share(claims: dict[str, Any], topics: list[Topic]) -> None:
            subs = [s for t in topics for s in t.subs]
            wanted = frozenset().union(*(s.ops for s in subs))
            ids = list(
                dict.fromkeys(c.id for c in batch if c.op != "DELETE" and _may_hear(c, subs))
            )
            rows: dict[str, str] = {}
            if ids:
                async with gate:
                    rows = await self.read(claims["role"], limits.identity(claims), ids)
            heard = 0
            for change in batch:
                if change.op not in wanted:
                    continue
                if change.op == "DELETE":
                    if not hears_delete(claims, change):
                        continue
                    delivery = Delivery(change, None, self.columns)
                elif change.id in rows:
                    delivery = Delivery(change, rows[change.id], self.columns)
                else:
                    continue
                for topic in topics:
                    if topic.active:
                        topic.hear(delivery)
                        heard += 1
            FANNED_OUT.inc(heard)

        await asyncio.gather(*(share(*group) for group in groups.values()))

    async def read(self, role: str, claims: dict[str, Any], ids: list[str]) -> dict[str, str]:
        """The rows among `ids` this identity may read, as the database decides right now."""
        try:
            async with self.db.as_role(role, claims) as conn:
                cur = conn.cursor()
                await run(conn, cur, READ_ROWS, (ids,), commit=True)
                return dict(await cur.fetchall())
        except psycopg.errors.InsufficientPrivilege:
            return {}  # a role with no grant on the table (anon) reads nothing
        except psycopg.Error as exc:
            log.warning("realtime: could not read rows to deliver (%s)", exc)
            return {}

    async def close(self) -> None:
        for client in list(self.clients):
            client.close(1001, "the gateway is shutting down")
        waits = [client.done.wait() for client in list(self.clients)]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*waits), CLOSE_WAIT)
