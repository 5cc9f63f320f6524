"""CORS (issue 15): a page on one of the relay's own origins, or on one the operator added with
`--cors-origin` (another name for `--allow-origin`: one allow-list for CORS and issue 14's Origin
check), may call every endpoint from a browser: preflights are answered and every answer is
readable. A page anywhere else gets no CORS, and its requests are still refused outright.

The relay here is this module's own, started with `--cors-origin`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from websockets.sync.client import connect
from websockets.typing import Origin

from tests.helpers.cli import yui
from tests.helpers.relay import LocalRelay, running_relay
from tests.helpers.sdk import run_js

ADDED = "https://app.example.com"
FOREIGN = ["https://evil.example", "null", "https://app.example.com:8443", "http://app.example.com"]
# What the official clients send (supabase-js's `cors` list, PostgREST's, Storage's, Auth's).
SDK_HEADERS = {"authorization", "apikey", "content-type", "x-client-info", "x-retry-count"}
SDK_HEADERS |= {"prefer", "range", "accept-profile", "content-profile", "x-upsert"}
SDK_HEADERS |= {"cache-control", "x-region", "traceparent", "x-supabase-api-version"}
ENDPOINTS = [
    "/rest/v1/yui_messages",
    "/rest/v1/rpc/yui_uid",
    "/functions/v1/yui-agents",
    "/storage/v1/object/yui-media/someone/a.png",
    "/auth/v1/token?grant_type=password",
    "/realtime/v1/websocket",
    "/health",
]

# `cors_relay` is not one of conftest's INTEGRATION_FIXTURES, so the tests that use it say so.
integration = pytest.mark.integration


@pytest.fixture(scope="module")
def cors_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRelay]:
    with running_relay(tmp_path_factory.mktemp("cors-relay"), "--cors-origin", ADDED) as relay:
        yield relay


def own(relay: LocalRelay) -> str:
    return f"http://127.0.0.1:{relay.port}"


def listed(value: str | None) -> set[str]:
    return {item.strip().lower() for item in (value or "").split(",") if item.strip()}


def preflight(relay: LocalRelay, path: str, origin: str, **extra: str) -> requests.Response:
    headers = {
        "origin": origin,
        "access-control-request-method": "PATCH",
        "access-control-request-headers": "authorization,apikey,content-type,prefer,x-my-app",
        **extra,
    }
    return requests.options(relay.url + path, headers=headers, timeout=10)


@integration
def test_cors_origin_is_the_allow_list_of_allow_origin(cors_relay: LocalRelay) -> None:
    config = json.loads((Path(cors_relay.home) / "relay" / "relay.json").read_text())
    assert config["allowed_origins"] == [ADDED]
    # The same origin passes issue 14's check on a websocket too: one list, not two.
    url = f"ws://127.0.0.1:{cors_relay.port}/realtime/v1/websocket?apikey={cors_relay.anon_key}"
    with connect(url + "&vsn=1.0.0", origin=Origin(ADDED), open_timeout=10) as ws:
        ws.send(json.dumps({"topic": "phoenix", "event": "heartbeat", "payload": {}, "ref": "1"}))
        assert json.loads(ws.recv(timeout=10))["ref"] == "1"


def test_a_bad_cors_origin_is_refused_and_help_names_both(tmp_path: Path) -> None:
    bad = yui("relay", "up", "--cors-origin", "ftp://x/y", home=tmp_path, check=False)
    assert bad.returncode == 2 and "give an origin" in bad.stderr
    shown = yui("relay", "up", "--help", home=tmp_path).stdout
    assert "--allow-origin, --cors-origin ORIGIN" in shown and "another" in shown


@integration
@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("whose", ["own", "added"])
def test_a_preflight_from_an_allowed_origin_is_answered(
    cors_relay: LocalRelay, path: str, whose: str
) -> None:
    origin = own(cors_relay) if whose == "own" else ADDED
    answer = preflight(cors_relay, path, origin)
    assert answer.status_code == 204 and answer.content == b""
    assert answer.headers["access-control-allow-origin"] == origin
    assert {"get", "head", "post", "patch", "delete", "put"} <= listed(
        answer.headers["access-control-allow-methods"]
    )
    allowed = listed(answer.headers["access-control-allow-headers"])
    assert SDK_HEADERS | {"x-my-app"} <= allowed  # a client's own header, asked for, allowed
    assert int(answer.headers["access-control-max-age"]) >= 600
    assert "origin" in listed(answer.headers["vary"])


@integration
def test_a_header_name_that_is_no_token_is_not_echoed(cors_relay: LocalRelay) -> None:
    answer = preflight(
        cors_relay, ENDPOINTS[0], ADDED, **{"access-control-request-headers": "x-ok, a b, x;y"}
    )
    allowed = listed(answer.headers["access-control-allow-headers"])
    assert "x-ok" in allowed and not {"a b", "x;y"} & allowed


@integration
def test_a_private_network_preflight_is_allowed_for_an_allowed_origin(
    cors_relay: LocalRelay,
) -> None:
    asked = {"access-control-request-private-network": "true"}
    answer = preflight(cors_relay, ENDPOINTS[0], ADDED, **asked)
    assert answer.headers["access-control-allow-private-network"] == "true"
    assert (
        "access-control-allow-private-network"
        not in preflight(cors_relay, ENDPOINTS[0], ADDED).headers
    )


@integration
@pytest.mark.parametrize("origin", FOREIGN)
def test_a_foreign_origin_gets_no_cors_and_is_refused(cors_relay: LocalRelay, origin: str) -> None:
    for answer in (
        preflight(cors_relay, ENDPOINTS[0], origin),
        requests.get(cors_relay.url + "/health", headers={"origin": origin}, timeout=10),
    ):
        assert answer.status_code == 403 and answer.json() == {"error": "origin_not_allowed"}
        assert not [name for name in answer.headers if name.lower().startswith("access-control")]


@integration
def test_every_answer_to_an_allowed_origin_is_readable(cors_relay: LocalRelay) -> None:
    person = cors_relay.person("Browser")
    person.add_agent("Coach")
    sent = {"origin": ADDED, "apikey": cors_relay.anon_key}
    signed = {**sent, "authorization": f"Bearer {person.token}", "prefer": "count=exact"}
    answers = {
        "rest": requests.get(cors_relay.url + "/rest/v1/yui_agents", headers=signed, timeout=10),
        "refused": requests.get(
            cors_relay.url + "/rest/v1/yui_agents",
            headers={**sent, "authorization": "Bearer forged"},
            timeout=10,
        ),
        "function": requests.post(
            cors_relay.url + "/functions/v1/yui-agents",
            json={"action": "list"},
            headers=signed,
            timeout=10,
        ),
        "storage": requests.get(cors_relay.url + "/storage/v1/bucket", headers=signed, timeout=10),
        "plain options": requests.options(
            cors_relay.url + "/rest/v1/yui_agents", headers=signed, timeout=10
        ),
    }
    assert (
        answers["rest"].status_code == 200 and answers["rest"].headers["content-range"] == "0-0/1"
    )
    assert answers["refused"].status_code == 401
    assert answers["function"].status_code == 200
    # An OPTIONS that is no preflight (no Access-Control-Request-Method) reaches the API.
    assert answers["plain options"].json()["code"] == "PGRST117"
    for name, answer in answers.items():
        assert answer.headers.get("access-control-allow-origin") == ADDED, name
        exposed = listed(answer.headers.get("access-control-expose-headers"))
        assert {"content-range", "content-location", "x-relay-error"} <= exposed, name
        assert "origin" in listed(answer.headers.get("vary")), name


SDK_FROM_A_PAGE = """
import { createClient } from '@supabase/supabase-js'
const seen = []
const db = createClient(process.env.URL, process.env.ANON, {
  global: {
    headers: { Origin: process.env.ORIGIN, Authorization: `Bearer ${process.env.TOKEN}` },
    fetch: async (...args) => {
      const answer = await fetch(...args)
      seen.push(answer.headers.get('access-control-allow-origin'))
      return answer
    },
  },
  auth: { persistSession: false, autoRefreshToken: false },
})
const { data, error, count, status } = await db.from('yui_agents')
  .select('name', { count: 'exact' })
