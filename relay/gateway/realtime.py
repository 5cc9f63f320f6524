"""Realtime: the part of Supabase Realtime's Phoenix protocol that hosts use, under /realtime/v1.

A socket joins topics `realtime:<name>` with a token and asks for INSERTs on
public.yui_messages. The insert trigger's notifications carry ids only: for each batch of them
the hub reads the rows once per distinct set of claims, as those claims (exactly as a REST
request runs), so the database's policies, not this module, decide who hears what, and a revoked
or suspended host hears nothing from its next notification on. Nothing lives in the gateway, so
several gateways on one database all deliver. While the listening connection is down nobody
gets anything; every joined topic is told (a `system` error, then `system` ok once it is back)
so a host can catch up by reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import psycopg
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from relay.gateway.db import Database, one
from relay.gateway.functions import token_claims
from relay.keys import InvalidToken

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings

log = logging.getLogger("yui.realtime")

CHANNEL = "yui_messages"  # the NOTIFY channel and the one table served
TOPIC_PREFIX = "realtime:"
VSN = "1.0.0"  # Phoenix's JSON object frames
IDLE_TIMEOUT = 60.0  # a socket that sends nothing (not even a heartbeat) this long is closed
MAX_TOPICS = 100  # joined topics per socket
MAX_QUEUED = 1000  # frames waiting for a slow socket before it is closed
MAX_PENDING = 20_000  # notifications waiting to be read; past it the oldest are dropped
READ_CHUNK = 500  # ids read in one query
READERS = 4  # reads in flight at once, so REST keeps most of the pool
PING_EVERY = 20.0  # an idle listening connection is checked this often
PING_TIMEOUT = 10.0
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 10.0  # reconnecting the listener
READY_WAIT = 5.0  # startup waits this long for the first LISTEN
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

_change_ids = itertools.count(1)


def _encode(topic: str, event: str, payload: Any, ref: Any = None, join_ref: Any = None) -> str:
    frame = {"topic": topic, "event": event, "payload": payload, "ref": ref, "join_ref": join_ref}
    return json.dumps(frame, separators=(",", ":"))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _changes(config: Any) -> list[dict[str, str]]:
    """The postgres_changes a join's config asks for, as echoed in its reply; ValueError if any
    can't be served (better refused than silently never delivered)."""
    entries = (config.get("postgres_changes") if isinstance(config, dict) else None) or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("config.postgres_changes must be a list of objects")
    wanted = []
    for entry in entries:
        if entry.get("filter"):
            raise ValueError("postgres_changes filters are not supported")
        event, schema, table = entry.get("event"), entry.get("schema"), entry.get("table")
        if event not in ("INSERT", "*") or schema != "public" or table != CHANNEL:
            raise ValueError(f"only INSERT on public.{CHANNEL} is served")
        wanted.append({"event": event, "schema": schema, "table": table})
    return wanted


@dataclass(eq=False)
class Topic:
    """One joined topic on one socket with postgres_changes, and the identity its rows are read
    under (replaced when the client sends a new access_token)."""

    client: Client
    name: str
    join_ref: Any
    change_ids: list[int]
    claims: dict[str, Any]
    active: bool = True
    key: str = field(init=False)  # topics with equal keys share one read
    head: str = field(init=False)  # a delivery frame is head + data + tail
    tail: str = field(init=False)

    def __post_init__(self) -> None:
        self.identify(self.claims)
        self.head = (
            f'{{"topic":{json.dumps(self.name)},"event":"postgres_changes",'
            f'"payload":{{"ids":{json.dumps(self.change_ids)},"data":'
        )
        self.tail = f'}},"ref":null,"join_ref":{json.dumps(self.join_ref)}}}'

    def identify(self, claims: dict[str, Any]) -> None:
        self.claims = claims
        self.key = json.dumps(claims, sort_keys=True)

    @property
    def expired(self) -> bool:
        return self.claims["exp"] <= time.time()


