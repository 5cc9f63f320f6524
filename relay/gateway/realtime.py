"""Realtime: the part of Supabase Realtime's Phoenix protocol that hosts use, under /realtime/v1.

A socket joins topics `realtime:<name>` with a token and asks for INSERTs on
public.yui_messages. The hub (`realtime_feed`) hears the insert trigger's notifications and reads
each batch of rows once per identity, as that identity (exactly as a REST request runs), so the
database's policies, not this module, decide who hears what, and a revoked or suspended host
hears nothing from its next notification on. Nothing lives in the gateway, so several gateways
on one database all deliver. While the listening connection is down nobody gets anything; every
joined topic is told (a `system` error, then `system` ok once it is back) so a host can catch up
by reading. What one client may hold (topics, sockets, token checks) is bounded
(`realtime_limits`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from relay.gateway import realtime_limits as limits
from relay.gateway.db import Database
from relay.gateway.functions import answer, client_ip
from relay.gateway.realtime_feed import CHANNEL, CLOSE_WAIT, Hub
from relay.gateway.realtime_limits import Bucket, Refused
from relay.keys import InvalidToken, verify

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings

log = logging.getLogger("yui.realtime")

TOPIC_PREFIX = "realtime:"
VSN = "1.0.0"  # Phoenix's JSON object frames
IDLE_TIMEOUT = 60.0  # a socket that sends nothing (not even a heartbeat) this long is closed
MAX_QUEUED = 1000  # frames waiting for a slow socket before it is closed
READY_WAIT = 5.0  # startup waits this long for the first LISTEN

_change_ids = itertools.count(1)


def _encode(topic: str, event: str, payload: Any, ref: Any = None, join_ref: Any = None) -> str:
    frame = {"topic": topic, "event": event, "payload": payload, "ref": ref, "join_ref": join_ref}
    return json.dumps(frame, separators=(",", ":"))


def _changes(config: Any) -> list[dict[str, str]]:
    """The postgres_changes a join's config asks for, as echoed in its reply; ValueError if any
    can't be served (better refused than silently never delivered)."""
    entries = (config.get("postgres_changes") if isinstance(config, dict) else None) or []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("config.postgres_changes must be a list of objects")
    if len(entries) > limits.MAX_CHANGES:
        raise Refused(f"at most {limits.MAX_CHANGES} postgres_changes per join")
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
    """One joined topic on one socket, the token it was joined with (replaced when the client
    sends a new access_token) and, with postgres_changes, the identity its rows are read under."""

    client: Client
    name: str
    join_ref: Any
    change_ids: list[int]  # empty: joined without postgres_changes, hears no rows
    claims: dict[str, Any]
    marks: frozenset[str]  # what it counts against (`Census`)
    active: bool = True
    key: str = field(init=False)  # topics with equal keys share one read
    head: str = field(init=False)  # a delivery frame is head + data + tail
    tail: str = field(init=False)

    def __post_init__(self) -> None:
        self.identify(self.claims, self.marks)
        self.head = (
            f'{{"topic":{json.dumps(self.name)},"event":"postgres_changes",'
            f'"payload":{{"ids":{json.dumps(self.change_ids)},"data":'
        )
        self.tail = f'}},"ref":null,"join_ref":{json.dumps(self.join_ref)}}}'

    def identify(self, claims: dict[str, Any], marks: frozenset[str]) -> None:
        self.claims = claims
        self.marks = marks
        self.key = limits.identity_key(claims)

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
        self.topics: dict[str, Topic] = {}
        self.marks: frozenset[str] = frozenset()  # what its topics count against
        self.alone_since: float | None = time.monotonic()  # None while a topic is joined
        self.checks = Bucket(limits.CHECKS_BURST, limits.CHECKS_PER_MIN)
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
        half-open socket doesn't linger, and so is one without a topic for JOIN_DEADLINE: it
        hears nothing and only holds a socket."""
        while True:
            try:
                message = await asyncio.wait_for(self.ws.receive(), self.patience())
            except TimeoutError:
                if self.lonely():
                    self.close(1008, f"no topic joined within {limits.JOIN_DEADLINE:g} s")
                else:
                    self.close(1000, "heartbeat timeout")
                continue
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is None:
                self.close(1003, "expected JSON text frames")
                continue
            self.handle(message["text"])

    def patience(self) -> float:
        """How long the next frame may take to come."""
        if self.alone_since is None or self.closing is not None:
            return IDLE_TIMEOUT
        left = self.alone_since + limits.JOIN_DEADLINE - time.monotonic()
        return min(IDLE_TIMEOUT, max(left, 0.0))

    def lonely(self) -> bool:
        """Without a topic for JOIN_DEADLINE by now."""
        since = self.alone_since
        return since is not None and time.monotonic() >= since + limits.JOIN_DEADLINE

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
        try:
            if name not in self.topics and len(self.topics) >= limits.MAX_TOPICS:
                raise Refused(f"at most {limits.MAX_TOPICS} topics per socket")
            self.check()
            claims, marks = self.verified(payload.get("access_token") or self.apikey)
            wanted = _changes(payload.get("config"))
        except InvalidToken as exc:
            self.reply(msg, "error", {"reason": exc.reason})
            return
        except ValueError as exc:
            self.reply(msg, "error", {"reason": str(exc)})
            return
        self.leave(name)  # a second join of a topic replaces the first
        ids = [next(_change_ids) for _ in wanted]
        topic = Topic(self, name, msg.get("join_ref"), ids, claims, marks)
        self.topics[name] = topic
        self.recount()
        changes = [{"id": i, **w} for i, w in zip(ids, wanted, strict=True)]
        self.reply(msg, "ok", {"postgres_changes": changes})
        if ids:
            self.hub.topics.add(topic)
            self.system(topic, self.hub.live)

    def renew(self, msg: dict[str, Any], payload: dict[str, Any]) -> None:
        """A renewed session: later rows are read under the new claims; a bad token (or one
        past a bound) ends the topic, as an expired one would. Past the rate, the renewal is
        refused and the topic keeps its token."""
        topic = self.topics[msg["topic"]]
        try:
            self.check()
        except Refused as exc:
            self.reply(msg, "error", {"reason": str(exc)})
            return
        try:
            claims, marks = self.verified(payload.get("access_token"))
        except InvalidToken as exc:
            self.shut(topic.name, exc.reason, topic.join_ref)
            return
        except Refused as exc:
            self.shut(topic.name, str(exc), topic.join_ref)
            return
        topic.identify(claims, marks)
        self.recount()
        if msg.get("ref") is not None:
            self.reply(msg, "ok", {})

    def check(self) -> None:
        """One join or renewal: each verifies a token, so a socket may send only so many."""
        if not self.checks.take():
            raise Refused(
                f"too many joins and token renewals: at most {limits.CHECKS_BURST:g} at once,"
                f" {limits.CHECKS_PER_MIN:g} a minute"
            )

    def verified(self, token: Any) -> tuple[dict[str, Any], frozenset[str]]:
        """A token's claims and what a topic joined with it counts against: InvalidToken, or
        Refused if this socket may not hold it too."""
        if not isinstance(token, str) or not token:
            raise InvalidToken("access_token is required")
        claims = verify(self.secret, token)
        marks = limits.marks(token, claims)
        self.hub.census.check(self.marks, marks)
        return claims, marks

    def recount(self) -> None:
        """Count this socket against what its topics' tokens name, and start its join deadline
        once it has none."""
        marks = frozenset().union(*(topic.marks for topic in self.topics.values()))
        self.hub.census.hold(self, self.marks, marks)
        self.marks = marks
        if self.topics:
            self.alone_since = None
        elif self.alone_since is None:
            self.alone_since = time.monotonic()

    def leave(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is not None:
            topic.active = False
            self.hub.topics.discard(topic)
            self.recount()

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
            if topic.expired:
                self.shut(name, "Token has expired", topic.join_ref)

    def leave_all(self) -> None:
        for name in list(self.topics):
            self.leave(name)


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
        address = client_ip(ws)
        if not hub.census.enter(address):
            await _refuse(ws, 429, "too_many_sockets")
            return
        try:
            await ws.accept()
            await serve(ws)
        finally:
            hub.census.leave(address)

    async def serve(ws: WebSocket) -> None:
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


async def _refuse(ws: WebSocket, status: int, code: str) -> None:
    """Refuse a handshake with an HTTP answer in the functions' error shape where the server
    can send one (uvicorn can), else with a bare 403."""
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        await ws.send_denial_response(answer(status, {"error": code}))
    else:
        await ws.close(1008, code)


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
