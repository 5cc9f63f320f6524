"""The webhook plug-in: any agent that can answer an HTTP POST can talk in Yui.

Each turn is POSTed as JSON to the author's URL; the answer (JSON or plain text) becomes the
reply texts. Anything that isn't a usable answer (the webhook down, slow, answering 5xx or
broken JSON) raises `RetryTurn`, so the engine asks again later with the same turn and the
same `x-yui-turn` key, which lets the webhook skip a turn it already answered.

With a secret, every POST is signed twice: `x-yui-signature` (the reference bridge's format)
and the Standard Webhooks headers, so an author can verify with either their own ten lines or
an off-the-shelf library.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import hmac
import json
import logging
import re
import time
from typing import Any
from urllib.parse import urlsplit

import urllib3
from requests.utils import get_auth_from_url

from bridges.client.http import HEADERS, pool_for
from bridges.client.relay import USER_AGENT, is_http_url
from bridges.client.rows import MAX_BODY
from bridges.controls.provider import ControlsProvider
from bridges.engine.plugin import AgentPlugin
from bridges.engine.replies import storable
from bridges.engine.turns import RetryTurn, Turn
from bridges.retry import retry_after
from bridges.webhook.controls import WebhookControls

MAX_RESPONSE = 10 * 1024 * 1024  # bytes of answer read at most; more is refused
CONNECTIONS = 256  # kept open to the webhook: as many as the engine asks turns at once
WHSEC_PREFIX = "whsec_"

log = logging.getLogger("yui.webhook")


class WebhookAgent(AgentPlugin):
    """POSTs each turn to `url` and reads the replies from the answer; with `controls`, also
    serves the Controls the webhook reports."""

    def __init__(
        self,
        url: str,
        *,
        secret: str | None = None,
        timeout: float = 300.0,
        controls: bool = False,
    ) -> None:
        if not is_http_url(url):
            raise ValueError("the webhook URL must be http:// or https:// with a host")
        self.url = url
        self.timeout = timeout
        self.pool = pool_for(url, CONNECTIONS)  # the environment's proxy and CA bundle
        self._sent = {**HEADERS, **_basic_auth(url)}  # in every call
        # Messages name the host only: a URL's user info, path or query may carry a token.
        self._where = urlsplit(url).netloc.rpartition("@")[2]
        self._keys: tuple[bytes, bytes] | None = None  # (x-yui-signature, webhook-signature)
        if secret is not None:
            if not secret:
                raise ValueError("the webhook secret is empty")
            self._keys = (secret.encode(), _standard_key(secret))
        self._controls = WebhookControls(self) if controls else None

    def controls(self) -> ControlsProvider | None:
        return self._controls

    def answer(self, turn: Turn) -> list[str]:
        if turn.cancelled.is_set():
            raise RetryTurn("cancelled")
        raw = json.dumps(payload(turn)).encode()
        deadline = time.monotonic() + self.timeout
        try:
            with self.call("POST", raw, self._headers(turn.key, raw), self.timeout) as resp:
                if not 200 <= resp.status < 300:
                    raise RetryTurn(
                        f"webhook answered {resp.status} {resp.reason or ''}".rstrip()
                        + _snippet(resp),
                        after=retry_after(resp.headers.get("retry-after")),
                    )
                body = self._read(resp, deadline)
                content_type = resp.headers.get("content-type", "")
        except urllib3.exceptions.HTTPError as exc:
            raise RetryTurn(self._problem(exc)) from exc
        return _clean(_replies(body, content_type, turn.key), turn.key)

    def call(
        self, method: str, raw: bytes | None, headers: dict[str, str], timeout: float
    ) -> urllib3.BaseHTTPResponse:
        """One call to the webhook, its answer unread: read it in a `with`, and the connection
        goes back to the pool once the answer is read whole, or is closed if it isn't. Never a
        redirect followed: a redirected POST may turn into a GET or leave the host."""
        return self.pool.urlopen(
            method,
            self.url,
            body=raw,
            headers={**self._sent, **headers},
            timeout=timeout,
            retries=False,
            redirect=False,
            preload_content=False,
        )

    def _headers(self, key: str, raw: bytes) -> dict[str, str]:
        return {**self.signed_headers(key, raw), "x-yui-turn": key}

    def signed_headers(self, key: str, raw: bytes) -> dict[str, str]:
        """The headers of any request to the webhook: with a secret, both signatures over
        `raw` (the exact bytes sent), with `key` as the Standard Webhooks id."""
        headers = {"content-type": "application/json", "user-agent": USER_AGENT}
        if self._keys is not None:
            yui_key, standard_key = self._keys
            ts = str(int(time.time()))
            mac = hmac.new(yui_key, ts.encode() + b"." + raw, hashlib.sha256)
            standard = hmac.new(standard_key, f"{key}.{ts}.".encode() + raw, hashlib.sha256)
            headers |= {
                "x-yui-timestamp": ts,
                "x-yui-signature": "sha256=" + mac.hexdigest(),
                "webhook-id": key,
                "webhook-timestamp": ts,
                "webhook-signature": "v1," + base64.b64encode(standard.digest()).decode(),
            }
        return headers

    def _read(self, resp: urllib3.BaseHTTPResponse, deadline: float) -> bytes:
        """The answer's body, refused when it is too big or comes slower than the timeout."""
        declared = resp.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > MAX_RESPONSE:
            raise RetryTurn(f"webhook answer is {declared} bytes, over {MAX_RESPONSE}")
        chunks: list[bytes] = []
        size = 0
        # read1 returns what has arrived, so a webhook that drips its answer still meets the
        # deadline (iter_content would wait for a full chunk first).
        while chunk := resp.read1(65536, decode_content=True):
            size += len(chunk)
            if size > MAX_RESPONSE:
                raise RetryTurn(f"webhook answer is over {MAX_RESPONSE} bytes")
            if time.monotonic() > deadline:
                raise RetryTurn(f"webhook timed out after {self.timeout:g} s")
            chunks.append(chunk)
        return b"".join(chunks)

    def _problem(self, exc: Exception) -> str:
        """Names why the call failed, without the URL's path or query."""
        chain = _chain(exc)
        if any(isinstance(e, urllib3.exceptions.ReadTimeoutError | TimeoutError) for e in chain):
            return f"webhook timed out after {self.timeout:g} s"
        reason = next(
            (e.strerror for e in chain if isinstance(e, OSError) and e.strerror),
            type(exc).__name__,
        )
        return f"webhook call to {self._where} failed: {reason}"


