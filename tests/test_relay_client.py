"""The relay client's contract on its own (`bridges/client/`), against a loopback fake that
answers what each test scripts: one place reads statuses, one "401 → renew → retry once" rule
serves REST and Storage alike, and the relay's Retry-After reaches whoever retries. Its HTTP
(a urllib3 pool, not `requests`) keeps what `requests` did: the same URLs, the environment's
proxy, a failure's words, and kept-alive connections that survive a relay hanging up."""

from __future__ import annotations

import io
import socket
import ssl
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests

from bridges.client.relay import Outcome, RelayClient, outcome, raise_for_status, realtime_url
from bridges.client.storage import Bucket
from state.errors import BadInput, MediaRefused, Refused, Suspended, Unreachable
from tests.helpers.http import LoopbackServer
from tests.helpers.keepalive import KeepAliveServer
from tests.helpers.tls import certificate

Answer = tuple[int, dict[str, str], bytes]


class Scripted:
    """A relay that answers each request with the next scripted answer, recording what came."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.seen: list[tuple[str, str, str, bytes]] = []  # method, path, bearer, body
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                bearer = self.headers.get("authorization", "")
                fake.seen.append((self.command, self.path, bearer, body))
                status, headers, data = fake.answers.pop(0)
                self.send_response(status)
                for name, value in {"content-length": str(len(data)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = LoopbackServer(Handler)
        self.client = RelayClient(self.server.url, "anon-key")


class Session:
    """A caller whose token can be renewed, as a host's session is."""

    def __init__(self) -> None:
        self.token = "old"
        self.renewed = 0

    def bearer(self) -> str:
        return self.token

    def renew(self) -> None:
        self.renewed += 1
        self.token = f"fresh-{self.renewed}"


JSON = {"content-type": "application/json"}


@pytest.fixture
def fake() -> Iterator[Scripted]:
    fake = Scripted()
    yield fake
    fake.server.close()


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, Outcome.DONE),
        (201, Outcome.DONE),
        (204, Outcome.DONE),
        (409, Outcome.LANDED),
        (408, Outcome.LATER),
        (425, Outcome.LATER),
        (429, Outcome.LATER),
        (500, Outcome.LATER),
        (503, Outcome.LATER),
        (401, Outcome.REFUSED),
        (403, Outcome.REFUSED),
        (400, Outcome.REJECTED),
        (404, Outcome.REJECTED),
        (413, Outcome.REJECTED),
    ],
)
def test_every_status_is_read_in_one_place(status: int, expected: Outcome) -> None:
    assert outcome(status) is expected


def test_a_401_renews_the_session_and_tries_once_more(fake: Scripted) -> None:
    fake.answers += [(401, JSON, b'{"message":"JWT expired"}'), (200, JSON, b"[]")]
    session = Session()
    response = fake.client.rest("GET", "yui_messages", auth=session, params={"select": "id"})
    assert response.status_code == 200 and session.renewed == 1
    assert [bearer for _, _, bearer, _ in fake.seen] == ["Bearer old", "Bearer fresh-1"]


def test_a_second_401_is_the_callers_to_read(fake: Scripted) -> None:
    fake.answers += [(401, JSON, b"{}"), (401, JSON, b'{"message":"no"}')]
    session = Session()
    response = fake.client.rest("GET", "yui_messages", auth=session)
    assert response.status_code == 401 and session.renewed == 1 and len(fake.seen) == 2


def test_a_plain_token_is_sent_as_it_is_and_never_renewed(fake: Scripted) -> None:
    fake.answers += [(401, JSON, b'{"message":"JWT expired"}')]
    response = fake.client.rest("GET", "yui_messages", auth="person-token")
    assert response.status_code == 401 and len(fake.seen) == 1
    assert fake.seen[0][2] == "Bearer person-token"


def test_storage_renews_too_and_sends_the_whole_file_again(fake: Scripted) -> None:
    fake.answers += [(401, JSON, b"{}"), (200, JSON, b'{"Key":"yui-media/u/a/agent/x.png"}')]
    session, sent = Session(), list[int]()
    bucket = Bucket(fake.client, session)
    assert bucket.upload("u/a/agent/x.png", b"\x89PNG bytes", "image/png", sent.append) is True
    assert [(m, p, body) for m, p, _, body in fake.seen] == [
        ("POST", "/storage/v1/object/yui-media/u/a/agent/x.png", b"\x89PNG bytes"),
        ("POST", "/storage/v1/object/yui-media/u/a/agent/x.png", b"\x89PNG bytes"),
    ]
    assert session.renewed == 1 and sent[-1] == len(b"\x89PNG bytes")


def test_the_bucket_reads_storages_answers(fake: Scripted) -> None:
    fake.answers += [
        (409, JSON, b'{"message":"exists"}'),
        (200, JSON, b'{"signedURL":"/object/sign/yui-media/p?token=t"}'),
        (404, JSON, b'{"message":"Object not found"}'),
        (404, JSON, b"{}"),
        (413, JSON, b'{"message":"Payload too large"}'),
        (503, JSON, b"{}"),
    ]
    bucket = Bucket(fake.client, "token")
    assert bucket.upload("p", b"x", "image/png") is False  # there already: an earlier try
    link = bucket.sign("p", 60)
    assert link == f"{fake.server.url}/storage/v1/object/sign/yui-media/p?token=t"
    assert bucket.sign("gone", 60) is None
    assert bucket.download("gone") is None
    with pytest.raises(MediaRefused) as refused:
        bucket.upload("big", b"x", "image/png", name="big.png")
    assert refused.value.status == 413 and "uploading big.png" in refused.value.message
    with pytest.raises(Unreachable):
        bucket.upload("later", b"x", "image/png")


