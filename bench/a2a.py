"""An A2A agent's side: a2a-sdk 1.3 on loopback (A2A 1.0, streaming), answering each message at
once, that notes when each message's first byte arrived; and the series that times it behind
`yui run-a2a`, one message at a time, as the webhook's is."""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]  # no stubs
from starlette.applications import Starlette

from bench.bridge import POLL_INTERVAL, BridgeProcess
from bench.relay import Person
from bench.watch import ReplyWatch
from bridges.engine.turns import turn_key

REPLY_TIMEOUT = 30.0
Asgi = Callable[..., Awaitable[None]]


class Answering(AgentExecutor):
    """Answers every message with a task that completes at once with one artifact."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        task = pb.Task(id=context.task_id, context_id=context.context_id)
        task.status.state = pb.TASK_STATE_SUBMITTED
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.add_artifact([pb.Part(text="ok")], artifact_id="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the bench's agent answers at once")


class A2AAgent:
    """The agent on a free loopback port; `arrived` maps each message id to the epoch seconds
    its request's first byte arrived (headers in; the body is read after)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=0, log_level="warning", access_log=False
        )
        server = uvicorn.Server(config)
        self._server = server
        threading.Thread(target=server.run, daemon=True, name="bench-a2a").start()
        deadline = time.monotonic() + 20
        while not (server.started and server.servers):
            if time.monotonic() > deadline:
                raise RuntimeError("the bench's A2A agent didn't start")
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/"

    def _app(self) -> Asgi:
        card = ParseDict(
            {
                "name": "Bench",
                "description": "Answers at once.",
                "version": "1",
                "supportedInterfaces": [
                    {"url": "/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
                ],
                "capabilities": {"streaming": True},
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "ok", "name": "ok", "description": "ok", "tags": ["ok"]}],
            },
            pb.AgentCard(),
        )
        handler = DefaultRequestHandler(
            agent_executor=Answering(), task_store=InMemoryTaskStore(), agent_card=card
        )
        routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/")
        app = Starlette(routes=routes)
        arrived = self.arrived

        async def timed(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await app(scope, receive, send)
                return
            at, body = time.time(), bytearray()

            async def reading() -> MutableMapping[str, Any]:
                message = await receive()
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        sent = json.loads(body)["params"]["message"]["messageId"]
                        arrived.setdefault(sent, at)
                return message

            await app(scope, reading, send)

        return timed

    def close(self) -> None:
        self._server.should_exit = True


def first_bytes(
    person: Person,
    watch: ReplyWatch,
    bridge: BridgeProcess,
    agent: A2AAgent,
    agent_id: str,
    count: int,
    warm_up: int = 3,
) -> list[float]:
    """`count` messages one at a time (after `warm_up` unmeasured ones), each after the last
    one's ack; seconds from the person's insert (clock read just before) to the agent's first
    byte of that turn's message. Poll-only messages go at a random moment of the cycle."""
    gaps = []
    for n in range(warm_up + count):
        time.sleep(random.uniform(0, POLL_INTERVAL) if bridge.poll_only else 0.01)
        sent = time.time()
        row = person.say(agent_id)
        watch.wait(row, REPLY_TIMEOUT)
        bridge.wait_acked(row)
        if n >= warm_up:
            gaps.append(agent.arrived["yui-" + turn_key([row])] - sent)
    return gaps
