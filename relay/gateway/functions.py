"""What every edge function under /functions/v1 shares: the request, the answer, the errors.

Functions answer `{"error": "<code>"}` with a status, like the hosted backend's: a `Refusal`
raised by the function, a database error whose SQLSTATE is `PTnnn` (status nnn, the message as
the code), and anything else as 500 `server_error`, logged here and never shown to the caller.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import Response

from relay.gateway.db import Database, run
from relay.gateway.rest_http import JSON_TYPE
from relay.gateway.tokens import VERIFIED
from relay.keys import InvalidToken

log = logging.getLogger("yui.gateway")

_PT = re.compile(r"^PT(\d{3})$")


def bearer(request: HTTPConnection) -> str | None:
    """The token after `Bearer ` in the Authorization header (any case), or None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def token_claims(secret: str, token: str | None) -> dict[str, Any] | None:
    """The claims of a token this relay signed; None without a token. A token that doesn't
    verify raises InvalidToken, and each caller answers that its own way. Verified once per
    token (`tokens.VERIFIED`); what the database says of the caller is asked every time."""
    return VERIFIED.verify(secret, token) if token else None


def request_claims(request: HTTPConnection, secret: str) -> dict[str, Any] | None:
    """The claims of the request's bearer token (see `token_claims`)."""
    return token_claims(secret, bearer(request))


def uuid_or_none(value: Any) -> str | None:
    """A string that spells a UUID, in its canonical form; anything else is None."""
    if not isinstance(value, str):
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def client_ip(request: HTTPConnection) -> str:
    """The caller's address, which the pairing throttle counts: the peer's, unless the peer is
    a proxy the operator named (`yui relay up --trusted-proxy`, none by default). Then it is
    the rightmost X-Forwarded-For hop that is not one of those proxies (hops left of it are
    whatever the client wrote), or the leftmost when all are; a malformed header is the peer's.
    """
    networks = [
        ipaddress.ip_network(net, strict=False)
        for net in request.app.state.settings.trusted_proxies
    ]

    def address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        try:
            parsed = ipaddress.ip_address(text.strip())
        except ValueError:
            return None
        if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped:
            return parsed.ipv4_mapped
        return parsed

    def trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        return any(ip in net for net in networks)

    peer = request.client.host if request.client else "unknown"
    peer_ip = address(peer)
    if peer_ip is None or not trusted(peer_ip):
        return peer
    client = peer
    for hop in reversed(",".join(request.headers.getlist("x-forwarded-for")).split(",")):
        hop_ip = address(hop)
        if hop_ip is None:
            return peer
        client = str(hop_ip)
        if not trusted(hop_ip):
            break
    return client


class Refusal(Exception):
    """A function's deliberate no: the status and the error code the caller sees."""

    def __init__(self, status: int, code: str, **extra: Any) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.extra = extra


@dataclass
class Call:
    """One function call: its JSON body, its bearer token, and where it came from."""

    db: Database
    jwt_secret: str
    body: dict[str, Any]
    bearer: str | None
    client_ip: str
    extra: dict[str, Any] = field(default_factory=dict)

    def claims(self) -> dict[str, Any] | None:
        """The bearer's claims if it is a JWT this relay signed, else None."""
        try:
            return token_claims(self.jwt_secret, self.bearer)
        except InvalidToken:
            return None


Action = Callable[[Call], Awaitable[dict[str, Any]]]


async def dispatch(
    call: Call, actions: dict[str, Action], key: str = "action"
) -> tuple[int, dict[str, Any]]:
    """Run the action the body names and turn what it raises into the functions' answers."""
    action = actions.get(str(call.body.get(key)))
    if action is None:
        return 400, {"error": "unknown_action"}
    try:
        return 200, await action(call)
    except Refusal as refusal:
        return refusal.status, {"error": refusal.code, **refusal.extra}
    except psycopg.Error as exc:
        match = _PT.match(exc.sqlstate or "")
        if match:
            return int(match.group(1)), {"error": exc.diag.message_primary or "refused"}
        if isinstance(exc, psycopg.OperationalError):
            log.warning("database unavailable: %s", exc)
            return 503, {"error": "unavailable"}
        log.exception("function failed in the database")
        return 500, {"error": "server_error"}


async def take(
    conn: psycopg.AsyncConnection, key: str, limit: str, *, commit: bool = False
) -> None:
    """One token from a rate bucket, or 429 `rate_limited` (a refusal takes nothing); with
    `commit`, as the transaction's last statement."""
    cur = conn.cursor()
    await run(conn, cur, "select public.yui_take(%s, %s)", (key, limit), commit=commit)
    row = await cur.fetchone()
    if not (row and row[0]):
        raise Refusal(429, "rate_limited")


def to_json(data: Any) -> bytes:
    return json.dumps(data, default=_default, separators=(",", ":")).encode()


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def iso(value: dt.datetime | None) -> str | None:
    return _default(value) if value is not None else None


def answer(status: int, data: Any) -> Response:
    return Response(to_json(data), status, media_type=JSON_TYPE)


async def serve(
    request: Request,
    db: Database,
    jwt_secret: str,
    actions: dict[str, Action],
    key: str = "action",
    extra: dict[str, Any] | None = None,
) -> Response:
    """One function call: POST only, a JSON object body, then the action it names.

    Any content-type is read as JSON, as the hosted functions do (`req.json()`): a browser's
    cross-origin "simple" POST is refused by its Origin (app.BrowserGuard), not by this."""
    if request.method != "POST":
        return answer(405, {"error": "method_not_allowed"})
    try:
        body = json.loads(await read_body(request) or b"null")
    except BodyTooLarge:
        return answer(413, {"error": "payload_too_large"})
    except ClientDisconnect:
        return answer(400, {"error": "invalid_request"})  # nobody is left to read it
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser takes
        body = None
    if not isinstance(body, dict):
        return answer(400, {"error": "invalid_request"})
    call = Call(
        db=db,
        jwt_secret=jwt_secret,
        body=body,
        bearer=bearer(request),
        client_ip=client_ip(request),
        extra=extra or {},
    )
    return answer(*await dispatch(call, actions, key))


# Bytes in a REST or function body: a message row is at most 32,000 characters and 64 KB of
# meta, so a megabyte is room for a batch of them, and far below what costs the gateway.
MAX_BODY = 1 << 20


class BodyTooLarge(Exception):
    """A request body past its cap; each API answers it 413 in its own error shape."""


async def read_body(request: Request, cap: int = MAX_BODY) -> bytes:
    """The request body, or BodyTooLarge as soon as it passes `cap` bytes: before a byte is
    read when Content-Length says so, else as it arrives, so neither a chunked body nor a lying
    Content-Length grows past the cap in memory. (uvicorn drains the unread rest, so the client
    still reads the 413.)"""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)