class Client:
    """One websocket: its joined topics, and the frames queued for it. Its own task sends them,
    so a slow socket never holds up the hub (and one too slow is closed: it catches up by
    reading)."""

    def __init__(self, ws: WebSocket, hub: Hub, secret: str) -> None:
        self.ws = ws
        self.hub = hub
        self.secret = secret
        self.apikey = ws.query_params.get("apikey")  # the token of a join that brings none
        self.topics: dict[str, Topic | None] = {}  # None: joined without postgres_changes
        self.frames: deque[str] = deque()
        self.ready = asyncio.Event()
        self.closing: tuple[int, str] | None = None
        self.ending = asyncio.Event()  # set once a close is asked for
        self.done = asyncio.Event()

    # --- outgoing -------------------------------------------------------------------------

    def send(self, frame: str) -> None:
        if self.closing is not None:
            return
        if len(self.frames) >= MAX_QUEUED:
            self.frames.clear()
            self.close(1008, "too slow to read its messages")
            return
        self.frames.append(frame)
        self.ready.set()

    def push(
        self, topic: str, event: str, payload: Any, ref: Any = None, join_ref: Any = None
    ) -> None:
        self.send(_encode(topic, event, payload, ref, join_ref))

    def reply(self, msg: dict[str, Any], status: str, response: dict[str, Any]) -> None:
        payload = {"status": status, "response": response}
        self.push(msg["topic"], "phx_reply", payload, msg.get("ref"), msg.get("join_ref"))

    def system(self, topic: Topic, live: bool) -> None:
        """Tell a topic whether its postgres_changes are being heard."""
        if live:
            status, message = "ok", "Subscribed to PostgreSQL"
        else:
            status, message = "error", "Not connected to PostgreSQL: read to catch up"
        payload = {
            "status": status,
            "message": message,
            "extension": "postgres_changes",
            "channel": topic.name.removeprefix(TOPIC_PREFIX),
        }
        self.push(topic.name, "system", payload, join_ref=topic.join_ref)

    def close(self, code: int, reason: str) -> None:
        if self.closing is None:
            self.closing = (code, reason)
            self.ready.set()
            self.ending.set()

    async def write(self) -> None:
        while True:
            await self.ready.wait()
            self.ready.clear()
            while self.frames:
                await self.ws.send_text(self.frames.popleft())
            if self.closing is not None:
                await self.ws.close(*self.closing)
                return

    async def deadline(self) -> None:
        """Ends once a close has been asked for CLOSE_WAIT ago: a peer that stopped reading
        (half-open, or too slow) would keep the writer waiting for ever."""
        await self.ending.wait()
        await asyncio.sleep(CLOSE_WAIT)

    # --- incoming -------------------------------------------------------------------------

    async def read(self) -> None:
        """Handle frames until the peer goes; one silent for IDLE_TIMEOUT is closed, so a
        half-open socket doesn't linger."""
        while True:
            try:
                message = await asyncio.wait_for(self.ws.receive(), IDLE_TIMEOUT)
            except TimeoutError:
                self.close(1000, "heartbeat timeout")
                continue
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is None:
                self.close(1003, "expected JSON text frames")
                continue
            self.handle(message["text"])

    def handle(self, text: str) -> None:
        try:
            msg = json.loads(text)
        except ValueError:
            msg = None
        if not (
            isinstance(msg, dict)
            and isinstance(msg.get("topic"), str)
            and isinstance(msg.get("event"), str)
        ):
            self.close(1007, "expected a Phoenix message: a JSON object with topic and event")
            return
        payload = msg.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        topic, event = msg["topic"], msg["event"]
        self.expire()
        if topic == "phoenix":
            if event == "heartbeat":
                self.reply(msg, "ok", {})
            else:
                self.reply(msg, "error", {"reason": f"unsupported event {event}"})
        elif event == "phx_join":
            self.join(msg, payload)
        elif topic not in self.topics:
            self.reply(msg, "error", {"reason": "unmatched topic"})
        elif event == "phx_leave":
            self.leave(topic)
            self.reply(msg, "ok", {})
        elif event == "access_token":
            self.renew(msg, payload)
        else:
            self.reply(msg, "error", {"reason": f"unsupported event {event}"})

    def join(self, msg: dict[str, Any], payload: dict[str, Any]) -> None:
        name = msg["topic"]
        if not name.startswith(TOPIC_PREFIX):
            self.reply(msg, "error", {"reason": "unmatched topic"})
            return
        if name not in self.topics and len(self.topics) >= MAX_TOPICS:
            self.reply(msg, "error", {"reason": f"at most {MAX_TOPICS} topics per socket"})
            return
        try:
            claims = self.claims(payload.get("access_token") or self.apikey)
            wanted = _changes(payload.get("config"))
        except InvalidToken as exc:
            self.reply(msg, "error", {"reason": exc.reason})
            return
        except ValueError as exc:
            self.reply(msg, "error", {"reason": str(exc)})
            return
        self.leave(name)  # a second join of a topic replaces the first
        ids = [next(_change_ids) for _ in wanted]
        topic = Topic(self, name, msg.get("join_ref"), ids, claims) if wanted else None
        self.topics[name] = topic
        changes = [{"id": i, **w} for i, w in zip(ids, wanted, strict=True)]
        self.reply(msg, "ok", {"postgres_changes": changes})
        if topic is not None:
            self.hub.topics.add(topic)
            self.system(topic, self.hub.live)

    def renew(self, msg: dict[str, Any], payload: dict[str, Any]) -> None:
        """A renewed session: later rows are read under the new claims; a bad token ends the
        topic, as an expired one would."""
        topic = self.topics[msg["topic"]]
        try:
            claims = self.claims(payload.get("access_token"))
        except InvalidToken as exc:
            join_ref = msg.get("join_ref") if topic is None else topic.join_ref
            self.shut(msg["topic"], exc.reason, join_ref)
            return
        if topic is not None:
            topic.identify(claims)
        if msg.get("ref") is not None:
            self.reply(msg, "ok", {})

    def claims(self, token: Any) -> dict[str, Any]:
        claims = token_claims(self.secret, token) if isinstance(token, str) else None
        if claims is None:
            raise InvalidToken("access_token is required")
        return claims

    def leave(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is not None:
            topic.active = False
            self.hub.topics.discard(topic)

    def shut(self, name: str, reason: str, join_ref: Any) -> None:
        """End a topic from the server's side: a system error, then phx_close."""
        self.leave(name)
        payload = {
            "status": "error",
            "message": reason,
            "extension": "system",
            "channel": name.removeprefix(TOPIC_PREFIX),
        }
        self.push(name, "system", payload, join_ref=join_ref)
        self.push(name, "phx_close", {}, join_ref=join_ref)

    def expire(self) -> None:
        for name, topic in list(self.topics.items()):
            if topic is not None and topic.expired:
                self.shut(name, "Token has expired", topic.join_ref)

    def leave_all(self) -> None:
        for name in list(self.topics):
            self.leave(name)


class Hub:
    """Every socket of this gateway, the listening connection, and the dispatcher that turns
    notifications into rows each topic's token may read."""

    def __init__(self, db: Database, settings: GatewaySettings) -> None:
        self.db = db
        self.settings = settings
        self.clients: set[Client] = set()
        self.topics: set[Topic] = set()
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
            groups.setdefault(topic.key, (topic.claims["role"], topic.claims, []))[2].append(topic)
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
        """The rows among `ids` these claims may read, as the database decides right now."""
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


_HUBS: dict[Database, Hub] = {}  # routes and lifespan of one app share its hub


def _hub(db: Database, settings: GatewaySettings) -> Hub:
    if db not in _HUBS:
        _HUBS[db] = Hub(db, settings)
    return _HUBS[db]


def routes(db: Database, settings: GatewaySettings) -> list[BaseRoute]:
    hub = _hub(db, settings)

    async def websocket(ws: WebSocket) -> None:
        if ws.query_params.get("vsn", VSN) != VSN:
            await ws.close(1008, f"only vsn={VSN} is served")
            return
        await ws.accept()
        client = Client(ws, hub, settings.jwt_secret)
        hub.clients.add(client)
        tasks = [asyncio.create_task(job()) for job in (client.read, client.write, client.deadline)]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(outcome, Exception) and not isinstance(
                    outcome, WebSocketDisconnect | RuntimeError
                ):
                    log.warning("realtime: a socket failed (%r)", outcome)
            client.leave_all()
            hub.clients.discard(client)
            client.done.set()

    return [WebSocketRoute("/realtime/v1/websocket", websocket)]


@asynccontextmanager
async def lifespan(db: Database, settings: GatewaySettings) -> AsyncIterator[None]:
    """Listen and dispatch while the gateway serves; wait briefly for the first LISTEN so the
    first joins are told they are subscribed."""
    hub = _hub(db, settings)
    tasks = [asyncio.create_task(hub.listen()), asyncio.create_task(hub.dispatch())]
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(hub.listening.wait(), READY_WAIT)
        yield
    finally:
        await hub.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        _HUBS.pop(db, None)
