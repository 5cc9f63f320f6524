"""The test A2A agents (`tests.helpers.a2a_agents`) as the tests start them: served by a2a-sdk
1.3 in this process (as A2A 1.0, or 1.0 with 0.3 compatibility) or by the real 0.3.26 in a
process and venv of its own, three agents under one port: `/` (Echo: text, data and PNG/JPEG
pictures), `/keyed/` (Vault: a bearer key, text only) and, on the compatibility server,
`/legacy/` (a card that still offers only 0.3). `AgentServer.calls()` lists every JSON-RPC call
the server got, and checks it reached nothing off loopback.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from tests.helpers.a2a_agents import (
    App,
    Ask,
    Control,
    Out,
    Put,
    behave,
    card,
    keyed,
    server_app,
    watch_outbound,
)
from tests.helpers.bridge import Bridge, Machine
from tests.helpers.http import free_port

ROOT = Path(__file__).resolve().parents[2]
VENV03 = ROOT / ".venv" / "a2a03"  # the real 0.3 server's venv (`make test` builds it)
AGENTS = Path(__file__).with_name("a2a_agents.py")
FLAVOURS = ("1.0", "compat", "0.3")


# --- a2a-sdk 1.3, in this process --------------------------------------------------------------


def sdk10_app(control: Control, card_json: dict[str, Any], compat: bool) -> App:
    """One agent served by a2a-sdk 1.3 (A2A 1.0; with `compat`, 0.3 on the same URL too)."""
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import a2a_pb2 as pb
    from a2a.utils.errors import TaskNotCancelableError
    from google.protobuf.json_format import (  # type: ignore[import-untyped]  # no stubs here
        MessageToDict,
        ParseDict,
    )

    kinds = {
        "task": pb.Task,
        "message": pb.Message,
        "status-update": pb.TaskStatusUpdateEvent,
        "artifact-update": pb.TaskArtifactUpdateEvent,
    }

    def putter(queue: EventQueue) -> Put:
        async def put(kind: str, doc: dict[str, Any]) -> None:
            await queue.enqueue_event(ParseDict(doc, kinds[kind]()))

        return put

    class Executor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task
            waiting = task is not None and task.status.state == pb.TASK_STATE_INPUT_REQUIRED
            assert context.message is not None and context.task_id and context.context_id
            ask = Ask.read(MessageToDict(context.message), waiting)
            out = Out(putter(event_queue), True, context.task_id, context.context_id, task is None)
            await behave(ask, out, control)

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            assert context.task_id and context.context_id
            if control.kinds.get(context.task_id) == "stubborn":
                raise TaskNotCancelableError(message="this agent finishes what it starts")
            out = Out(putter(event_queue), True, context.task_id, context.context_id, False)
            await out.status("canceled")

    agent_card = ParseDict(card_json, pb.AgentCard())
    handler = DefaultRequestHandler(
        agent_executor=Executor(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
        validate_input_modes=True,
    )
    routes = create_agent_card_routes(agent_card)
    routes += create_jsonrpc_routes(handler, "/", enable_v0_3_compat=compat)
    return Starlette(routes=routes)


class AgentServer:
    """A test agents' server on a free loopback port: its agents' URLs, its calls, its gates."""

    def __init__(self, flavour: str, base: str) -> None:
        self.flavour = flavour
        self.base = base
        self.echo = base + "/"
        self.vault = base + "/keyed/"
        self.legacy = base + "/legacy/"

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        """The JSON-RPC calls the server got (of `method`, if given), in order; and the check
        that it reached nothing off loopback."""
        got = http_json(self.base + "/control/calls")
        assert got["outbound"] == [], f"the SDK server reached off loopback: {got['outbound']}"
        return [c for c in got["calls"] if method is None or c["method"] == method]

    def open(self, gate: str) -> None:
        """Let the agents waiting on `gate` go on."""
        http_json(f"{self.base}/control/open/{gate}", {})

    @property
    def modern(self) -> bool:
        return self.flavour != "0.3"

    def method(self, name: str) -> str:
        """A method's name in this server's dialect (`send`, `stream`, `get`, `cancel`)."""
        names = {
            "send": ("SendMessage", "message/send"),
            "stream": ("SendStreamingMessage", "message/stream"),
            "get": ("GetTask", "tasks/get"),
            "cancel": ("CancelTask", "tasks/cancel"),
            "subscribe": ("SubscribeToTask", "tasks/resubscribe"),
        }[name]
        return names[0] if self.modern else names[1]

    def task_state(self, task: str) -> str:
        """The task's state as the agent keeps it (`canceled`, `completed`, …)."""
        headers = {"A2A-Version": "1.0"} if self.modern else {}
        body = {"jsonrpc": "2.0", "id": 1, "method": self.method("get"), "params": {"id": task}}
        state = http_json(self.echo, body, headers)["result"]["status"]["state"]
        return str(state).removeprefix("TASK_STATE_").lower().replace("_", "-")

    def close(self) -> None:
        raise NotImplementedError


