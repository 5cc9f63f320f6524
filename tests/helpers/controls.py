"""Controls from the host's side: an author's webhook that serves Controls (a fake on
loopback), and what the engine does with the person's control rows, run by hand so a test
decides when the host answers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from bridges.client.host import HostSession
from bridges.controls.provider import ControlsProvider
from bridges.controls.requests import handle_control
from bridges.controls.store import ControlsState
from bridges.engine.delivery import write_acks, write_outbox
from state.host import HostState, OutboxItem
from tests.helpers.http import LoopbackServer

# A Slack token in one of the hook's memories: it must never reach the relay.
TOKEN = "xoxb-1234567890-abcdefghijklmnopqrstuv"
SECTIONS = {"soul": "rw", "memory": "rwd", "schedules": "rwd", "model": "r", "channels": "rw"}


class ControlsHook(LoopbackServer):
    """An author's webhook that serves Controls from a dict (a memory holds a Slack token),
    echoes turns, and records every request."""

    def __init__(self, report: Any = None) -> None:
        self.report = {"v": 1, "sections": SECTIONS} if report is None else report
        self.items: dict[str, dict[str, dict[str, Any]]] = {
            "soul": {"SOUL.md": {"id": "SOUL.md", "text": "# Echo\nYou repeat things."}},
            "memory": {
                "m1": {"id": "m1", "text": "Likes tea"},
                "m2": {"id": "m2", "text": f"Team chat\nslack: {TOKEN}"},
            },
            "schedules": {
                "morning": {"id": "morning", "title": "morning brief", "paused": False},
            },
            "model": {"model": {"id": "model", "text": "echo, on this computer"}},
        }
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.special: dict[str, Any] = {}  # op → a canned answer
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hook.requests.append(("GET", self._headers(), b""))
                if self.headers.get("x-yui-kind") != "controls" or hook.report is False:
                    self._send(404, b"not here")
                else:
                    self._send(200, json.dumps(hook.report).encode())

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                hook.requests.append(("POST", self._headers(), raw))
                payload = json.loads(raw)
                if self.headers.get("x-yui-kind") == "control":
                    with hook.lock:
                        answer = hook.serve(payload["control"])
                else:
                    answer = {"reply": "echo: " + payload["text"]}
                self._send(200, json.dumps(answer).encode())

            def _headers(self) -> dict[str, str]:
                return {k.lower(): v for k, v in self.headers.items()}

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler, daemon_threads=True)

    def serve(self, control: dict[str, Any]) -> dict[str, Any]:
        op, section = control["op"], control["section"]
        if op in self.special:
            return self.special[op]
        items = self.items[section]
        if op == "list":
            return {"ok": True, "items": list(items.values())}
        item = items.get(control["id"])
        if item is None:
            return {"ok": False, "error": "not_found"}
        if op == "put":
            item["text"] = control["value"]["text"]
        elif op == "act":
            item["paused"] = control["verb"] == "pause"
        elif op == "delete":
            del items[control["id"]]
            return {"ok": True}
        return {"ok": True, "item": item}

    def controls(self) -> list[dict[str, Any]]:
        return [
            json.loads(raw)["control"]
            for _, h, raw in self.requests
            if raw and h.get("x-yui-kind") == "control"
        ]

    def turns(self) -> list[dict[str, Any]]:
        return [json.loads(raw) for m, h, raw in self.requests if m == "POST" and "x-yui-turn" in h]


def serve_controls(
    session: HostSession, state: HostState, provider: ControlsProvider | None, cs: ControlsState
) -> int:
    """What the engine does with the person's control rows: one answer each, acked with it."""
    rows = session.rows(
        "yui_messages",
        [
            ("select", "id,agent_id,user_id,sender,body,kind,meta,created_at,delivered_at"),
            ("sender", "eq.user"),
            ("kind", "eq.control"),
            ("handled_at", "is.null"),
            ("order", "created_at.asc"),
        ],
    )
    for row in rows:
        agent = session.agents[row["agent_id"]]
        answer = handle_control(row, agent, provider, session, cs)
        if answer is None:
            state.add_acks([row["id"]])
        else:
            state.enqueue(OutboxItem(answer, ack=(row["id"],)))
    write_outbox(session, state)
    write_acks(session, state)
    return len(rows)
