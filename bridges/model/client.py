"""A client for any OpenAI-compatible `/chat/completions` server: Ollama, llama.cpp, vLLM,
LM Studio, OpenAI, OpenRouter.

Every failure is one of three kinds, because the bridge treats them differently:
`ModelUnavailable` (can't connect, 408/409/425/429/5xx, a stream that breaks or goes quiet:
ask again later, after `Retry-After` when the server gave one), `ModelRefused` (the server said
no in a way asking again won't change: unknown model, bad key, a request it won't take) and
`Cancelled` (the person pressed Stop).

Each request has a connection of its own, opened here rather than in a pool, so the socket
exists before the request is sent: when Stop comes, a watcher shuts it at once, which ends a
read blocked on a silent server and tells the server to stop generating, whether or not its
first byte has arrived. The key travels in one header, and is cut out of any text a server
sends back before that text reaches a log or an error.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import urllib3
from requests.utils import DEFAULT_CA_BUNDLE_PATH
from sseclient import SSEClient
from urllib3.connection import HTTPConnection, HTTPSConnection

from bridges.client.relay import USER_AGENT
from bridges.retry import retry_after
from state.host import Secret

log = logging.getLogger("yui.model")

CONNECT_TIMEOUT = 10.0  # seconds to open a connection to the model server
MAX_ANSWER = 10 * 1024 * 1024  # bytes of a plain answer read at most
WATCH_EVERY = 0.1  # seconds between the watcher's looks at `cancelled`
RETRY_STATUSES = frozenset({408, 409, 425, 429})
# An error inside a stream that says the server is busy, not that the request is wrong.
TRANSIENT = re.compile(r"overload|rate|capacity|timeout|unavailable|busy|shutting", re.IGNORECASE)


@dataclass(frozen=True)
class Server:
    """A kind of model server: where it usually listens, and the variable its key is in."""

    url: str
    key_env: str | None = None


SERVERS = {
    "ollama": Server("http://127.0.0.1:11434/v1"),
    "llamacpp": Server("http://127.0.0.1:8080/v1"),
    "vllm": Server("http://127.0.0.1:8000/v1"),
    "lmstudio": Server("http://127.0.0.1:1234/v1"),
    "openai": Server("https://api.openai.com/v1", key_env="OPENAI_API_KEY"),
    "openrouter": Server("https://openrouter.ai/api/v1", key_env="OPENROUTER_API_KEY"),
}


class ModelUnavailable(Exception):
    """The server can't be reached or is busy: ask again later."""

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


class ModelRefused(Exception):
    """The server said no, and asking again won't change its mind."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class StreamRefused(ModelRefused):
    """The server won't stream (a 400 naming streaming): ask it plainly instead."""


class Cancelled(Exception):
    """The person pressed Stop (or the bridge is stopping) while the model was asked."""


@dataclass(frozen=True)
class Completion:
    text: str
    finish: str | None  # the server's finish_reason: stop, length, content_filter, …
    streamed: bool


def base_url(url: str) -> str:
    """The server's base URL: a full `…/chat/completions` URL is cut back to its base."""
    url = url.strip().rstrip("/").removesuffix("/chat/completions")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the model server's URL must be http:// or https:// with a host: {url}")
    return url


def error_message(raw: bytes | str) -> str:
    """The words of an error answer, whatever shape the server gives them, on one line."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, list) and data:  # some servers wrap the error in a list
        data = data[0]
    if isinstance(data, dict):
        found = data.get("error", data.get("detail", data.get("message")))
        if isinstance(found, dict):
            found = found.get("message") or found.get("msg")
        elif isinstance(found, list) and found and isinstance(found[0], dict):
            found = found[0].get("msg")
        if isinstance(found, str):
            text = found
    return " ".join(text.split())[:300]


def explain(status: int, message: str, model: str) -> str:
    """A short reason a person can act on, for an error asking again won't fix."""
    said = f" ({status}: {message})" if message else f" ({status})"
    if status in (401, 403) or "api key" in message.lower():
        return "the model server turned the key down" + said
    if status == 402 or re.search(r"credit|balance|quota", message, re.IGNORECASE):
        return "the model account is out of credit" + said
    if status == 404:
        return f"the model server doesn't know the model {model}" + said
    if re.search(r"context|too long|maximum.*tokens|must fit", message, re.IGNORECASE):
        return "the conversation is too long for the model's window" + said
    return "the model server refused the request" + said


