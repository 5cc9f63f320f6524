"""The gateway: the hosted backend's HTTP contract over the local PostgreSQL.

`/rest/v1/...` speaks PostgREST's grammar under the caller's role, and `/functions/v1/<name>`
runs the edge functions. The bearer token alone decides who the caller is; an `apikey` header
is accepted whatever project it names and, on its own, gives the anon role.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relay import metrics
from relay.gateway import (
    account,
    auth,
    connect,
    functions,
    people,
    push,
    realtime,
    rest,
    screens,
    storage,
    webapp,
)
from relay.gateway.db import Database
from relay.gateway.functions import (
    MAX_BODY,
    Action,
    BodyTooLarge,
    read_body,
    request_claims,
    to_json,
)
from relay.gateway.rest_http import JSON_TYPE
from relay.keys import InvalidToken

log = logging.getLogger("yui.gateway")


class _Anything(Convertor[str]):
    """Starlette's `path` stops at a line feed; a REST name may hold one (and be refused)."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anything", _Anything())
REST_METHODS = ["GET", "HEAD", "POST", "PATCH", "DELETE", "PUT", "OPTIONS"]

# Parts of the contract with routes (and a lifespan) of their own.
PARTS = (realtime, storage, push, auth, webapp)

FUNCTIONS: dict[str, tuple[dict[str, Action], str]] = {
    "yui-connect": (connect.ACTIONS, "action"),
    "yui-agents": (people.AGENT_ACTIONS, "action"),
    "yui-auth": (people.AUTH_GRANTS, "grant_type"),
    "yui-screens": (screens.ACTIONS, "action"),
    "yui-web": (webapp.ACTIONS, "action"),
}


@dataclass(frozen=True)
class GatewaySettings:
    """What a gateway process needs: where the database is and the secret tokens are signed
    with. Several gateways with the same settings can serve one database."""

    conninfo: str
    jwt_secret: str
    folder: Path  # the relay's folder: media bytes and push settings live under it
    # Proxies whose X-Forwarded-For is believed (addresses or networks); none by default, so
    # a caller can't pick the address the pairing throttle counts.
    trusted_proxies: tuple[str, ...] = ()
    # Web origins a browser may call the relay from: its own, and any the operator adds.
    origins: tuple[str, ...] = ()
    # Whether /auth/v1 lets anyone sign in anonymously (a person with no credentials).
    anonymous_signin: bool = False
    # Addresses /metrics answers (networks; loopback by default), judged like client_ip.
    metrics_from: tuple[str, ...] = metrics.DEFAULT_METRICS_FROM

    def __repr__(self) -> str:
        return "GatewaySettings(<redacted>)"


def _origin(text: str) -> str | None:
    """An origin in one spelling (lower case, no default port); None if it isn't one
    (`null`, say, which a sandboxed page sends)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 80 if parts.scheme == "http" else 443
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


def _host_name(header: str) -> str | None:
    """The name in a Host header (`name`, `name:port`, `[v6]`, `[v6]:port`), lower case;
    None if it doesn't parse."""
    host = header.strip().lower()
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        port_ok = not rest or (rest.startswith(":") and rest[1:].isdigit())
        return name if bracket and port_ok else None
    if host.count(":") > 1:
        return host  # an IPv6 literal without brackets
    name, colon, port = host.partition(":")
    return name if not colon or port.isdigit() else None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


# CORS: what a page on an allowed origin may send (every header the official clients send:
# supabase-js's own list in `@supabase/supabase-js/cors`, PostgREST's, Storage's and Auth's) and
# read (what the clients read back: the count in Content-Range, Storage's and Auth's headers).
CORS_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
CORS_HEADERS = (
    "authorization", "apikey", "content-type", "x-client-info", "x-retry-count", "traceparent",
    "tracestate", "baggage", "prefer", "range", "accept-profile", "content-profile", "x-upsert",
    "x-metadata", "cache-control", "x-region", "x-supabase-api-version",
)  # fmt: skip
CORS_EXPOSED = (
    "content-range, content-location, location, range-unit, preference-applied, "
    "content-disposition, etag, retry-after, x-relay-error, x-supabase-api-version"
)
CORS_MAX_AGE = "86400"
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _allowed_headers(requested: str) -> str:
    """The clients' headers, and any other header name the preflight asks for (a client's
    `global.headers`): the origin is allowed, so its requests may carry what they need."""
    extra = [h.strip().lower() for h in requested.split(",")]
    names = dict.fromkeys([*CORS_HEADERS, *(h for h in extra if _HEADER_NAME.fullmatch(h))])
    return ", ".join(names)


