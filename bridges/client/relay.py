"""HTTP to one relay, the hosted backend or the local one alike: the one owner of its wire
contract. REST under `/rest/v1`, edge functions under `/functions/v1`, Storage under
`/storage/v1` (its signed links too) and the Realtime socket's URL are spelled here and nowhere
else. It knows nothing of the local relay's code, only its contract.

Statuses are read in one place (`outcome`): 2xx done; 409 an earlier try landed (a row's id is
made before its first send, so a resend collides rather than doubles); 408, 425, 429 and 5xx
"not now"; 401 and 403 this token refused; any other 4xx a request the relay won't take. Every
failure becomes one of the toolkit's errors: can't connect, a timeout or "not now" is
`Unreachable` (try again, after its `Retry-After` when the relay gave one); a refusal is
`Refused`, or `Suspended` when the kill switch is on.

A caller that can renew its token (a host's session) passes itself as `auth`: a 401 then gets
one fresh token and one retry, for REST and Storage alike. A plain token string is sent as it
is. Tokens travel in headers only and never appear in an error.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit, urlunsplit

from requests.utils import super_len
from urllib3.exceptions import HTTPError, NewConnectionError, ProxyError, SSLError
from urllib3.exceptions import TimeoutError as TimedOut

from bridges.client.http import HEADERS, Response, pool_for
from bridges.retry import retry_after
from state.errors import BadInput, BadUsage, Refused, Suspended, Unreachable
from state.local_relay import local_keys_for
from state.paths import relay_url

USER_AGENT = "yui-bridges/0.1"
TIMEOUT = 20.0
CONNECTIONS = 32  # kept open to the relay: its writer, pushers, heartbeat and turns share them
SUSPENDED_CODES = ("suspended", "account_suspended")
CONNECT = "yui-connect"  # the connector's endpoints: a 401 there is a removed host or bad token
URL_SHAPE = "a relay URL looks like http://127.0.0.1:54321 or https://<project>.supabase.co"

REST = "/rest/v1"
FUNCTIONS = "/functions/v1"
STORAGE = "/storage/v1"
SIGNED = f"{STORAGE}/object/sign/"  # in every link Storage signs, whichever relay
REALTIME = "/realtime/v1/websocket"
REALTIME_VSN = "1.0.0"  # the Phoenix serializer hosts speak

Params = Mapping[str, str] | Sequence[tuple[str, str]]


class Renewable(Protocol):
    """A caller whose token can be renewed: a 401 gets one fresh token and one retry."""

    def bearer(self) -> str:
        """The token to send now."""
        ...

    def renew(self) -> None:
        """Get a fresh token (after a 401)."""
        ...


Auth = str | Renewable | None


class Outcome(enum.Enum):
    """What a relay's status means to a client."""

    DONE = "done"  # 2xx
    LANDED = "landed"  # 409: the id is there already, an earlier try landed
    LATER = "later"  # 408, 425, 429, 5xx: busy or unwell, not "never"
    REFUSED = "refused"  # 401, 403: this token is refused
    REJECTED = "rejected"  # any other 4xx: a request the relay won't take


def outcome(status: int) -> Outcome:
    if status < 300:
        return Outcome.DONE
    if status in (408, 425, 429) or status >= 500:
        return Outcome.LATER
    if status == 409:
        return Outcome.LANDED
    if status in (401, 403):
        return Outcome.REFUSED
    return Outcome.REJECTED


def retryable(status: int) -> bool:
    """An HTTP status that means "not now" (busy, rate-limited, unwell), not "never"."""
    return outcome(status) is Outcome.LATER


def realtime_url(relay: str, apikey: str | None) -> str:
    """`http(s)://host` → `ws(s)://host/realtime/v1/websocket?apikey=…&vsn=1.0.0`."""
    parts = urlsplit(relay)
    scheme = "wss" if parts.scheme == "https" else "ws"
    query = urlencode({**({"apikey": apikey} if apikey else {}), "vsn": REALTIME_VSN})
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + REALTIME, query, ""))


