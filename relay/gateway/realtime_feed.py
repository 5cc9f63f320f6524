"""Realtime's feed: one LISTEN connection, and the reads that turn its notifications into rows.

The insert trigger's notifications carry ids only. For each batch of them the rows are read once
per identity among the joined topics (`realtime_limits.IDENTITY`: the claims the policies read),
under that identity, so the database decides who hears what and a person holding many tokens
costs one read, not one per token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections import deque
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import psycopg

from relay.gateway import realtime_limits as limits
from relay.gateway.db import Database, one
from relay.gateway.realtime_limits import Census

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings
    from relay.gateway.realtime import Client, Topic

log = logging.getLogger("yui.realtime")

CHANNEL = "yui_messages"  # the NOTIFY channel and the one table served
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


class Hub:
    """Every socket of this gateway, who holds them, the listening connection, and the
    dispatcher that turns notifications into rows each topic's identity may read."""

    def __init__(self, db: Database, settings: GatewaySettings) -> None:
        self.db = db
        self.settings = settings
        self.clients: set[Client] = set()
        self.census = Census()
        self.topics: set[Topic] = set()  # those with postgres_changes
        self.pending: deque[tuple[str, str]] = deque(maxlen=MAX_PENDING)  # (id, received at)
        self.wake = asyncio.Event()
        self.listening = asyncio.Event()
        self.columns = "[]"

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
            row_id = str(uuid.UUID(json.loads(payload)["id"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("realtime: ignored a notification that names no row id")
            return
        self.pending.append((row_id, _now()))
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

    async def deliver(self, batch: list[tuple[str, str]]) -> None:
        for topic in [t for t in self.topics if t.expired]:
            topic.client.shut(topic.name, "Token has expired", topic.join_ref)
        groups: dict[str, tuple[str, dict[str, Any], list[Topic]]] = {}
        for topic in self.topics:
            if topic.key not in groups:
                groups[topic.key] = (topic.claims["role"], limits.identity(topic.claims), [])
            groups[topic.key][2].append(topic)
        ids = [row_id for row_id, _ in batch]
        gate = asyncio.Semaphore(READERS)

        async def share(role: str, claims: dict[str, Any], topics: list[Topic]) -> None:
            async with gate:
                rows = await self.read(role, claims, ids)
            for row_id, received in batch:
                row = rows.get(row_id)
                if row is None:
                    continue
                data = (
                    f'{{"schema":"public","table":"{CHANNEL}","commit_timestamp":"{received}",'
                    f'"eventType":"INSERT","type":"INSERT","new":{row},"record":{row},'
                    f'"columns":{self.columns},"errors":null}}'
                )
                for topic in topics:
                    if topic.active:
                        topic.client.send(topic.head + data + topic.tail)

        await asyncio.gather(*(share(*group) for group in groups.values()))

    async def read(self, role: str, claims: dict[str, Any], ids: list[str]) -> dict[str, str]:
        """The rows among `ids` this identity may read, as the database decides right now."""
        try:
            async with self.db.as_role(role, claims) as conn:
                cur = await conn.execute(READ_ROWS, (ids,))
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
