"""What an operator watches: the gateway's Prometheus metrics at `/metrics`, and a log line per
request when the logs are JSON.

Counted: requests by route template (never the raw path: a name or an id in it would make a
series per row) with their status and a latency histogram, rate-limit refusals (every 429),
pairing attempts by outcome, Storage bytes stored, changes fanned out to Realtime sockets; read
when scraped: open sockets and subscriptions, and the database pool's use. `/metrics` answers
only the addresses the operator allows (`--metrics-from`, loopback by default), judged like the
pairing throttle's address, through trusted proxies only.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_METRICS_FROM = ("127.0.0.0/8", "::1/128")
requests_log = logging.getLogger("yui.requests")

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
REQUESTS = Counter(
    "yui_http_requests",
    "HTTP requests and websocket handshakes answered, by route, method and status.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "yui_http_request_duration_seconds",
    "Time to answer an HTTP request, by route (a websocket: its whole life).",
    ["route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
RATE_LIMITED = Counter(
    "yui_rate_limit_refusals", "Requests refused by a rate limit (429), by route.", ["route"],
    registry=REGISTRY,
)  # fmt: skip
PAIRINGS = Counter(
    "yui_pairing_attempts", "Pairing attempts, by outcome (paired or the refusal's code).",
    ["outcome"], registry=REGISTRY,
)  # fmt: skip
STORAGE_BYTES = Counter(
    "yui_storage_stored_bytes", "Bytes of media stored through Storage uploads.",
    registry=REGISTRY,
)  # fmt: skip
FANNED_OUT = Counter(
    "yui_realtime_changes_fanned_out",
    "Row changes handed to subscribed Realtime topics (one per topic that hears it).",
    registry=REGISTRY,
)


class _Live(Collector):
    """What is read when scraped: every gateway app in this process, its sockets,
    subscriptions and pool."""

    def __init__(self) -> None:
        self.sources: weakref.WeakSet[Any] = weakref.WeakSet()

    def collect(self) -> Iterator[Metric]:
        sockets = GaugeMetricFamily("yui_realtime_sockets", "Open Realtime websockets.")
        topics = GaugeMetricFamily(
            "yui_realtime_subscriptions", "Joined Realtime topics, on all open sockets."
        )
        pool = GaugeMetricFamily(
            "yui_db_pool_connections",
            "The database pool: connections open, idle, and requests waiting for one.",
            labels=["state"],
        )
        counts = {"sockets": 0, "topics": 0, "size": 0, "idle": 0, "waiting": 0}
        from relay.gateway.realtime import hub_of

        for source in list(self.sources):
            hub = hub_of(source.db)
            clients = list(hub.clients) if hub is not None else []
            counts["sockets"] += len(clients)
            counts["topics"] += sum(len(client.topics) for client in clients)
            stats = source.db.pool.get_stats()
            counts["size"] += stats.get("pool_size", 0)
            counts["idle"] += stats.get("pool_available", 0)
            counts["waiting"] += stats.get("requests_waiting", 0)
        sockets.add_metric([], counts["sockets"])
        topics.add_metric([], counts["topics"])
        for state, key in (("open", "size"), ("idle", "idle"), ("waiting", "waiting")):
            pool.add_metric([state], counts[key])
        yield from (sockets, topics, pool)


LIVE = _Live()
REGISTRY.register(LIVE)


class Source:
    """One gateway app's database, whose pool and Realtime hub the scrape reads."""

    def __init__(self, db: Any) -> None:
        self.db = db
        LIVE.sources.add(self)


def _networks(allowed: Iterable[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(net, strict=False) for net in allowed]


def allowed(address: str, networks: Iterable[str]) -> bool:
    """Whether `address` lies in one of `networks` (an IPv4-mapped IPv6 address as IPv4)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return any(ip in net for net in _networks(networks))


async def scrape(request: Request) -> Response:
    """`GET /metrics`: the text format, to allowed addresses only (403 to the rest)."""
    from relay.gateway.functions import answer, client_ip

    if not allowed(client_ip(request), request.app.state.settings.metrics_from):
        return answer(403, {"error": "metrics_not_allowed"})
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


def route_of(scope: Scope) -> str:
    """The matched route's template, or `unmatched`: a bounded label."""
    route = scope.get("route")
    return str(getattr(route, "path", None) or "unmatched")


@functools.lru_cache(maxsize=1024)
def _series(route: str, method: str, status: int) -> tuple[Counter, Histogram]:
    """The request counter's and the latency histogram's series for a request: `labels()`
    checks and locks on every call, a cost per request worth keeping once."""
    return REQUESTS.labels(route, method, str(status)), LATENCY.labels(route)


class RequestMetrics:
    """Counts and times every request (and websocket) by route template and status, and logs
    one line for it (shown with `--log-format json`): method, path without its query string,
    status, milliseconds. Never a header, a token or a body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500
        accepted = False

        async def noting(message: Message) -> None:
            nonlocal status, accepted
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                status = message["status"]
            elif message["type"] == "websocket.accept":
                status, accepted = 101, True
            elif message["type"] == "websocket.close" and not accepted:
                status = 403  # closed before it was accepted: the handshake was refused
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            self.note(scope, status, time.perf_counter() - start)

    @staticmethod
    def note(scope: Scope, status: int, seconds: float) -> None:
        route = route_of(scope)
        method = scope.get("method", "WS")
        counted, timed = _series(route, method, status)
        counted.inc()
        timed.observe(seconds)
        if status == 429:
            RATE_LIMITED.labels(route).inc()
        if not requests_log.isEnabledFor(logging.INFO):
            return  # the line's fields cost more than the counting
        client = scope.get("client")
        requests_log.info(
            "%s %s %s",
            method,
            scope.get("path", ""),
            status,
            extra={
                "method": method,
                "path": scope.get("path", ""),
                "route": route,
                "status": status,
                "ms": round(seconds * 1000, 1),
                "client": client[0] if client else None,
            },
        )
