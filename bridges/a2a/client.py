"""JSON-RPC to an A2A agent over plain HTTP (`requests`), its streams read with `sseclient`.

Every failure is one of a few kinds, because the plug-in treats them differently:
`AgentUnavailable` (can't connect, 408/425/429/5xx, a stream that breaks: ask again later and
resume), `AgentRefused` (401/403, or an answer that isn't A2A: say so and end the turn),
`RpcError` (the agent's own JSON-RPC error: task not found, not cancelable, …) and `HungUp` (the
turn was cancelled and the bridge hung up).

A call that may take a while (a stream, a send) is hung up the moment its turn is cancelled: a
watcher shuts the socket, which ends a read blocked on a silent agent at once and tells the
agent's server the client has gone. The key travels in one header and is cut out of anything an
agent says back before it reaches a log or the person.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from collections.abc import Generator, Iterator
from typing import Any

import requests
import urllib3
from sseclient import SSEClient

from bridges.a2a.card import Card
from bridges.client.relay import USER_AGENT
from bridges.retry import retry_after
from state.host import Secret

CONNECT_TIMEOUT = 10.0  # seconds to open a connection to the agent
CALL_TIMEOUT = 60.0  # seconds a quick call (a task's state, a cancel) may take
MAX_ANSWER = 64 * 1024 * 1024  # bytes of one answer, or of one stream, read at most
WATCH_EVERY = 0.1  # seconds between the hang-up watcher's looks
RETRY_STATUSES = frozenset({408, 425, 429})

# The JSON-RPC errors A2A defines that the plug-in acts on.
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED = -32004
INTERNAL = -32603


class AgentUnavailable(Exception):
    """The agent can't be reached or is busy: ask again later."""

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


class AgentRefused(Exception):
    """The agent said no at the HTTP level (401, 403, a request it won't take), or didn't
    answer as an A2A agent: asking again won't change it."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class RpcError(Exception):
    """The agent's JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class HungUp(Exception):
    """The turn was cancelled (the person's Stop, or the bridge stopping): the call was cut."""


class _Hangup:
    """Shuts the response's socket the moment `cancelled` is set."""

    def __init__(self, resp: requests.Response, cancelled: threading.Event) -> None:
        self._done = threading.Event()
        conn = getattr(resp.raw, "connection", None)
        self._sock: socket.socket | None = getattr(conn, "sock", None)
        threading.Thread(
            target=self._watch, args=(cancelled,), daemon=True, name="a2a-hangup"
        ).start()

    def _watch(self, cancelled: threading.Event) -> None:
        while not self._done.is_set():
            if cancelled.wait(WATCH_EVERY):
                if self._sock is not None:
                    with contextlib.suppress(OSError):
                        self._sock.shutdown(socket.SHUT_RDWR)
                return

    def stop(self) -> None:
        self._done.set()


