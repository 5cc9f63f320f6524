"""The test A2A agents, written once: what they do (`behave`, in the person's words), their
cards, and the server around an SDK's app (every JSON-RPC call recorded, gates the tests open, a
watch on anything that reaches off loopback). Everything an agent says is written as A2A JSON in
its server's dialect (`Out`), which each SDK parses into its own objects, so the wire format
here is the tests' own, never the bridge's.

This module imports only the standard library, Starlette and uvicorn, which the project's venv
and `.venv/a2a03` both have: `tests.helpers.a2a` serves the agents with a2a-sdk 1.3 in-process,
and this file, run by `.venv/a2a03/bin/python a2a_agents.py PORT` (a venv `make test` builds:
0.3.26 can't share one with 1.3), serves them with the real a2a-sdk 0.3 on 127.0.0.1 until
SIGTERM. The 0.3 SDK is imported through importlib: mypy checks this file against the 1.3 SDK,
whose modules are laid out differently.

What an agent does: `book` asks a question and books on the answer, `pieces` streams its answer
in pieces, `slow TAG` and `stubborn TAG` wait until the test opens gate TAG (`stubborn` refuses
to be cancelled), `picture` returns a PNG as bytes and as a URL, `fail` fails, `quick` answers
with a plain message, `mull` thinks a moment and echoes; anything else is echoed at once.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # this folder holds a module named a2a, which must not hide the SDK
    HERE = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    sys.path.insert(0, str(HERE.parents[1]))

import asyncio
import base64
import contextlib
import datetime
import importlib
import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

KEY = "vault-key-" + "7f3a9c"  # Vault's bearer key
# A 1x1 PNG (tests.helpers.media.PNG; that module can't be imported in the 0.3 venv).
DOT = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e5273e0c0000000049454e44ae426082"
)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
Put = Callable[[str, dict[str, Any]], Awaitable[None]]


# --- what the agents do -------------------------------------------------------------------------


@dataclass
class Ask:
    """One message to a test agent, read from its JSON (either dialect)."""

    text: str  # its text parts, the channel guide left out, one per line
    data: list[Any]
    files: list[dict[str, Any]]
    waiting: bool  # it continues a task that waited for input

    @classmethod
    def read(cls, message: dict[str, Any], waiting: bool) -> Ask:
        texts, data, files = [], [], []
        for part in message.get("parts") or []:
            if (part.get("metadata") or {}).get("yui") == "channel_guide":
                continue
            if "text" in part:
                texts.append(part["text"])
            elif "data" in part:
                data.append(part["data"])
            else:
                file = part.get("file") or part
                blob = file.get("raw") or file.get("bytes") or ""
                files.append(
                    {
                        "mediaType": file.get("mediaType") or file.get("mimeType"),
                        "size": len(base64.b64decode(blob)),
                    }
                )
        return cls("\n".join(texts), data, files, waiting)


class Out:
    """What an agent says, written as A2A JSON in its server's dialect and handed to `put`."""

    def __init__(self, put: Put, modern: bool, task: str, context: str, new: bool) -> None:
        self.put, self.modern, self.task, self.context = put, modern, task, context
        self._opened = not new

    def _tag(self, doc: dict[str, Any], kind: str) -> dict[str, Any]:
        """`doc` as this dialect writes it: 0.3 names each object's kind."""
        return doc if self.modern else {**doc, "kind": kind}

    def _message(self, text: str, task: bool = True) -> dict[str, Any]:
        message = {"messageId": uuid.uuid4().hex, "contextId": self.context}
        message |= {"taskId": self.task} if task else {}
        message |= {"role": "ROLE_AGENT" if self.modern else "agent"}
        return self._tag(message | {"parts": [self.part({"text": text})]}, "message")

    def part(self, part: dict[str, Any]) -> dict[str, Any]:
        if "text" in part:
            return self._tag({"text": part["text"]}, "text")
        blob = base64.b64encode(part["bytes"]).decode() if "bytes" in part else None
        if self.modern:
            where = {"raw": blob} if blob else {"url": part["url"]}
            return {**where, "mediaType": part["mediaType"], "filename": part["name"]}
        file = {"bytes": blob} if blob else {"uri": part["url"]}
        file |= {"mimeType": part["mediaType"], "name": part["name"]}
        return {"kind": "file", "file": file}

    async def _open(self) -> None:
        if not self._opened:
            self._opened = True
            state = "TASK_STATE_SUBMITTED" if self.modern else "submitted"
            task = {"id": self.task, "contextId": self.context, "status": {"state": state}}
            await self.put("task", self._tag(task, "task"))

    async def status(self, state: str, text: str | None = None) -> None:
        await self._open()
        now = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
        named = "TASK_STATE_" + state.upper().replace("-", "_") if self.modern else state
        status: dict[str, Any] = {"state": named, "timestamp": now}
        if text:
            status["message"] = self._message(text)
        event: dict[str, Any] = {"taskId": self.task, "contextId": self.context, "status": status}
        if not self.modern:  # input-required goes with final:false, as 0.3 agents send it
            event["final"] = state in ("completed", "failed", "canceled", "rejected")
        await self.put("status-update", self._tag(event, "status-update"))

    async def artifact(
        self, parts: list[dict[str, Any]], name: str = "answer", *, append: bool = False
    ) -> None:
        await self._open()
        artifact = {"artifactId": name, "parts": [self.part(p) for p in parts]}
        event = {"taskId": self.task, "contextId": self.context, "artifact": artifact}
        await self.put("artifact-update", self._tag(event | {"append": append}, "artifact-update"))

    async def message(self, text: str) -> None:
        await self.put("message", self._message(text, task=False))


