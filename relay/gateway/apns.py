"""Where pushes go: to Apple over HTTP/2, or nowhere (the sink), as the relay's push.json says.

`push.json` in the relay folder: `{"mode": "apns", "team_id", "key_id", "topic", "key_file",
"endpoint"?}` sends to Apple (the host for the device's environment, or `endpoint`: a test
server or a proxy). Without the file, or with `{"mode": "sink"}`, nothing leaves the machine:
every push is a success that the caller only records. The file is re-read when it changes.

Apple takes pushes only over HTTP/2, each carrying a provider token: an ES256 JWT made with
the team's P-256 key. Apple refuses a token refreshed more than once every 20 minutes and one
older than an hour, so one is kept for 40 minutes. The key and the token never reach a log, an
error or an answer; device tokens stay out of the logs too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key

HOSTS = {
    "production": "https://api.push.apple.com",
    "sandbox": "https://api.sandbox.push.apple.com",
}
TOKEN_TTL = 40 * 60
TIMEOUT = 10.0
GONE = 410
TOPIC = re.compile(r"^[A-Za-z0-9.-]{3,100}$")  # the app's bundle id

log = logging.getLogger("yui.push")

# httpx logs every request at INFO with its URL, and the URL names the device token.
logging.getLogger("httpx").setLevel(logging.WARNING)


class PushUnavailable(Exception):
    """push.json or its key can't be used; the message says why without showing the key."""