class A2AClient:
    """Calls one agent, as its card says (the card may be swapped for a fresher one)."""

    def __init__(
        self,
        card: Card,
        *,
        key: Secret | None = None,
        timeout: float = 300.0,
        session: requests.Session | None = None,
    ) -> None:
        self.card = card
        self.timeout = timeout
        self.session = session or requests.Session()
        self._key = key
        self._ids = itertools.count(1)

    def call(self, method: str, params: dict[str, Any]) -> Any:
        """One quick call's result."""
        with self._open(method, params, None, stream=False) as resp:
            return self._result(self._json(resp))

    def send(self, method: str, params: dict[str, Any], cancelled: threading.Event) -> Any:
        """A send's result; hung up when `cancelled` is set."""
        with self._open(method, params, cancelled, stream=False) as resp:
            return self._result(self._json(resp, cancelled))

    def stream(
        self, method: str, params: dict[str, Any], cancelled: threading.Event
    ) -> Generator[Any, None, None]:
        """Each result of a streaming call, as it comes; a plain JSON answer (usually an
        error) is its only result."""
        with self._open(method, params, cancelled, stream=True) as resp:
            if "event-stream" not in resp.headers.get("content-type", ""):
                yield self._result(self._json(resp, cancelled))
                return
            try:
                for event in SSEClient(_pieces(resp, cancelled)).events():
                    if not event.data.strip():
                        continue
                    try:
                        doc = json.loads(event.data)
                    except ValueError:
                        continue  # a keep-alive, or a comment sent as data
                    yield self._result(doc)
            except (OSError, requests.RequestException, urllib3.exceptions.HTTPError) as exc:
                if cancelled.is_set():
                    raise HungUp from None
                raise AgentUnavailable(self._problem(exc, "the stream")) from None
        if cancelled.is_set():
            raise HungUp

    @contextlib.contextmanager
    def _open(
        self,
        method: str,
        params: dict[str, Any],
        cancelled: threading.Event | None,
        *,
        stream: bool,
    ) -> Iterator[requests.Response]:
        """The call's response, hung up when `cancelled` is set (a quick call has none)."""
        if cancelled is not None and cancelled.is_set():
            raise HungUp
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        quick = method in (self.card.dialect.get, self.card.dialect.cancel)
        wait = min(CALL_TIMEOUT, self.timeout) if quick else self.timeout
        try:
            resp = self.session.post(
                self.card.url,
                data=json.dumps(body).encode(),
                headers=self._headers(stream),
                timeout=(CONNECT_TIMEOUT, wait),
                stream=True,
                allow_redirects=False,  # a redirected POST may turn into a GET or leave the host
            )
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            if cancelled is not None and cancelled.is_set():
                raise HungUp from None
            raise AgentUnavailable(self._problem(exc, "calling")) from None
        hangup = _Hangup(resp, cancelled) if cancelled is not None else None
        try:
            self._check(resp)
            yield resp
        finally:
            if hangup is not None:
                hangup.stop()
            resp.close()

    def _headers(self, stream: bool) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if stream else "application/json",
            "user-agent": USER_AGENT,
            **self.card.dialect.headers,
        }
        if self._key is not None:
            auth = self.card.auth
            if auth is None:
                headers["authorization"] = "Bearer " + self._key.reveal()
            else:
                headers[auth.header] = auth.value(self._key.reveal())
        return headers

    def _check(self, resp: requests.Response) -> None:
        status = resp.status_code
        if 200 <= status < 300:
            return
        said = self._scrub(_words(resp))
        reason = f"{self.card.where} answered {status}" + (f": {said}" if said else "")
        if status in RETRY_STATUSES or status >= 500:
            raise AgentUnavailable(reason, retry_after(resp.headers.get("retry-after")))
        raise AgentRefused(status, said or (resp.reason or ""))

    def _json(self, resp: requests.Response, cancelled: threading.Event | None = None) -> Any:
        try:
            raw = resp.raw.read(MAX_ANSWER + 1, decode_content=True)
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            if cancelled is not None and cancelled.is_set():
                raise HungUp from None
            raise AgentUnavailable(self._problem(exc, "the answer")) from None
        if len(raw) > MAX_ANSWER:
            raise AgentRefused(resp.status_code, f"an answer over {MAX_ANSWER} bytes")
        try:
            return json.loads(raw)
        except ValueError:
            raise AgentRefused(
                resp.status_code, f"{self.card.where} didn't answer in JSON-RPC; check the URL"
            ) from None

    def _result(self, doc: Any) -> Any:
        """A JSON-RPC response's result, or its error raised."""
        if not isinstance(doc, dict) or ("result" not in doc and "error" not in doc):
            raise AgentRefused(200, "the answer is not a JSON-RPC response")
        error = doc.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            text = self._scrub(" ".join(str(message or error).split())[:300])
            raise RpcError(code if isinstance(code, int) else 0, text)
        return doc["result"]

    def _scrub(self, text: str) -> str:
        """`text` without the key, should an agent quote it back."""
        key = self._key.reveal() if self._key else ""
        return text.replace(key, "[key]") if len(key) >= 4 else text

    def _problem(self, exc: BaseException, what: str) -> str:
        """Why a call failed, naming the host only."""
        if isinstance(exc, requests.Timeout | urllib3.exceptions.ReadTimeoutError | TimeoutError):
            return f"no word from {self.card.where} for {self.timeout:g} s"
        return f"{what} {self.card.where} failed: {_reason(exc)}"


def _pieces(resp: requests.Response, cancelled: threading.Event) -> Iterator[bytes]:
    """The body as it arrives (`read1` returns what is there), capped, ending when cancelled."""
    size = 0
    while not cancelled.is_set():
        piece = resp.raw.read1(65536, decode_content=True)
        if not piece:
            return
        size += len(piece)
        if size > MAX_ANSWER:
            raise AgentRefused(resp.status_code, f"a stream over {MAX_ANSWER} bytes")
        yield piece


def _words(resp: requests.Response) -> str:
    """The start of an error answer, its message when it is JSON, on one line."""
    try:
        head = resp.raw.read(2048, decode_content=True) or b""
    except (OSError, urllib3.exceptions.HTTPError):
        return ""
    text = head.decode("utf-8", errors="replace")
    with contextlib.suppress(ValueError):
        doc = json.loads(text)
        if isinstance(doc, dict):
            found = doc.get("error", doc.get("detail", doc.get("message", text)))
            if isinstance(found, dict):
                found = found.get("message", text)
            text = str(found)
    return " ".join(text.split())[:300]


def _reason(exc: BaseException) -> str:
    """The OS's words for a failure (requests and urllib3 wrap them a few levels deep)."""
    seen: list[BaseException] = []
    todo: list[object] = [exc]
    while todo:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or any(item is e for e in seen):
            continue
        seen.append(item)
        if isinstance(item, OSError) and item.strerror:
            return item.strerror
        todo += [getattr(item, "reason", None), *item.args, item.__cause__, item.__context__]
    return type(exc).__name__