@dataclass
class Control:
    """One server's record of calls, its gates, and what it tried to reach off loopback."""

    base: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)  # task id → what it was asked to do

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())


def keyword(text: str) -> tuple[str, str]:
    """What the person asked for (the first word of their last line) and the word after."""
    words = (text.strip().splitlines() or [""])[-1].split()
    return (words[0].lower() if words else ""), (words[1] if len(words) > 1 else "")


async def behave(ask: Ask, out: Out, control: Control) -> None:
    """The test agents' one behaviour, decided by the person's words."""
    word, tag = keyword(ask.text)
    control.kinds[out.task] = word
    if ask.waiting:
        await out.artifact([{"text": f"Booked for {ask.text.strip()}."}])
        await out.status("completed")
    elif word == "book":
        await out.status("working")
        await out.status("input-required", "Which day?")
    elif word == "pieces":
        await out.status("working", "Counting…")
        for n, piece in enumerate(("One, ", "two, ", "three.")):
            await out.artifact([{"text": piece}], "count", append=n > 0)
            await asyncio.sleep(0.05)
        await out.status("completed", "Counted.")
    elif word in ("slow", "stubborn"):
        await out.status("working")
        await out.artifact([{"text": "Once upon a time"}], "story")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(control.gate(tag).wait(), 60)
        await out.artifact([{"text": ", the end."}], "story", append=True)
        await out.status("completed")
    elif word == "picture":
        png = {"mediaType": "image/png", "name": "dot.png"}
        url = f"{control.base}/control/file/dot.png"
        await out.artifact([{"text": "Here it is."}, {"bytes": DOT, **png}, {"url": url, **png}])
        await out.status("completed")
    elif word == "mull":  # a short think first, for the crash test
        await out.status("working")
        await asyncio.sleep(random.uniform(0, 0.3))
        await out.artifact([{"text": f"echo: {ask.text}"}])
        await out.status("completed")
    elif word == "fail":
        await out.status("working")
        await out.status("failed", "the oven is on fire")
    elif word == "quick":
        await out.message("Quick answer.")
    else:
        echo = f"echo: {ask.text}"
        for data in ask.data:
            echo += f"\ndata: {data.get('preset')} {json.dumps(data.get('value'), sort_keys=True)}"
        echo += "".join(f"\nfile: {f['mediaType']} {f['size']} bytes" for f in ask.files)
        await out.artifact([{"text": echo}])
        await out.status("completed")


# --- the cards ---------------------------------------------------------------------------------


def card(agent: str, url: str, flavour: str) -> dict[str, Any]:
    """The agent card (`echo`, `vault` or `legacy`) for a server of `flavour` (1.0, compat,
    0.3, or "0.3 only": a 1.x card offering only 0.3), as JSON."""
    modes = ["text/plain"] if agent == "vault" else ["text/plain", "application/json"]
    if agent == "echo":
        modes += ["image/png", "image/jpeg"]
    doc: dict[str, Any] = {
        "name": {"echo": "Echo", "vault": "Vault", "legacy": "Legacy"}[agent],
        "description": "A test agent.",
        "version": "1.0.0",
        "capabilities": {"streaming": True},
        "defaultInputModes": modes,
        "defaultOutputModes": ["text/plain", "image/png"],
        "skills": [{"id": "all", "name": "All", "description": "Everything.", "tags": ["test"]}],
    }
    if flavour == "0.3":
        doc |= {"url": url, "preferredTransport": "JSONRPC", "protocolVersion": "0.3.0"}
        if agent == "vault":
            doc["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            doc["security"] = [{"bearer": []}]
        return doc
    interfaces = [
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": v} for v in ("1.0", "0.3")
    ]
    doc["supportedInterfaces"] = {
        "1.0": interfaces[:1],
        "compat": interfaces[::-1],  # the 0.3 interface first: the bridge still picks 1.0
        "0.3 only": interfaces[1:],  # a 1.x server whose card still offers only 0.3
    }[flavour]
    if agent == "vault":
        doc["securitySchemes"] = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
        doc["securityRequirements"] = [{"schemes": {"bearer": {"list": []}}}]
    return doc


# --- the server around the SDK's app -----------------------------------------------------------


def record(control: Control, app: App) -> App:
    """`app`, with each JSON-RPC call it gets written down (method, params, headers)."""

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = bytearray()
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}

        async def reading() -> MutableMapping[str, Any]:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    with contextlib.suppress(ValueError):
                        doc = json.loads(body)
                        control.calls.append(
                            {
                                "path": scope["path"],
                                "method": doc.get("method"),
                                "params": doc.get("params"),
                                "version": headers.get("a2a-version"),
                                "authorization": headers.get("authorization"),
                                "at": time.time(),
                            }
                        )
            return message

        await app(scope, reading, send)

    return recorded