class _Hangup:
    """Shuts a connection's socket the moment `cancelled` is set, so a read blocked on a silent
    server ends at once and the server sees the request closed."""

    def __init__(self, conn: HTTPConnection, cancelled: threading.Event) -> None:
        self._done = threading.Event()
        watcher = threading.Thread(
            target=self._watch, args=(conn, cancelled), daemon=True, name="model-hangup"
        )
        watcher.start()

    def _watch(self, conn: HTTPConnection, cancelled: threading.Event) -> None:
        while not self._done.is_set():
            if cancelled.wait(WATCH_EVERY):
                if conn.sock is not None:
                    with contextlib.suppress(OSError):
                        conn.sock.shutdown(socket.SHUT_RDWR)
                return

    def stop(self) -> None:
        self._done.set()


class ChatClient:
    """Asks one model on one server; `stream` turns off for good if the server refuses it."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        key: Secret | None = None,
        stream: bool = True,
        idle: float = 300.0,
    ) -> None:
        self.url = base_url(url)
        self.model = model
        self.stream = stream
        self.idle = idle
        self._key = key
        parts = urlsplit(self.url)
        # Messages name the host only: a URL's user info, path or query may carry a secret.
        self.where = parts.netloc.rpartition("@")[2]
        self._path = parts.path.rstrip("/") + "/chat/completions"
        if parts.query:
            self._path += "?" + parts.query

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        cancelled: threading.Event | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """One answer to `messages`; `on_text` sees each piece of a stream as it comes."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if temperature is not None:
            body["temperature"] = temperature
        cancelled = cancelled or threading.Event()
        if self.stream:
            try:
                return self._call({**body, "stream": True}, cancelled, on_text)
            except StreamRefused as exc:
                log.warning(
                    "%s won't stream (%s); asking without streaming from now on",
                    self.where,
                    exc.reason,
                )
                self.stream = False
        return self._call({**body, "stream": False}, cancelled, on_text)

    def _call(
        self,
        body: dict[str, Any],
        cancelled: threading.Event,
        on_text: Callable[[str], None] | None,
    ) -> Completion:
        if cancelled.is_set():
            raise Cancelled
        conn = self._connect()
        hangup = _Hangup(conn, cancelled)
        try:
            conn.request(
                "POST",
                self._path,
                body=json.dumps(body).encode(),
                headers=self._headers(),
                preload_content=False,
            )
            response = conn.getresponse()
            if response.status >= 300:
                raise self._error(response)
            if body["stream"] and "event-stream" in response.headers.get("content-type", ""):
                return self._read_stream(response, cancelled, on_text)
            completion = self._read_plain(response)
            if on_text and completion.text:
                on_text(completion.text)
            return completion
        except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as exc:
            if cancelled.is_set():
                raise Cancelled from None
            raise ModelUnavailable(self._problem(exc)) from None
        finally:
            hangup.stop()
            conn.close()

    def _connect(self) -> HTTPConnection:
        parts = urlsplit(self.url)
        conn: HTTPConnection
        if parts.scheme == "https":
            conn = HTTPSConnection(
                parts.hostname or "",
                parts.port,
                timeout=CONNECT_TIMEOUT,
                ca_certs=DEFAULT_CA_BUNDLE_PATH,
            )
        else:
            conn = HTTPConnection(parts.hostname or "", parts.port, timeout=CONNECT_TIMEOUT)
        try:
            conn.connect()
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            conn.close()
            raise ModelUnavailable(self._problem(exc, connecting=True)) from None
        conn.timeout = self.idle  # from now on, the longest silence a read waits through
        return conn

    def _headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream, application/json",
            "user-agent": USER_AGENT,
        }
        if self._key is not None:
            headers["authorization"] = "Bearer " + self._key.reveal()
        return headers

    def _scrub(self, text: str) -> str:
        """`text` without the key, should a server quote it back."""
        key = self._key.reveal() if self._key else ""
        return text.replace(key, "[key]") if len(key) >= 4 else text

    def _error(self, response: urllib3.BaseHTTPResponse) -> Exception:
        """What a non-2xx answer means: try later, ask plainly, or give up on this turn."""
        status = response.status
        try:
            raw = response.read(4096)
        except (OSError, urllib3.exceptions.HTTPError):
            raw = b""
        message = self._scrub(error_message(raw)) or (response.reason or "")
        after = retry_after(response.headers.get("retry-after"))
        if status in RETRY_STATUSES or status >= 500:
            return ModelUnavailable(f"{self.where} answered {status}: {message}", after)
        if status == 400 and "stream" in message.lower():
            return StreamRefused(status, message)
        return ModelRefused(status, explain(status, message, self.model))

    def _read_plain(self, response: urllib3.BaseHTTPResponse) -> Completion:
        raw = response.read(MAX_ANSWER + 1)
        if len(raw) > MAX_ANSWER:
            raise ModelRefused(response.status, f"the answer is over {MAX_ANSWER} bytes")
        try:
            data = json.loads(raw)
        except ValueError:
            raise ModelRefused(
                response.status,
                f"{self.where} didn't answer as a chat-completions server; check the URL",
            ) from None
        if not isinstance(data, dict):
            raise ModelRefused(response.status, "the answer is not a JSON object")
        if data.get("error"):
            raise ModelRefused(response.status, self._scrub(error_message(json.dumps(data))))
        choice = (data.get("choices") or [None])[0]
        if not isinstance(choice, dict):
            raise ModelRefused(response.status, "the answer has no choices")
        message = choice.get("message") or {}
        text = message.get("content") or message.get("refusal") or choice.get("text") or ""
        return Completion(str(text), choice.get("finish_reason"), streamed=False)

    def _read_stream(
        self,
        response: urllib3.BaseHTTPResponse,
        cancelled: threading.Event,
        on_text: Callable[[str], None] | None,
    ) -> Completion:
        """Read server-sent events until `[DONE]`; a stream that ends without `[DONE]` or a
        finish reason broke off, and is asked again."""
        parts: list[str] = []
        refusal: list[str] = []
        finish: str | None = None
        done = False
        for event in SSEClient(_pieces(response, cancelled)).events():
            if cancelled.is_set():
                break
            if event.data.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(event.data)
            except ValueError:
                continue  # a keep-alive or a comment some servers send as data
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):
                raise self._stream_error(chunk["error"])
            choice = (chunk.get("choices") or [None])[0]
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                parts.append(piece)
                if on_text:
                    on_text(piece)
            if isinstance(delta.get("refusal"), str):
                refusal.append(delta["refusal"])
            finish = choice.get("finish_reason") or finish
        if cancelled.is_set():
            raise Cancelled
        if not done and finish is None:
            raise ModelUnavailable(f"the stream from {self.where} stopped before the answer ended")
        return Completion("".join(parts) or "".join(refusal), finish, streamed=True)

    def _stream_error(self, error: Any) -> Exception:
        """An error the server sent inside a stream (after its 200)."""
        message = self._scrub(error_message(json.dumps(error)))
        kind = json.dumps(error) if isinstance(error, dict) else ""
        if TRANSIENT.search(message) or re.search(r"rate_limit|server_error", kind):
            return ModelUnavailable(f"{self.where} broke off: {message}")
        return ModelRefused(200, f"the model server stopped the answer ({message})")

    def _problem(self, exc: BaseException, *, connecting: bool = False) -> str:
        """Why a call failed, naming the host only."""
        timeout = isinstance(exc, TimeoutError | urllib3.exceptions.ReadTimeoutError)
        if timeout and not connecting:
            return f"no answer from {self.where} for {self.idle:g} s"
        return f"can't reach the model server at {self.where}: {_reason(exc)}"


def _pieces(response: urllib3.BaseHTTPResponse, cancelled: threading.Event) -> Iterator[bytes]:
    """The body as it arrives (`read1` returns what is there rather than waiting for a full
    buffer), ending early when the turn is cancelled."""
    while not cancelled.is_set():
        piece = response.read1(65536)
        if not piece:
            return
        yield piece


def _reason(exc: BaseException) -> str:
    """The OS's words for a failure (urllib3 and http.client wrap them a few levels deep)."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for link in chain:
        if isinstance(link, OSError) and link.strerror:
            return link.strerror
    if any(isinstance(link, TimeoutError | urllib3.exceptions.TimeoutError) for link in chain):
        return "timed out"
    return type(exc).__name__
