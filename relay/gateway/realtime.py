"""Realtime: Supabase Realtime's Phoenix protocol under /realtime/v1, as the official clients and
the hosts speak it (vsn 1.0.0 and 2.0.0, `realtime_wire`).

A socket joins topics `realtime:<name>` with a token. On a topic it may ask for
`postgres_changes` on public.yui_messages (INSERT, UPDATE, DELETE or `*`, with filters,
`realtime_changes`): the hub (`realtime_feed`) hears the triggers' notifications and reads each
batch of rows once per identity, as that identity (exactly as a REST request runs), so the
database's policies, not this module, decide who hears what, and a revoked or suspended host
hears nothing from its next notification on. Several gateways on one database all deliver
those. While the listening connection is down nobody gets anything; every topic with changes
is told (a `system` error, then `system` ok once it is back) so a client can catch up by
reading. On a topic a socket may also broadcast and track presence, heard only by the sockets
of the same identity (`realtime_rooms`). What one client may hold and send is bounded
(`realtime_limits`).
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
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from relay.gateway import realtime_limits as limits
from relay.gateway import realtime_wire as wire
from relay.gateway.db import Database
from relay.gateway.functions import answer, client_ip
from relay.gateway.realtime_changes import Subscription, subscriptions
from relay.gateway.realtime_feed import CLOSE_WAIT, Delivery, Hub
from relay.gateway.realtime_limits import Bucket, Refused
from relay.gateway.realtime_rooms import message
from relay.gateway.realtime_wire import Frame, WireError
from relay.keys import InvalidToken, verify

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings

log = logging.getLogger("yui.realtime")

TOPIC_PREFIX = "realtime:"
IDLE_TIMEOUT = 60.0  # a socket that sends nothing (not even a heartbeat) this long is closed
MAX_QUEUED = 1000  # frames waiting for a slow socket before it is closed
READY_WAIT = 5.0  # startup waits this long for the first LISTEN

_change_ids = itertools.count(1)


class Topic:
    """One joined topic on one socket: its changes, how it takes part in its room (broadcast
    `self` and `ack`, its presence key, whether it hears presence), and the token it was joined
    with (replaced when the client sends a new access_token), which names the identity its rows
    are read under and the room it is in."""

    def __init__(
        self,
        client: Client,
        msg: Frame,
        config: dict[str, Any],
        subs: list[Subscription],
        token: tuple[dict[str, Any], frozenset[str]],  # its claims and marks (`verified`)
    ) -> None:
        self.client = client
        self.name = msg.topic
        self.join_ref = msg.join_ref
        self.subs = subs
        cast = config.get("broadcast") or {}
        presence = config.get("presence") or {}
        self.echo = isinstance(cast, dict) and cast.get("self") is True
        self.ack = isinstance(cast, dict) and cast.get("ack") is True
        key = presence.get("key") if isinstance(presence, dict) else None
        if key is not None and not (isinstance(key, str) and wire.name_ok(key)):
            raise ValueError(f"config.presence.key is a string of at most {wire.MAX_NAME} bytes")
        self.presence_key = key or str(uuid.uuid4())
        self.hears_presence = isinstance(presence, dict) and presence.get("enabled") is True
        self.active = True
        self.head, self.tail = wire.envelope(
            client.vsn, self.name, "postgres_changes", None, self.join_ref
        )
        self.identify(*token)

    def identify(self, claims: dict[str, Any], marks: frozenset[str]) -> None:
        self.claims = claims
        self.marks = marks
        self.key = limits.identity_key(claims)  # topics with equal keys share one read
        self.scope = limits.scope(claims)  # its room, if its token names someone

    @property
    def expired(self) -> bool:
        return bool(self.claims["exp"] <= time.time())

    def hear(self, delivery: Delivery) -> None:
        """Send a change to this topic, once per distinct `select` among the subscriptions it
        matches, naming them (`ids`) as the clients expect."""
        op = delivery.change.op
        chosen: dict[tuple[str, ...] | None, list[int]] = {}
        for sub in self.subs:
            if op in sub.ops and (not sub.conditions or sub.matches(delivery.record())):
                chosen.setdefault(sub.select, []).append(sub.id)
        for select, ids in chosen.items():
            data = delivery.data(select)
            self.client.send(f'{self.head}{{"ids":{json.dumps(ids)},"data":{data}}}{self.tail}')


class Client:
    """One websocket: its joined topics, and the frames queued for it. Its own task sends them,
    so a slow socket never holds up the hub (and one too slow is closed: it catches up by
    reading)."""

    def __init__(self, ws: WebSocket, hub: Hub, secret: str, vsn: str) -> None:
        self.ws = ws
        self.hub = hub
        self.secret = secret
        self.vsn = vsn
        self.apikey = ws.query_params.get("apikey")  # the token of a join that brings none
        self.topics: dict[str, Topic] = {}
        self.marks: frozenset[str] = frozenset()  # what its topics count against
        self.alone_since: float | None = time.monotonic()  # None while a topic is joined
        self.checks = Bucket(limits.CHECKS_BURST, limits.CHECKS_PER_MIN)
        self.messages = Bucket(limits.MESSAGES_BURST, limits.MESSAGES_PER_SEC * 60)
        self.frames: deque[str | bytes] = deque()
        self.ready = asyncio.Event()
        self.closing: tuple[int, str] | None = None
        self.ending = asyncio.Event()  # set once a close is asked for
        self.done = asyncio.Event()

    # --- outgoing -------------------------------------------------------------------------

    def send(self, frame: str | bytes) -> None:
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
        self.send(wire.encode(self.vsn, topic, event, payload, ref, join_ref))

    def reply(self, msg: Frame, status: str, response: dict[str, Any]) -> None:
        payload = {"status": status, "response": response}
        self.push(msg.topic, "phx_reply", payload, msg.ref, msg.join_ref)

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
                frame = self.frames.popleft()
                if isinstance(frame, bytes):
                    await self.ws.send_bytes(frame)
                else:
                    await self.ws.send_text(frame)
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
                if self.alone_since is not None:
                    self.close(1008, f"no topic joined within {limits.JOIN_DEADLINE:g} s")
                else:
                    self.close(1000, "heartbeat timeout")
                continue
            if message["type"] == "websocket.disconnect":
                return
            try:
                if message.get("text") is not None:
                    self.handle(wire.decode(self.vsn, message["text"]))
                elif self.vsn == wire.VSN_2 and message.get("bytes") is not None:
                    self.handle(wire.decode_push(message["bytes"]))
                else:
                    self.close(1003, "expected JSON text frames")
            except WireError as exc:
                self.close(1007, str(exc))

    def patience(self) -> float:
        """How long the next frame may take to come. Without a topic the wait ends at the join
        deadline, so a wait that times out while no topic is joined is that deadline (the
        loop's clock is coarser than time.monotonic(): uvloop's counts milliseconds)."""
        if self.alone_since is None or self.closing is not None:
            return IDLE_TIMEOUT
        left = self.alone_since + limits.JOIN_DEADLINE - time.monotonic()
        return min(IDLE_TIMEOUT, max(left, 0.0))

    def handle(self, msg: Frame) -> None:
        self.expire()
        topic = self.topics.get(msg.topic)
        if msg.topic == "phoenix":
            if msg.event == "heartbeat":
                self.reply(msg, "ok", {})
            else:
                self.reply(msg, "error", {"reason": f"unsupported event {msg.event}"})
        elif msg.event == "phx_join":
            self.join(msg)
        elif topic is None:
            self.reply(msg, "error", {"reason": "unmatched topic"})
        elif msg.event == "phx_leave":
            self.leave(topic.name)
            self.reply(msg, "ok", {})
        elif msg.event == "access_token":
            self.renew(topic, msg)
        elif msg.event in ("broadcast", "presence"):
            self.speak(topic, msg)
        else:
            self.reply(msg, "error", {"reason": f"unsupported event {msg.event}"})

    def join(self, msg: Frame) -> None:
        name, payload = msg.topic, msg.payload
        config = payload.get("config")
        config = config if isinstance(config, dict) else {}
        try:
            if not name.startswith(TOPIC_PREFIX):
                raise ValueError("unmatched topic")
            if not wire.name_ok(name):
                raise ValueError(f"a topic is at most {wire.MAX_NAME} bytes")
            if name not in self.topics and len(self.topics) >= limits.MAX_TOPICS:
                raise Refused(f"at most {limits.MAX_TOPICS} topics per socket")
            self.check()
            token = self.verified(payload.get("access_token") or self.apikey)
            subs = subscriptions(config, self.hub.types, lambda: next(_change_ids))
            topic = Topic(self, msg, config, subs, token)
        except InvalidToken as exc:
            self.reply(msg, "error", {"reason": exc.reason})
            return
        except ValueError as exc:
            self.reply(msg, "error", {"reason": str(exc)})
            return
        self.leave(name)  # a second join of a topic replaces the first
        self.topics[name] = topic
        self.recount()
        changes = [{"id": sub.id, **sub.echo} for sub in subs]
        self.reply(msg, "ok", {"postgres_changes": changes})
        if subs:
            self.hub.topics.add(topic)
            self.system(topic, self.hub.live)
        self.hub.rooms.enter(topic)

    def renew(self, topic: Topic, msg: Frame) -> None:
        """A renewed session: later rows are read under the new claims, and a token naming
        someone else moves the topic to that identity's room; a bad token (or one past a bound)
        ends the topic, as an expired one would. Past the rate, the renewal is refused and the
        topic keeps its token."""
        try:
            self.check()
        except Refused as exc:
            self.reply(msg, "error", {"reason": str(exc)})
            return
        try:
            claims, marks = self.verified(msg.payload.get("access_token"))
        except InvalidToken as exc:
            self.shut(topic.name, exc.reason, topic.join_ref)
            return
        except Refused as exc:
            self.shut(topic.name, str(exc), topic.join_ref)
            return
        moves = limits.scope(claims) != topic.scope
        if moves:
            self.hub.rooms.leave(topic)
        topic.identify(claims, marks)
        if moves:
            self.hub.rooms.enter(topic)
        self.recount()
        if msg.ref is not None:
            self.reply(msg, "ok", {})

    def speak(self, topic: Topic, msg: Frame) -> None:
        """A broadcast or a presence change from this socket, within its room and its rate.
        A broadcast is acknowledged only if the topic asked (`config.broadcast.ack`); a
        presence change always is; a refusal is told whenever the push has a ref."""
        try:
            if not self.messages.take():
                raise Refused(
                    f"too many broadcast and presence messages: at most"
                    f" {limits.MESSAGES_BURST} at once, {limits.MESSAGES_PER_SEC:g} a second"
                )
            if msg.event == "broadcast":
                self.hub.rooms.cast(topic, message(msg))
            elif msg.payload.get("event") == "track":
                self.hub.rooms.track(topic, msg.payload.get("payload"))
            elif msg.payload.get("event") == "untrack":
                self.hub.rooms.untrack(topic)
            else:
                raise ValueError("presence events are track and untrack")
        except ValueError as exc:
            if msg.ref is not None:
                self.reply(msg, "error", {"reason": str(exc)})
            return
        if msg.ref is not None and (msg.event == "presence" or topic.ack):
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
            self.hub.rooms.leave(topic)
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


def hub_of(db: Database) -> Hub | None:
    """The Realtime hub serving `db` in this process, if one does (for /metrics)."""
    return _HUBS.get(db)


def _hub(db: Database, settings: GatewaySettings) -> Hub:
    if db not in _HUBS:
        _HUBS[db] = Hub(db, settings)
    return _HUBS[db]


def routes(db: Database, settings: GatewaySettings) -> list[BaseRoute]:
    hub = _hub(db, settings)

    async def websocket(ws: WebSocket) -> None:
        vsn = ws.query_params.get("vsn", wire.VSN_1)
        if vsn not in wire.VERSIONS:
            await ws.close(1008, f"only vsn {' and '.join(wire.VERSIONS)} are served")
            return
        address = client_ip(ws)
        if not hub.census.enter(address):
            await _refuse(ws, 429, "too_many_sockets")
            return
        try:
            await ws.accept()
            await serve(ws, vsn)
        finally:
            hub.census.leave(address)

    async def serve(ws: WebSocket, vsn: str) -> None:
        client = Client(ws, hub, settings.jwt_secret, vsn)
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

    return [
        WebSocketRoute("/realtime/v1/websocket", websocket),
        Route("/realtime/v1/api/{rest:path}", unserved, methods=["GET", "POST", "PUT", "DELETE"]),
    ]


async def unserved(request: Request) -> Response:
    """Realtime's REST side (a broadcast over HTTP: supabase-js's `httpSend`, and its `send()`
    before the channel is joined) isn't served: said in Realtime's error shape, with what
    works instead (a 404 would have supabase-js tell the user to upgrade the server)."""
    text = "broadcast over REST is not served by this relay: send on a joined channel"
    return answer(501, {"message": text})


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