def keyed(app: App) -> App:
    """`app`, refusing a call without Vault's bearer key with a 401 (the card stays public)."""

    async def checked(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        post = scope["type"] == "http" and scope["method"] == "POST"
        if post and headers.get(b"authorization") != f"Bearer {KEY}".encode():
            while (await receive()).get("more_body"):  # read, so the call is recorded
                pass
            refused = JSONResponse({"error": "a bearer key is needed"}, status_code=401)
            await refused(scope, receive, send)
            return
        await app(scope, receive, send)

    return checked


OUTBOUND: list[str] = []  # hosts this process tried to reach off loopback while serving


def watch_outbound() -> None:
    """Record every connection and name lookup this process makes off loopback (an audit hook:
    there is no taking it back, so it is added once per process)."""
    if getattr(watch_outbound, "added", False):
        return
    watch_outbound.added = True  # type: ignore[attr-defined]
    local = {"127.0.0.1", "localhost", "::1", None}

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.getaddrinfo" and args[0] not in local:
            host = args[0].decode() if isinstance(args[0], bytes) else args[0]
            if host not in local:
                OUTBOUND.append(f"lookup {host}")
        elif event == "socket.connect":
            address = args[1]
            if isinstance(address, tuple) and address[0] not in local:
                OUTBOUND.append(f"connect {address[0]}")

    sys.addaudithook(hook)


def server_app(control: Control, agents: dict[str, App]) -> App:
    """The agents mounted under one port, with the test's control routes beside them."""

    async def calls(request: Request) -> Response:
        return JSONResponse({"calls": control.calls, "outbound": OUTBOUND})

    async def open_gate(request: Request) -> Response:
        control.gate(request.path_params["name"]).set()
        return JSONResponse({"ok": True})

    async def file(request: Request) -> Response:
        return Response(DOT, media_type="image/png")

    routes = [
        Route("/control/calls", calls),
        Route("/control/open/{name}", open_gate, methods=["POST"]),
        Route("/control/file/dot.png", file),
        *(Mount(f"/{name}", app=app) for name, app in agents.items() if name != "echo"),
        Mount("/", app=agents["echo"]),
    ]
    return record(control, Starlette(routes=routes))


# --- a2a-sdk 0.3, in its own venv --------------------------------------------------------------


def sdk03_app(control: Control, card_json: dict[str, Any]) -> App:
    """One agent served by a2a-sdk 0.3."""
    apps = importlib.import_module("a2a.server.apps")
    execution = importlib.import_module("a2a.server.agent_execution")
    handlers = importlib.import_module("a2a.server.request_handlers")
    tasks = importlib.import_module("a2a.server.tasks")
    types = importlib.import_module("a2a.types")
    errors = importlib.import_module("a2a.utils.errors")
    kinds = {
        "task": types.Task,
        "message": types.Message,
        "status-update": types.TaskStatusUpdateEvent,
        "artifact-update": types.TaskArtifactUpdateEvent,
    }

    def putter(queue: Any) -> Put:
        async def put(kind: str, doc: dict[str, Any]) -> None:
            await queue.enqueue_event(kinds[kind].model_validate(doc))

        return put

    base: Any = execution.AgentExecutor

    class Executor(base):
        async def execute(self, context: Any, event_queue: Any) -> None:
            task = context.current_task
            waiting = task is not None and task.status.state == types.TaskState.input_required
            message = context.message.model_dump(mode="json", by_alias=True, exclude_none=True)
            ask = Ask.read(message, waiting)
            out = Out(putter(event_queue), False, context.task_id, context.context_id, task is None)
            await behave(ask, out, control)

        async def cancel(self, context: Any, event_queue: Any) -> None:
            if control.kinds.get(context.task_id) == "stubborn":
                raise errors.ServerError(error=types.TaskNotCancelableError())
            out = Out(putter(event_queue), False, context.task_id, context.context_id, False)
            await out.status("canceled")

    handler = handlers.DefaultRequestHandler(
        agent_executor=Executor(), task_store=tasks.InMemoryTaskStore()
    )
    agent_card = types.AgentCard.model_validate(card_json)
    app: App = apps.A2AStarletteApplication(agent_card=agent_card, http_handler=handler).build()
    return app


def main(port: int) -> None:
    """Serve Echo and Vault with a2a-sdk 0.3 on 127.0.0.1:`port`."""
    watch_outbound()
    base = f"http://127.0.0.1:{port}"
    control = Control(base)
    agents = {
        "echo": sdk03_app(control, card("echo", base + "/", "0.3")),
        "keyed": keyed(sdk03_app(control, card("vault", base + "/keyed/", "0.3"))),
    }
    uvicorn.run(server_app(control, agents), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
