"""HTTP to one relay, the hosted backend or the local one alike: REST under `/rest/v1`, edge
functions under `/functions/v1`. It knows nothing of the local relay's code, only its contract.

Every failure becomes one of the toolkit's errors: can't connect, a timeout or a 5xx is
`Unreachable` (try again); a refusal is `Refused`, or `Suspended` when the kill switch is on.
Tokens travel in headers only and never appear in an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import requests

from state.errors import BadInput, Refused, Suspended, Unreachable
from state.local_relay import local_keys_for
from state.paths import relay_url

USER_AGENT = "yui-bridges/0.1"


BACKOFF_MAX = 60.0  # seconds: the longest wait between tries of anything


def next_backoff(previous: float, first: float = 1.0) -> float:
    """The next wait of a doubling backoff that starts at `first` and stops at a minute."""
    return min(max(previous * 2, first), BACKOFF_MAX)


def retryable(status: int) -> bool:
    """An HTTP status that means "not now" (busy, rate-limited, unwell), not "never"."""
    return status in (408, 425, 429) or status >= 500


TIMEOUT = 20.0
SUSPENDED_CODES = ("suspended", "account_suspended")

Params = Mapping[str, str] | Sequence[tuple[str, str]]


class RelayClient:
    """One relay's address and public key, and a pooled HTTP session to it."""

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
        self.http = requests.Session()
        self.http.headers["user-agent"] = user_agent

    def __repr__(self) -> str:
        return f"RelayClient({self.url!r})"

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        params: Params | None = None,
        body: Any = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> requests.Response:
        """One HTTP request with a JSON `body`, or raw `data` (bytes or a file: an upload, its
        content-type in `headers`); raises `Unreachable` when the relay can't be reached."""
        sent = {"content-type": "application/json"}
        if self.apikey:
            sent["apikey"] = self.apikey
        if token:
            sent["authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        if body is not None:
            data = json.dumps(body, separators=(",", ":"))
        try:
            return self.http.request(
                method,
                self.url + path,
                params=params,
                data=data,
                headers=sent,
                timeout=timeout or self.timeout,
            )
        except requests.Timeout:
            raise Unreachable(f"the relay at {self.url} did not answer in time") from None
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise Unreachable(
                f"can't reach the relay at {self.url} ({reason})",
                hint="is it running? `yui relay status` for the local one",
            ) from None

    def rest(
        self,
        method: str,
        table: str,
        *,
        token: str,
        params: Params | None = None,
        body: Any = None,
        prefer: str | None = None,
    ) -> requests.Response:
        """A PostgREST call; the caller reads the status (409 means something to a bridge)."""
        headers = {"prefer": prefer} if prefer else None
        return self.request(
            method, f"/rest/v1/{table}", token=token, params=params, body=body, headers=headers
        )

    def rows(self, table: str, *, token: str, params: Params) -> list[dict[str, Any]]:
        """GET rows, or raise what the status means."""
        response = self.rest("GET", table, token=token, params=params)
        raise_for_status(response, f"reading {table}")
        return response.json()

    def call(
        self,
        function: str,
        body: dict[str, Any],
        *,
        token: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """An edge function's JSON answer, or raise what its status means."""
        response = self.request(
            "POST", f"/functions/v1/{function}", token=token, body=body, timeout=timeout
        )
        what = f"{function} {body.get('action') or body.get('grant_type') or ''}".strip()
        raise_for_status(response, what)
        try:
            answer = response.json()
        except ValueError:
            raise Unreachable(f"{what}: the relay sent something that isn't JSON") from None
        if not isinstance(answer, dict):
            raise Unreachable(f"{what}: the relay sent an unexpected answer")
        return answer


def error_code(response: requests.Response) -> str:
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


def raise_for_status(response: requests.Response, what: str) -> None:
    """Turn a non-2xx answer into the toolkit's error for it."""
    status = response.status_code
    if status < 300:
        return
    code = error_code(response)
    message = f"{what}: {status} {code}"
    if status in (401, 403) and code in SUSPENDED_CODES:
        raise Suspended(
            f"suspended by the relay's kill switch ({message})",
            status=status,
            code=code,
            hint="nothing was deleted: it works again once the relay's operator restores it",
        )
    if status in (401, 403):
        raise Refused(message, status=status, code=code)
    if retryable(status):
        raise Unreachable(message, hint="the relay is busy or unwell; try again shortly")
    if status == 400:
        raise BadInput(message)
    raise Refused(message, status=status, code=code)


def client_for(url: str | None = None) -> RelayClient:
    """A client for `--url`/`$YUI_URL`/the default, with the key the relay expects: the local
    relay's own anon key when it is the local one, else `$YUI_ANON_KEY`."""
    resolved = relay_url(url)
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