def test_a_refusal_becomes_the_toolkits_error(fake: Scripted) -> None:
    fake.answers += [
        (429, {**JSON, "retry-after": "7"}, b'{"message":"slow down"}'),
        (403, JSON, b'{"error":"suspended"}'),
        (401, JSON, b'{"message":"bad token"}'),
        (400, JSON, b'{"message":"bad filter"}'),
    ]
    errors = []
    for _ in range(4):
        with pytest.raises((Unreachable, Refused, BadInput)) as caught:
            raise_for_status(fake.client.rest("GET", "t", auth="k"), "reading t")
        errors.append(caught.value)
    late, suspended, refused, bad = errors
    assert isinstance(late, Unreachable) and late.after == 7.0
    assert isinstance(suspended, Suspended) and suspended.status == 403
    assert type(refused) is Refused and refused.code == "bad token"
    assert isinstance(bad, BadInput) and "400 bad filter" in bad.message


def test_an_unreachable_relay_says_so_without_a_token(fake: Scripted) -> None:
    fake.server.close()
    with pytest.raises(Unreachable) as caught:
        fake.client.call("yui-connect", {"action": "guide"}, auth="secret-token")
    assert caught.value.message == f"can't reach the relay at {fake.server.url} (ConnectionError)"
    assert "secret-token" not in caught.value.message + (caught.value.hint or "")


def test_a_relay_that_never_answers_times_out() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connects, never answers
        client = RelayClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.2)
        with pytest.raises(Unreachable, match="did not answer in time"):
            client.rest("GET", "yui_messages", auth="k")


@pytest.mark.parametrize(
    "params",
    [
        {"select": "id,body", "order": "created_at.desc", "limit": "50"},
        [
            ("id", "in.(a1,b2)"),
            ("delivered_at", "is.null"),
            ("created_at", "gt.2026-12-02T10:00:00+00:00"),
        ],
        [("or", "(body.ilike.*café*,kind.eq.text)"), ("body", "eq.a b&c=d/é~!'\"")],
        {},
    ],
)
def test_params_make_the_url_requests_made(fake: Scripted, params: dict[str, str]) -> None:
    fake.answers += [(200, JSON, b"[]")]
    fake.client.rest("GET", "yui_messages", auth="k", params=params)
    made = requests.Request("GET", f"{fake.server.url}/rest/v1/yui_messages", params=params)
    assert fake.server.url + fake.seen[0][1] == made.prepare().url


def test_the_environments_proxy_carries_the_calls(
    fake: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", fake.server.url)
    fake.answers += [(200, JSON, b"[]")]
    RelayClient("http://relay.invalid:54321").rest("GET", "t", auth="k", params={"a": "1"})
    assert fake.seen[0][1] == "http://relay.invalid:54321/rest/v1/t?a=1"  # as a proxy is asked
    monkeypatch.setenv("no_proxy", "relay.invalid")
    with pytest.raises(Unreachable, match="ConnectionError"):  # straight to a host that isn't
        RelayClient("http://relay.invalid:54321").rest("GET", "t", auth="k")


@pytest.mark.parametrize("hang_up", [False, True])
def test_a_kept_connection_is_reused_and_one_the_relay_closed_is_not(hang_up: bool) -> None:
    with KeepAliveServer(b"[]", hang_up=hang_up) as relay:
        client = RelayClient(relay.url)
        assert relay.repeat(lambda: client.rest("GET", "t", auth="k").json(), 3) == [[]] * 3
        client.pool.clear()
    assert relay.connections == (3 if hang_up else 1)


def test_threads_share_the_pool_and_its_kept_connections(caplog: pytest.LogCaptureFixture) -> None:
    with KeepAliveServer(b"[]") as relay:
        client = RelayClient(relay.url)
        with ThreadPoolExecutor(16) as threads:
            calls = [threads.submit(client.rest, "GET", "t", auth="k") for _ in range(200)]
            assert {call.result().status_code for call in calls} == {200}
        client.pool.clear()
    assert relay.connections <= 16 and len(relay.ports) == 200
    assert not caplog.records  # none opened past the pool ("pool is full, discarding")


def test_https_is_checked_against_the_ca_bundle_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate(tmp_path, "localhost")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with KeepAliveServer(b"[]", tls=tls) as relay:
        url = f"https://localhost:{relay.port}"
        with pytest.raises(Unreachable, match=r"\(SSLError\)"):  # certifi's roots don't know it
            RelayClient(url).rest("GET", "t", auth="k")
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
        trusting = RelayClient(url)
        assert trusting.rest("GET", "t", auth="k").json() == []
        trusting.pool.clear()


def test_the_realtime_url_follows_the_relays_scheme() -> None:
    assert realtime_url("http://127.0.0.1:54321", "anon") == (
        "ws://127.0.0.1:54321/realtime/v1/websocket?apikey=anon&vsn=1.0.0"
    )
    assert realtime_url("https://x.supabase.co/", None) == (
        "wss://x.supabase.co/realtime/v1/websocket?vsn=1.0.0"
    )
    assert RelayClient("http://h:1", "k").realtime_url.startswith("ws://h:1/realtime/v1/")


def test_an_upload_rewinds_a_file_it_was_given(fake: Scripted) -> None:
    fake.answers += [(401, JSON, b"{}"), (200, JSON, b"{}")]
    data = io.BytesIO(b"abc")
    fake.client.storage("POST", "/yui-media/p", auth=Session(), data=data)
    assert [body for _, _, _, body in fake.seen] == [b"abc", b"abc"]