def load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """The P-256 private key in a PEM file (Apple's .p8)."""
    try:
        key = load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise PushUnavailable(f"can't read the key file {path.name}: {exc.strerror}") from None
    except (ValueError, TypeError):
        raise PushUnavailable(f"the key file {path.name} is not an unencrypted PEM key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise PushUnavailable(f"the key file {path.name} is not a P-256 key")
    return key


@dataclass(frozen=True)
class Credentials:
    """Who we are to Apple: the team, the key's id and the key, and the app's bundle id."""

    team_id: str
    key_id: str
    topic: str
    key: ec.EllipticCurvePrivateKey = field(repr=False)


class ProviderToken:
    """The provider JWT, signed once and reused for TOKEN_TTL seconds."""

    def __init__(self, credentials: Credentials, clock: Callable[[], float] = time.time) -> None:
        self._credentials = credentials
        self._clock = clock
        self._token: str | None = None
        self._issued = 0.0

    def __repr__(self) -> str:
        return "ProviderToken(<redacted>)"

    def get(self) -> str:
        now = self._clock()
        if self._token is None or now - self._issued >= TOKEN_TTL:
            creds = self._credentials
            self._token = jwt.encode(
                {"iss": creds.team_id, "iat": int(now)},
                creds.key,
                algorithm="ES256",
                headers={"kid": creds.key_id},
            )
            self._issued = now
        return self._token

    def forget(self) -> None:
        """Drop the cached token (Apple said it expired), so the next push signs a new one."""
        self._token = None


@dataclass(frozen=True)
class Outcome:
    """What Apple answered for one device."""

    ok: bool
    status: int  # the HTTP status; 0 when Apple couldn't be reached
    reason: str | None

    @property
    def gone(self) -> bool:
        """The token is no longer valid for the app: the device row should go."""
        return self.status == GONE or self.reason == "Unregistered"


SUNK = Outcome(True, 200, "sunk")


class ApnsClient:
    """One HTTP/2 connection pool to Apple (or to `endpoint`, a test server or a proxy)."""

    def __init__(
        self,
        credentials: Credentials,
        endpoint: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._credentials = credentials
        self._endpoint = endpoint.rstrip("/") if endpoint else None
        self._token = ProviderToken(credentials)
        # http1=False: Apple speaks HTTP/2 only; over plain http this is prior knowledge.
        self._http = httpx.AsyncClient(
            http1=False, http2=True, timeout=TIMEOUT, transport=transport
        )

    def __repr__(self) -> str:
        return "ApnsClient(<redacted>)"

    def request(
        self, device_token: str, environment: str, payload: dict[str, Any]
    ) -> httpx.Request:
        """The alert request for one device."""
        base = self._endpoint or HOSTS[environment]
        return self._http.build_request(
            "POST",
            f"{base}/3/device/{device_token}",
            content=json.dumps(payload, separators=(",", ":")).encode(),
            headers={
                "authorization": f"bearer {self._token.get()}",
                "apns-topic": self._credentials.topic,
                "apns-push-type": "alert",
                "apns-priority": "10",
                "content-type": "application/json",
            },
        )

    async def send(self, device_token: str, environment: str, payload: dict[str, Any]) -> Outcome:
        try:
            response = await self._http.send(self.request(device_token, environment, payload))
        except httpx.HTTPError as exc:
            # The class name only: an httpx message may name the URL, and so the device token.
            return Outcome(False, 0, type(exc).__name__)
        if response.status_code == 200:
            return Outcome(True, 200, None)
        reason = _reason(response)
        if reason == "ExpiredProviderToken":
            self._token.forget()
        return Outcome(False, response.status_code, reason)

    async def aclose(self) -> None:
        await self._http.aclose()


def _reason(response: httpx.Response) -> str:
    try:
        reason = response.json().get("reason")
    except (ValueError, AttributeError):
        reason = None
    return reason if isinstance(reason, str) and reason else f"HTTP {response.status_code}"


class PushService:
    """One relay folder's push settings and, in apns mode, its one HTTP/2 client to Apple."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._file = folder / "push.json"
        self._lock = asyncio.Lock()
        self._stamp: tuple[int, int] | None = None
        self._loaded = False
        self._apns: ApnsClient | None = None

    async def client(self) -> ApnsClient | None:
        """Apple's client, or None for the sink; PushUnavailable when misconfigured."""
        try:
            stat = self._file.stat()
            stamp: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            stamp = None
        async with self._lock:
            if not self._loaded or stamp != self._stamp:
                await self.aclose()
                try:
                    self._apns = self._load() if stamp else None
                except PushUnavailable as exc:
                    log.warning("no pushes until push.json is fixed: %s", exc)
                    raise
                self._stamp, self._loaded = stamp, True
            return self._apns

    def _load(self) -> ApnsClient | None:
        try:
            config = json.loads(self._file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise PushUnavailable("push.json is not readable JSON") from None
        if not isinstance(config, dict):
            raise PushUnavailable("push.json is not a JSON object")
        mode = config.get("mode", "sink")
        if mode == "sink":
            return None
        if mode != "apns":
            raise PushUnavailable('mode must be "sink" or "apns"')
        for name in ("team_id", "key_id", "topic", "key_file"):
            if not isinstance(config.get(name), str) or not config[name].strip():
                raise PushUnavailable(f"{name} is missing")
        if not TOPIC.match(config["topic"]):
            raise PushUnavailable("topic is not a bundle id")
        endpoint = config.get("endpoint")
        if endpoint is not None and not (
            isinstance(endpoint, str) and endpoint.startswith(("https://", "http://"))
        ):
            raise PushUnavailable("endpoint must be an http(s) URL")
        key = load_key(self._folder / config["key_file"])
        credentials = Credentials(config["team_id"], config["key_id"], config["topic"], key)
        return ApnsClient(credentials, endpoint)

    async def deliver(
        self, devices: Sequence[dict[str, Any]], alert: dict[str, Any]
    ) -> tuple[bool, list[Outcome]]:
        """Send `alert` to each device at once: (whether it went to the sink, an outcome each)."""
        apns = await self.client()
        if apns is None:
            return True, [SUNK for _ in devices]
        outcomes = await asyncio.gather(
            *(apns.send(d["apns_token"], d["environment"], alert) for d in devices)
        )
        return False, list(outcomes)

    async def aclose(self) -> None:
        """Close Apple's client; the next push reads push.json again."""
        self._loaded = False
        if self._apns is not None:
            apns, self._apns = self._apns, None
            await apns.aclose()