class InProcess(AgentServer):
    """a2a-sdk 1.3 under uvicorn, in a thread of this process."""

    def __init__(self, flavour: str) -> None:
        port = free_port()
        super().__init__(flavour, f"http://127.0.0.1:{port}")
        watch_outbound()
        control = Control(self.base)
        compat = flavour == "compat"
        agents = {
            "echo": sdk10_app(control, card("echo", self.echo, flavour), compat),
            "keyed": keyed(sdk10_app(control, card("vault", self.vault, flavour), compat)),
        }
        if compat:
            agents["legacy"] = sdk10_app(control, card("legacy", self.legacy, "0.3 only"), True)
        config = uvicorn.Config(
            server_app(control, agents), host="127.0.0.1", port=port, log_level="warning"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="a2a-agent")
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            assert time.monotonic() < deadline and self._thread.is_alive(), "no A2A server"
            time.sleep(0.02)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


class Subprocess(AgentServer):
    """The real a2a-sdk 0.3.26 server, in its own venv and process."""

    def __init__(self) -> None:
        port = free_port()
        super().__init__("0.3", f"http://127.0.0.1:{port}")
        self.process = subprocess.Popen(
            [str(VENV03 / "bin" / "python"), str(AGENTS), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                http_json(self.base + "/control/calls")
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError(f"the 0.3 server didn't start: {self.stderr()}")
            time.sleep(0.1)

    def stderr(self) -> str:
        """What it wrote to stderr, once it has exited."""
        exited = self.process.poll() is not None and self.process.stderr
        return self.process.stderr.read() if exited and self.process.stderr else ""

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.process.stderr:
            self.process.stderr.close()


def http_json(url: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    """A GET (or, with `body`, a JSON POST) to a test server, its JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers or {})
    if data is not None:
        request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def venv03_missing() -> str | None:
    """Why the real 0.3 server can't run here, or None when it can."""
    if not (VENV03 / ".installed").exists():
        return (
            f"the real a2a-sdk 0.3 server needs {VENV03.relative_to(ROOT)} (`make test` builds it)"
        )
    return None


@contextlib.contextmanager
def serving(flavour: str) -> Iterator[AgentServer]:
    """The test agents served as `flavour`: 1.0, compat (1.0 with 0.3 compatibility) or 0.3."""
    server: AgentServer = Subprocess() if flavour == "0.3" else InProcess(flavour)
    try:
        yield server
    finally:
        server.close()


BRIDGE = ("--json", "--interval", "0.3", "--allow-private-media")  # pictures from loopback


def run_a2a(machine: Machine, url: str, *args: str, stdin: str | None = None, **env: str) -> Bridge:
    """`yui run-a2a URL` as a real process on `machine`, its JSON events read as they come."""
    return machine.run("run-a2a", url, *BRIDGE, *args, stdin=stdin, **env)


def wait_for(what: Callable[[], Any], timeout: float = 30, why: str = "") -> Any:
    """What `what` returns once it is truthy, looking every 50 ms."""
    deadline = time.monotonic() + timeout
    while not (found := what()):
        assert time.monotonic() < deadline, f"waited {timeout} s for {why or what}"
        time.sleep(0.05)
    return found
