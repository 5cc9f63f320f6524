"""HTTP for the calls a bridge makes every turn (to the relay, to a webhook): a urllib3 pool,
without `requests` on top. `requests` spends ~1.1 ms of CPU on a call (hooks, cookies,
adapters, redirects looked for) where the pool spends ~0.5, and a turn makes about five.

What `requests` takes from the environment is read here once, when a pool is made, and with
its own functions: the proxy for the URL (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, unless
`NO_PROXY` names the host) and the CA bundle (`REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, else
certifi's); never `~/.netrc`, whose entry would replace a relay's token. Nothing is retried or
redirected here: the caller decides what a failure or an answer means.
A pooled connection the server closed while it sat idle is noticed before it is reused
(urllib3 looks), so it costs a new connection, never a failed call.

Each answer is read with the socket in quick-ack mode. A server that writes an answer's head
and body apart (Python's `http.server` does) holds the body until the head is acknowledged,
and on a kept connection Linux delays that acknowledgement: 40 ms more a call, every call.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.utils import DEFAULT_CA_BUNDLE_PATH, select_proxy
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.response import HTTPResponse

QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only; elsewhere calls go as they are

# What `requests` sends on every call, bar its user-agent (each caller names itself).
HEADERS = {**urllib3.util.make_headers(accept_encoding=True), "accept": "*/*"}


@dataclass(frozen=True, slots=True)
class Response:
    """A whole answer, read: what callers look at, named as `requests` names it."""

    status_code: int
    reason: str
    headers: Mapping[str, str]  # any case
    content: bytes
    url: str

    @classmethod
    def read(cls, answer: urllib3.BaseHTTPResponse, url: str) -> Response:
        return cls(answer.status, answer.reason or "", answer.headers, answer.data, url)

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def json(self) -> Any:
        """The body's JSON; `ValueError` when it isn't."""
        return json.loads(self.content)


class QuickAckConnection(HTTPConnection):
    """A connection that acknowledges an answer's first bytes at once (see above)."""

    def getresponse(self) -> HTTPResponse:  # type: ignore[override]  # urllib3 does the same
        _quick_ack(self.sock)
        return super().getresponse()


class QuickAckTLSConnection(HTTPSConnection):
    """The same over TLS."""

    def getresponse(self) -> HTTPResponse:  # type: ignore[override]  # urllib3 does the same
        _quick_ack(self.sock)
        return super().getresponse()


def _quick_ack(sock: Any) -> None:
    if QUICKACK is not None and isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):  # not TCP: nothing to gain
            sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)


class QuickAckPool(urllib3.HTTPConnectionPool):
    ConnectionCls = QuickAckConnection


class QuickAckTLSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = QuickAckTLSConnection


def _quick_acks(manager: urllib3.PoolManager) -> urllib3.PoolManager:
    if QUICKACK is not None:
        manager.pool_classes_by_scheme = {"http": QuickAckPool, "https": QuickAckTLSPool}
    return manager


def pool_for(url: str, maxsize: int) -> urllib3.PoolManager:
    """Connections to `url`, through the proxy the environment names for it, if any; up to
    `maxsize` kept open for reuse (more are opened when more calls run at once, then closed)."""
    with requests.Session() as env:
        found = env.merge_environment_settings(url, {}, None, None, None)
    bundle = found["verify"] if isinstance(found["verify"], str) else DEFAULT_CA_BUNDLE_PATH
    tls: dict[str, Any] = {"cert_reqs": "CERT_REQUIRED"}
    tls["ca_cert_dir" if os.path.isdir(bundle) else "ca_certs"] = bundle
    proxy = select_proxy(url, found["proxies"])
    if proxy:  # as `requests` reaches it: its credentials sent, SOCKS when it says socks://
        manager: urllib3.PoolManager = HTTPAdapter(pool_maxsize=maxsize).proxy_manager_for(
            proxy, **tls
        )
        return manager if "socks" in proxy else _quick_acks(manager)
    return _quick_acks(urllib3.PoolManager(num_pools=1, maxsize=maxsize, block=False, **tls))