class BrowserGuard:
    """Refuses, for HTTP and websockets alike, what only a web page can make a browser send:
    a Host the relay doesn't go by (a page on a name that was made to resolve here, "DNS
    rebinding") or an Origin it doesn't allow. The relay goes by any IP literal, `localhost`,
    and the names of its allowed origins; a request without an Origin (the SDKs, curl, the
    bridges) is no browser's and passes. The one place that knows the allowed origins, so it
    also speaks CORS for them: it answers their preflights (204) and marks every answer to
    them readable (Access-Control-Allow-Origin); a foreign origin gets no CORS at all."""

    def __init__(self, app: ASGIApp, origins: Iterable[str]) -> None:
        self.app = app
        self.origins = frozenset(o for o in map(_origin, origins) if o)
        self.names = frozenset({"localhost"} | {urlsplit(o).hostname or "" for o in self.origins})

    def refusal(self, headers: Headers) -> tuple[int, str] | None:
        """The status and error code that refuse these headers, or None."""
        host = headers.get("host")
        if host is not None:
            name = _host_name(host)
            if name is None or not (name in self.names or _is_ip(name)):
                return 421, "unknown_host"
        origin = headers.get("origin")
        if origin is not None and _origin(origin) not in self.origins:
            return 403, "origin_not_allowed"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = Headers(scope=scope)
            refusal = self.refusal(headers)
            if refusal is not None:
                status, code = refusal
                if scope["type"] == "websocket":  # closed before accept: uvicorn answers 403
                    await send({"type": "websocket.close", "code": 1008, "reason": code})
                else:
                    await functions.answer(status, {"error": code})(scope, receive, send)
                return
            origin = headers.get("origin")
            if scope["type"] == "http" and origin is not None:  # an allowed one, by now
                if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                    await _preflight(origin, headers)(scope, receive, send)
                    return
                send = _readable_by(origin, send)
        await self.app(scope, receive, send)


def _preflight(origin: str, headers: Headers) -> Response:
    """A browser asking whether a page on `origin` may make its request: yes, for a day."""
    answer = {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": CORS_METHODS,
        "access-control-allow-headers": _allowed_headers(
            headers.get("access-control-request-headers", "")
        ),
        "access-control-max-age": CORS_MAX_AGE,
        "vary": "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
    }
    if headers.get("access-control-request-private-network") == "true":
        answer["access-control-allow-private-network"] = "true"  # a public page, a local relay
    return Response(status_code=204, headers=answer)


def _readable_by(origin: str, send: Send) -> Send:
    """`send`, marking the answer readable by a page on `origin`, with the headers the clients
    read exposed."""

    async def marked(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers["access-control-allow-origin"] = origin
            headers["access-control-expose-headers"] = CORS_EXPOSED
            headers.append("vary", "Origin")
        await send(message)

    return marked


class Unauthorized(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def identity(request: Request, secret: str) -> tuple[str, dict[str, Any]]:
    """The role and claims a REST request runs with."""
    try:
        claims = request_claims(request, secret)
    except InvalidToken as exc:
        raise Unauthorized("PGRST303" if exc.expired else "PGRST301", exc.reason) from None
    if claims is None:
        return "anon", {"role": "anon"}
    return claims["role"], claims


def _postgrest_error(status: int, code: str, message: str) -> Response:
    body = {"code": code, "message": message, "details": None, "hint": None}
    return Response(json.dumps(body), status_code=status, media_type=JSON_TYPE)


def create_app(settings: GatewaySettings) -> Starlette:
    db = Database(settings.conninfo)

    async def rest_endpoint(request: Request) -> Response:
        try:
            role, claims = identity(request, settings.jwt_secret)
        except Unauthorized as exc:
            return _postgrest_error(401, exc.code, exc.message)
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body = await read_body(request)
        except BodyTooLarge:
            return _postgrest_error(
                413, "PGRST413", f"The request body is larger than {MAX_BODY} bytes"
            )
        except ClientDisconnect:
            return _postgrest_error(400, "PGRST102", "The request body was cut short")
        try:
            async with db.as_role(role, claims) as conn:
                answer = await rest.handle(
                    conn,
                    method=request.method,
                    target=request.path_params["target"],
                    query=list(request.query_params.multi_items()),
                    headers=headers,
                    body=body,
                )
        except rest.ApiError as exc:
            answer = exc.response()
        except psycopg.Error as exc:
            answer = rest.db_error_response(exc, role)
        return Response(answer.body, status_code=answer.status, headers=answer.headers)

    async def function_endpoint(request: Request) -> Response:
        entry = FUNCTIONS.get(request.path_params["name"])
        if entry is None:
            return functions.answer(404, {"error": "not_found"})
        actions, key = entry
        return await functions.serve(request, db, settings.jwt_secret, actions, key)

    async def health(request: Request) -> Response:
        """Up, with PostgreSQL answering; else 503, so a load balancer looks elsewhere."""
        if await db.answers():
            return Response(to_json({"ok": True}), media_type=JSON_TYPE)
        body = {"ok": False, "database": "down"}
        return Response(to_json(body), status_code=503, media_type=JSON_TYPE)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await db.open()
        try:
            async with AsyncExitStack() as parts:
                for part in PARTS:
                    await parts.enter_async_context(part.lifespan(db, settings))
                yield
        finally:
            await db.close()

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics.scrape, methods=["GET"]),
        *account.routes(db, settings),
        # Every method and every name reaches the REST layer, which answers in PostgREST's
        # shape (405 PGRST117 for PUT, 404 for a name with a line feed).
        Route("/rest/v1/{target:anything}", rest_endpoint, methods=REST_METHODS),
    ]
    for part in PARTS:  # before the generic function route, so a part may serve a function
        routes += part.routes(db, settings)
    routes.append(
        Route(
            "/functions/v1/{name}",
            function_endpoint,
            methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        )
    )
    guard = Middleware(BrowserGuard, origins=settings.origins)
    counted = Middleware(metrics.RequestMetrics)
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[counted, guard])
    app.state.metrics = metrics.Source(db)  # the scrape reads its pool and Realtime hub
    app.state.settings = settings  # what a request reads through `request.app.state.settings`
    return app