def payload(turn: Turn) -> dict[str, Any]:
    """What the webhook gets for a turn (the seed's shape)."""
    return {
        "agent": turn.agent.as_payload(),
        "turn": turn.ids,
        "text": turn.text,
        "messages": [
            {
                "id": str(row["id"]),
                "kind": row["kind"],
                "body": row["body"],
                "event": row.get("meta") if row["kind"] == "event" else None,
                "created_at": row.get("created_at"),
            }
            for row in turn.rows
        ],
        "guide": turn.guide,
    }


def _standard_key(secret: str) -> bytes:
    """The Standard Webhooks key: base64 after `whsec_`, else the secret's own bytes."""
    if not secret.startswith(WHSEC_PREFIX):
        return secret.encode()
    encoded = secret[len(WHSEC_PREFIX) :]
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        raise ValueError("a whsec_ secret must be base64 after the prefix") from None
    if not key:
        raise ValueError("the webhook secret is empty after whsec_")
    return key


def _replies(body: bytes, content_type: str, key: str) -> list[Any]:
    """The answer's reply candidates, before cleaning (see the table in the module's tests)."""
    if not body.strip():
        return []
    text = _decode(body, content_type, key)
    if "json" not in content_type.lower():
        return [text]
    try:
        data = json.loads(text.removeprefix("\ufeff"))
    except (ValueError, RecursionError) as exc:
        raise RetryTurn(f"webhook answered bad JSON: {exc}") from None
    if isinstance(data, dict):
        if "replies" in data:
            # Like the reference's Node client: a `replies` that isn't a list means no
            # replies (its Python client would send each character of a string on its own).
            return data["replies"] if isinstance(data["replies"], list) else []
        return [data.get("reply")]
    return data if isinstance(data, list) else [data]


def _decode(body: bytes, content_type: str, key: str) -> str:
    """The answer as text, in its charset when that is a text encoding we know, else UTF-8;
    bytes that don't decode are replaced, never a reason to fail."""
    match = re.search(r"charset=\"?([\w.:-]+)", content_type, re.IGNORECASE)
    charset = match.group(1) if match else "utf-8"
    try:
        if not codecs.lookup(charset)._is_text_encoding:  # base64, rot13, zlib: not text
            charset = "utf-8"
    except LookupError:
        charset = "utf-8"
    try:
        return body.decode(charset)
    except UnicodeError:
        log.warning("turn %s: webhook answer is not valid %s; bad bytes replaced", key, charset)
    try:
        return body.decode(charset, errors="replace")
    except UnicodeError:  # a codec that can't replace (idna, punycode)
        return body.decode("utf-8", errors="replace")


def _clean(replies: list[Any], key: str) -> list[str]:
    """Keeps the non-blank strings, without NUL bytes and cut to the relay's limit."""
    kept: list[str] = []
    for reply in replies:
        if not isinstance(reply, str):
            continue
        reply, mended = storable(reply)
        if mended:
            log.warning("turn %s: webhook reply held %s; mended", key, " and ".join(mended))
        if not reply.strip():
            continue
        if len(reply) > MAX_BODY:
            log.warning(
                "turn %s: webhook reply is %d characters, over the relay's %d; cut to %d",
                key,
                len(reply),
                MAX_BODY,
                MAX_BODY,
            )
            reply = reply.strip()[:MAX_BODY]  # cut the words, not the blanks before them
        kept.append(reply)
    return kept


def _basic_auth(url: str) -> dict[str, str]:
    """The header a URL's user info (`https://user:pw@host/…`) makes, as `requests` made it."""
    user, password = get_auth_from_url(url)
    return urllib3.util.make_headers(basic_auth=f"{user}:{password}") if user or password else {}


def _snippet(resp: urllib3.BaseHTTPResponse) -> str:
    """The start of an error answer, on one line, for the log (`: ...` or nothing)."""
    try:
        head = resp.read(200, decode_content=True) or b""
    except Exception:  # the error's status is what matters; its text is a courtesy
        return ""
    text = " ".join(head.decode("utf-8", errors="replace").split())
    return f": {text}" if text else ""


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and everything it wraps (urllib3 nests them a few deep)."""
    found: list[BaseException] = []
    todo: list[object] = [exc]
    while todo:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or any(item is e for e in found):
            continue
        found.append(item)
        todo += [getattr(item, "reason", None), *item.args, item.__cause__, item.__context__]
    return found
