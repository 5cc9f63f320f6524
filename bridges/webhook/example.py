"""The example agent: the smallest webhook a Yui bridge can talk to.

Say hi and it answers with three buttons; tap one and it names your pick. Run it, then the
bridge with `--webhook http://127.0.0.1:8787`. It is meant to be read and copied: one POST per
turn comes in as JSON, and `{"reply": "..."}` goes back. With YUI_WEBHOOK_SECRET set (the same
secret the bridge signs with), unsigned or stale POSTs are turned away with 401.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GREETING = 'Hi! What sounds good?\n```yui\nchoose "Pick one" Coffee|Walk|Nap\n```'


def reply_to(turn: dict[str, Any]) -> str:
    """The answer to one turn: name the last tap if there was one, else offer a choice."""
    events = [m["event"] for m in turn.get("messages", []) if m.get("event")]
    if not events:
        return GREETING
    tap = events[-1]
    if tap.get("echo"):
        return f"{tap['echo']} it is."
    return f"You answered {tap.get('preset', 'a screen')} with {json.dumps(tap.get('value'))}."


def signed(headers: Any, body: bytes, secret: str) -> bool:
    """Whether the bridge signed this body with `secret`, less than five minutes ago."""
    ts = headers.get("x-yui-timestamp", "")
    if not (ts.isascii() and ts.isdigit()) or abs(time.time() - int(ts)) > 300:
        return False
    mac = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    given = headers.get("x-yui-signature", "").encode()
    return hmac.compare_digest(given, f"sha256={mac}".encode())  # constant time


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        secret = os.environ.get("YUI_WEBHOOK_SECRET")
        if secret and not signed(self.headers, body, secret):
            self.answer(401, {"error": "bad signature"})
            return
        try:
            turn = json.loads(body)
        except ValueError:
            turn = None
        if isinstance(turn, dict):
            self.answer(200, {"reply": reply_to(turn)})
        else:
            self.answer(400, {"error": "not a Yui turn"})

    def answer(self, status: int, answer: dict[str, str]) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def make_server(port: int = 8787, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """The server, bound but not serving yet (port 0 picks a free one)."""
    return ThreadingHTTPServer((host, port), Handler)


def run(server: ThreadingHTTPServer) -> None:
    """Answer turns on a bound server until interrupted (Ctrl-C, which is raised on once
    the server is closed: `yui` exits 130 for it, as for a bridge)."""
    with server:
        server.serve_forever()


def serve(port: int = 8787, host: str = "127.0.0.1") -> None:
    """Answer turns until interrupted, once it says where it listens."""
    server = make_server(port, host)
    print(f"example agent on http://{host}:{server.server_port}")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the way to stop it
        run(server)


if __name__ == "__main__":
    serve(int(os.environ.get("PORT", "8787")))