class RelayClient:
    """One relay's address and public key, and a pool of connections to it (threads share
    it)."""

    def __init__(
        self,
        url: str,
        apikey: str | None = None,
        *,
        timeout: float = TIMEOUT,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.url = url.rstrip("/")
        self.apikey = apikey
        self.timeout = timeout
        # The environment (proxy variables, a CA bundle) is read once, for this one relay;
        # netrc never, where an entry would replace the token.
        self.pool = pool_for(self.url, CONNECTIONS)
        self.headers = {**HEADERS, "user-agent": user_agent, "content-type": "application/json"}

    def __repr__(self) -> str:
        return f"RelayClient({self.url!r})"

    @property
    def realtime_url(self) -> str:
        return realtime_url(self.url, self.apikey)

    def storage_link(self, signed: str) -> str:
        """The full URL of a path Storage signed (`/object/sign/…?token=…`)."""
        return f"{self.url}{STORAGE}{signed}"

    def request(
        self,
        method: str,
        path: str,
        *,
        auth: Auth = None,
        params: Params | None = None,
        body: Any = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """One HTTP request with a JSON `body`, or raw `data` (bytes or a file: an upload, its
        content-type in `headers`); with a `Renewable` auth, a 401 is renewed and tried once
        more (a file is rewound for it). Raises `Unreachable` when the relay can't be reached."""
        response = self._send(method, path, auth, params, body, data, headers, timeout)
        if response.status_code == 401 and auth is not None and not isinstance(auth, str):
            auth.renew()
            if hasattr(data, "seek"):
                data.seek(0)
            response = self._send(method, path, auth, params, body, data, headers, timeout)
        return response

    def _send(
        self,
        method: str,
        path: str,
        auth: Auth,
        params: Params | None,
        body: Any,
        data: Any,
        headers: Mapping[str, str] | None,
        timeout: float | None,
    ) -> Response:
        sent = dict(self.headers)
        if self.apikey:
            sent["apikey"] = self.apikey
        token = auth if isinstance(auth, str) or auth is None else auth.bearer()
        if token:
            sent["authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
        elif hasattr(data, "read"):  # a file goes whole, with its length, not chunked
            sent["content-length"] = str(super_len(data))
        url = self.url + path + (f"?{urlencode(params, doseq=True)}" if params else "")
        try:
            answer = self.pool.urlopen(
                method,
                url,
                body=data,
                headers=sent,
                timeout=timeout or self.timeout,
                retries=False,
                redirect=False,  # the relay never redirects; a POST redirected would be lost
            )
        except HTTPError as exc:
            raise self._unreachable(exc) from None
        return Response.read(answer, url)

    def _unreachable(self, exc: HTTPError) -> Unreachable:
        """The failure in the words `requests` gave it, which messages have always shown."""
        if isinstance(exc, TimedOut) and not isinstance(exc, NewConnectionError):
            return Unreachable(f"the relay at {self.url} did not answer in time")
        reason = type(exc).__name__ if isinstance(exc, SSLError | ProxyError) else "ConnectionError"
        return Unreachable(
            f"can't reach the relay at {self.url} ({reason})",
            hint="is it running? `yui relay status` for the local one",
        )

    def rest(
        self,
        method: str,
        table: str,
        *,
        auth: Auth,
        params: Params | None = None,
        body: Any = None,
        prefer: str | None = None,
    ) -> Response:
        """A PostgREST call (`table` may be `rpc/<fn>`); the caller reads the status, since a
        409 means something to a writer."""
        headers = {"prefer": prefer} if prefer else None
        return self.request(
            method, f"{REST}/{table}", auth=auth, params=params, body=body, headers=headers
        )

    def rows(self, table: str, *, auth: Auth, params: Params) -> list[dict[str, Any]]:
        """GET rows, or raise what the status means."""
        response = self.rest("GET", table, auth=auth, params=params)
        raise_for_status(response, f"reading {table}")
        return response.json()

    def function(
        self,
        name: str,
        body: dict[str, Any],
        *,
        auth: Auth = None,
        timeout: float | None = None,
    ) -> Response:
        """An edge function's answer, its status unread."""
        return self.request("POST", f"{FUNCTIONS}/{name}", auth=auth, body=body, timeout=timeout)

    def call(
        self,
        name: str,
        body: dict[str, Any],
        *,
        auth: Auth = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """An edge function's JSON answer, or raise what its status means."""
        response = self.function(name, body, auth=auth, timeout=timeout)
        what = f"{name} {body.get('action') or body.get('grant_type') or ''}".strip()
        raise_for_status(response, what)
        try:
            answer = response.json()
        except ValueError:
            raise Unreachable(f"{what}: the relay sent something that isn't JSON") from None
        if not isinstance(answer, dict):
            raise Unreachable(f"{what}: the relay sent an unexpected answer")
        return answer

    def storage(
        self,
        method: str,
        path: str,
        *,
        auth: Auth,
        body: Any = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """A Storage object call (`path` under `/storage/v1/object`), its status unread."""
        return self.request(
            method,
            f"{STORAGE}/object{path}",
            auth=auth,
            body=body,
            data=data,
            headers=headers,
            timeout=timeout,
        )


def error_code(response: Response) -> str:
    """The relay's error code: a function's `error`, or PostgREST's `message`/`code`."""
    try:
        body = response.json()
    except ValueError:
        return response.reason or str(response.status_code)
    if isinstance(body, dict):
        for key in ("error", "message", "code"):
            if isinstance(body.get(key), str):
                return body[key]
    return str(response.status_code)


def raise_for_status(response: Response, what: str) -> None:
    """Turn a non-2xx answer into the toolkit's error for it."""
    status = response.status_code
    found = outcome(status)
    if found is Outcome.DONE:
        return
    code = error_code(response)
    message = f"{what}: {status} {code}"
    if found is Outcome.REFUSED and code in SUSPENDED_CODES:
        raise Suspended(
            f"suspended by the relay's kill switch ({message})",
            status=status,
            code=code,
            hint="nothing was deleted: it works again once the relay's operator restores it",
        )
    if found is Outcome.LATER:
        raise Unreachable(
            message,
            hint="the relay is busy or unwell; try again shortly",
            after=retry_after(response.headers.get("retry-after")),
        )
    if status == 400:
        raise BadInput(message)
    if status == 401 and urlsplit(response.url or "").path.endswith(f"{FUNCTIONS}/{CONNECT}"):
        raise Refused(
            f"the relay refused this host's token: the host was removed in the app, or its "
            f"token is wrong ({message})",
            status=status,
            code=code,
            hint="pair again: make a code in the app (add an agent), then `yui pair CODE`",
        )
    raise Refused(message, status=status, code=code)


def is_http_url(url: str) -> bool:
    """Whether `url` is one a client can reach: http or https, a host, a numeric port."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that isn't a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def checked_url(url: str, source: str = "") -> str:
    """`url` when a client can reach it, else a usage error naming `source` (`--url`,
    `$YUI_URL`): "unreachable" would be exit 75, and a script that retries on 75 would loop
    forever on a typo."""
    if not is_http_url(url):
        named = f"{source} " if source else ""
        raise BadUsage(f"{named}{url!r} is not a relay URL: {URL_SHAPE}")
    return url


def client_for(url: str | None = None) -> RelayClient:
    """A client for `--url`/`$YUI_URL`/the default, with the key the relay expects: the local
    relay's own anon key when it is the local one, else `$YUI_ANON_KEY`. A malformed URL is
    a usage error (exit 2), not an unreachable relay."""
    from_env = url is None and bool(os.environ.get("YUI_URL"))
    resolved = checked_url(relay_url(url), "$YUI_URL" if from_env else "")
    local = local_keys_for(resolved)
    apikey = local.anon_key if local else os.environ.get("YUI_ANON_KEY")
    return RelayClient(resolved, apikey)


def service_key_for(url: str) -> str:
    """The service key operator commands need: the local relay's, else `$YUI_SERVICE_KEY`."""
    local = local_keys_for(url)
    key = local.service_key if local else os.environ.get("YUI_SERVICE_KEY")
    if not key:
        raise Refused(
            f"{url} is not the local relay, and YUI_SERVICE_KEY is not set",
            hint="operator commands need the relay's service key",
        )
    return key