const fn = await db.functions.invoke('yui-agents', { body: { action: 'list' } })
console.log(JSON.stringify({
  data, status, count, code: error?.code ?? null, seen,
  fn: fn.error ? fn.error.context.status : fn.data.agents.length,
}))
"""


@integration
@pytest.mark.parametrize("whose", ["added", "foreign"])
def test_supabase_js_sending_an_origin(cors_relay: LocalRelay, whose: str) -> None:
    """Node's fetch sends an Origin it is given (a browser's would be the page's own): from an
    allowed one every answer is marked readable, from a foreign one the client gets a 403."""
    person = cors_relay.person("Page")
    person.add_agent("Coach")
    origin = ADDED if whose == "added" else "https://evil.example"
    values = {"URL": cors_relay.url, "ANON": cors_relay.anon_key, "TOKEN": person.token}
    got = run_js(SDK_FROM_A_PAGE, env={**values, "ORIGIN": origin})
    if whose == "added":
        assert got == {
            "data": [{"name": "Coach"}], "status": 200, "count": 1, "code": None,
            "seen": [ADDED, ADDED], "fn": 1,
        }  # fmt: skip
    else:
        assert (got["status"], got["data"], got["seen"], got["fn"]) == (
            403,
            None,
            [None, None],
            403,
        )
