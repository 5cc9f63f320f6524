"""What one client can cost the relay is bounded (issue 14): request bodies, statements, JSON
nesting, slow connections, and what a web page can make a browser send it.

Each test reproduces a finding of the hostile review through the real gateway, except where a
deadline is lowered in a gateway run in this process (said where).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import select
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from starlette.datastructures import Headers
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from relay import protocol, server
from relay.gateway.app import BrowserGuard
from relay.gateway.functions import MAX_BODY
from tests.helpers.relay import Gateway, LocalRelay, Person, gateway_in_process

MB = 1 << 20
REST = "/rest/v1/yui_messages"
CONNECT = "/functions/v1/yui-connect"
SIGN = "/storage/v1/object/sign/yui-media/someone/something.png"
LIST = "/storage/v1/object/list/yui-media"
REMOVE = "/storage/v1/object/yui-media"
SOCKET = "/realtime/v1/websocket"


def folder(relay: LocalRelay) -> Path:
    return Path(relay.home) / "relay"


def post(
    relay: LocalRelay, path: str, data: Any, method: str = "POST", **headers: str
) -> requests.Response:
    return requests.request(method, relay.url + path, data=data, headers=headers, timeout=120)


# --- bodies are capped before they are read ----------------------------------------------


def too_large(path: str, answer: requests.Response) -> bool:
    """A 413 in the error shape of the API `path` belongs to."""
    body = answer.json()
    if path.startswith("/rest/"):
        shape = set(body) == {"code", "message", "details", "hint"} and body["code"] == "PGRST413"
    elif path.startswith("/functions/"):
        shape = body == {"error": "payload_too_large"}
    else:
        shape = body["statusCode"] == "413" and body["error"] == "Payload too large"
    return answer.status_code == 413 and shape


def kilobytes(pid: int, field: str) -> int:
    line = next(
        line
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith(f"{field}:")
    )
    return int(line.split()[1])


def growth(pid: int, action: Callable[[], None]) -> int:
    """How far above its resident memory before `action` the process went at its highest
    during it, in bytes (the peak is reset first: it is what a burst costs)."""
    before = kilobytes(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    action()
    return (kilobytes(pid, "VmHWM") - before) * 1024


@pytest.mark.parametrize("path", [CONNECT, REST, SIGN])
def test_a_300_mb_body_without_credentials_is_a_413_and_costs_no_memory(
    relay: LocalRelay, path: str
) -> None:
    pid = json.loads((folder(relay) / "relay.json").read_text())["gateway_pid"]
    block = b"x" * MB
    answers: list[requests.Response] = []

    def chunked() -> Iterator[bytes]:  # no Content-Length: the gateway has to count
        for _ in range(300):
            yield block

    grew = growth(pid, lambda: answers.append(post(relay, path, chunked())))
    assert too_large(path, answers[0]), answers[0].text
    assert grew < 50 * MB, f"the gateway grew by {grew // MB} MB"
    assert requests.get(relay.url + "/health", timeout=10).ok


@pytest.mark.parametrize("path", [CONNECT, REST, SIGN])
def test_a_declared_oversize_body_is_refused_before_it_is_sent(
    relay: LocalRelay, path: str
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=20)
    try:
        connection.putrequest("POST", path)
        connection.putheader("content-type", "application/json")
        connection.putheader("content-length", str(2 * MB))
        connection.endheaders()  # and not a byte of the body
        answer = connection.getresponse()
        assert answer.status == 413
    finally:
        connection.close()


def test_a_function_body_of_the_cap_is_read_and_one_byte_more_is_not(relay: LocalRelay) -> None:
    call = b'{"action": "no-such-action"}'
    at_cap = call + b" " * (MAX_BODY - len(call))
    answer = post(relay, CONNECT, at_cap, **{"content-type": "application/json"})
    assert answer.status_code == 400 and answer.json() == {"error": "unknown_action"}
    past = post(relay, CONNECT, at_cap + b" ", **{"content-type": "application/json"})
    assert too_large(CONNECT, past)


# --- deep JSON is a 400, never a traceback -------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", CONNECT), ("POST", REST), ("POST", SIGN), ("POST", LIST), ("DELETE", REMOVE)],
)
def test_json_nested_100000_deep_is_a_400_in_the_apis_shape(
    relay: LocalRelay, method: str, path: str
) -> None:
    person = relay.person("Deep")
    log = folder(relay) / "logs" / "gateway.log"
    logged = log.stat().st_size
    answer = post(
        relay,
        path,
        b"[" * 100_000,
        method,
        authorization=f"Bearer {person.token}",
        apikey=relay.anon_key,
        **{"content-type": "application/json"},
    )
    assert answer.status_code == 400, answer.text
    body = answer.json()
    if path.startswith("/rest/"):
        assert body["code"] == "PGRST102"
    elif path.startswith("/functions/"):
        assert body == {"error": "invalid_request"}
    else:
        assert body["statusCode"] == "400" and body["error"] == "InvalidRequest"
    with log.open("rb") as lines:
        lines.seek(logged)
        added = lines.read().decode(errors="replace")
    assert "Traceback" not in added and "ERROR" not in added, added


# --- every role has a statement timeout ----------------------------------------------------

TIMEOUTS = {"anon": "3s", "yui_user": "8s", "yui_connector": "8s", "service_role": "20s"}


def role_timeouts(relay: LocalRelay) -> dict[str, str]:
    rows = relay.sql(
        "select r.rolname, split_part(c, '=', 2)"
        " from pg_db_role_setting s join pg_roles r on r.oid = s.setrole,"
        " unnest(s.setconfig) c where starts_with(c, 'statement_timeout=')"
    )
    return dict(rows)


def set_timeouts(relay: LocalRelay, timeouts: dict[str, str]) -> None:
    for role, value in timeouts.items():
        relay.sql(f"alter role {role} set statement_timeout = '{value}'")


def test_each_role_has_its_statement_timeout(relay: LocalRelay) -> None:
    assert role_timeouts(relay) == TIMEOUTS


@pytest.fixture
def sleepy(relay: LocalRelay) -> Iterator[Gateway]:
    """A function that sleeps, callable by anon and people, and a second gateway started with
    timeouts of 0.5 s for anon and 1 s for people (the real ones are 3 s and 8 s)."""
    relay.sql(
        "create function public.yui_test_sleep(seconds float) returns boolean"
        " language sql as $$ select pg_sleep(seconds) is null $$"
    )
    relay.sql("revoke all on function public.yui_test_sleep(float) from public")
    relay.sql("grant execute on function public.yui_test_sleep(float) to anon, yui_user")
    set_timeouts(relay, {"anon": "500ms", "yui_user": "1s"})
    gateway = Gateway(relay)
    try:
        gateway.start()
        yield gateway
    finally:
        gateway.kill()
        set_timeouts(relay, TIMEOUTS)
        relay.sql("drop function public.yui_test_sleep(float)")


def sleep(gateway: Gateway, who: Person | None, seconds: float) -> requests.Response:
    headers = {"apikey": gateway.relay.anon_key}
    if who is not None:
        headers["authorization"] = f"Bearer {who.token}"
    return requests.post(
        gateway.url + "/rest/v1/rpc/yui_test_sleep",
        json={"seconds": seconds},
        headers=headers,
        timeout=30,
    )


def test_a_slow_statement_is_cancelled_at_its_roles_timeout(
    relay: LocalRelay, sleepy: Gateway
) -> None:
    person = relay.person("Slow")
    for who in (None, person):
        cancelled = sleep(sleepy, who, 20)
        assert cancelled.status_code == 500, cancelled.text
        assert cancelled.json()["code"] == "57014"
        assert "statement timeout" in cancelled.json()["message"]
    # Past anon's timeout but within a person's: the timeout is the role's, not one for all.
    assert sleep(sleepy, person, 0.7).status_code == 200
    # And the gateway keeps serving, with no timeout carried over from one call to the next.
    assert requests.get(sleepy.url + "/health", timeout=10).ok
    assert sleep(sleepy, None, 0.1).status_code == 200


# --- slow connections are closed -----------------------------------------------------------


def closed(sock: socket.socket) -> bool:
    """Whether the peer has closed `sock` (anything it sent first is read and dropped)."""
    try:
        while select.select([sock], [], [], 0)[0]:
            if not sock.recv(65536):
                return True
    except OSError:
        return True
    return False


def test_a_request_head_that_never_ends_is_closed(relay: LocalRelay) -> None:
    """Half a request line and then nothing (on a new connection, and on one kept alive after
    a first request), and a head sent a byte at a time, are all closed by the real gateway
    within its header deadline; others are served meanwhile."""
    opened = [socket.create_connection(("127.0.0.1", relay.port)) for _ in range(3)]
    half, kept, trickle = opened
    with half, kept, trickle:
        half.sendall(b"GET /hea")
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        kept.settimeout(10)
        answer = b""
        while not answer.endswith(b'{"ok":true}'):
            answer += kept.recv(65536)
        kept.sendall(b"GET /hea")
        trickle.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        deadline = time.monotonic() + protocol.HEADER_TIMEOUT + 10
        while time.monotonic() < deadline and not all(map(closed, opened)):
            if not closed(trickle):
                with contextlib.suppress(OSError):  # closed under the send: seen next round
                    trickle.send(b"X")
            time.sleep(0.2)
        assert requests.get(relay.url + "/health", timeout=10).ok
        assert closed(half), "half a request line held its connection"
        assert closed(kept), "half a second request line held its connection"
        assert closed(trickle), "a head sent a byte at a time held its connection"


@pytest.fixture
def quick_gateway(relay: LocalRelay, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A gateway in this process, served as the real one is, whose body deadline is lowered
    to one second; yields its port."""
    monkeypatch.setattr(protocol, "BODY_IDLE", 1.0)
    with gateway_in_process(server.settings_for(folder(relay))) as url:
        yield int(url.rsplit(":", 1)[1])


def test_a_body_that_stalls_is_cut_off_and_one_that_crawls_is_not(
    quick_gateway: int, caplog: pytest.LogCaptureFixture
) -> None:
    head = (
        f"POST {CONNECT} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: {n}\r\n\r\n"
    )
    stalled = socket.create_connection(("127.0.0.1", quick_gateway))
    crawling = socket.create_connection(("127.0.0.1", quick_gateway))
    body = b'{"a": 1}'
    with stalled, crawling, caplog.at_level(logging.WARNING):
        stalled.sendall(head.format(n=100).encode() + b"{")
        crawling.sendall(head.format(n=len(body)).encode())
        for byte in body:  # 2.4 s in all, never a second without a byte
            crawling.sendall(bytes([byte]))
            time.sleep(0.3)
        crawling.settimeout(10)
        assert b" 400 " in crawling.recv(65536).split(b"\r\n")[0]  # unknown_action: it was read
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not closed(stalled):
            time.sleep(0.1)
        assert closed(stalled), "a body that stopped coming held its connection"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_websocket_outlives_the_body_deadline(quick_gateway: int, relay: LocalRelay) -> None:
    """The upgrade request's body deadline must not follow the connection into the websocket
    (it closed every socket a minute or two after it opened)."""
    url = f"ws://127.0.0.1:{quick_gateway}{SOCKET}?apikey={relay.anon_key}&vsn=1.0.0"
    with connect(url, open_timeout=10) as ws:
        for ref in range(8):  # 4 s: twice the (lowered) deadline, within the join deadline
            beat = {"topic": "phoenix", "event": "heartbeat", "payload": {}, "ref": str(ref)}
            ws.send(json.dumps(beat))
            assert json.loads(ws.recv(timeout=10))["ref"] == str(ref)
            time.sleep(0.5)


# --- what a browser may send ---------------------------------------------------------------


def test_the_guard_knows_the_names_and_origins_the_relay_goes_by() -> None:
    guard = BrowserGuard(
        lambda scope, receive, send: None,  # type: ignore[arg-type,return-value]
        ("http://127.0.0.1:8000", "http://localhost:8000", "https://Yui.Example.com:443"),
    )

    def refused(**headers: str) -> int | None:
        refusal = guard.refusal(Headers(headers))
        return refusal[0] if refusal else None

    for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:8000", "[::1]", "::1",
                 "10.0.0.7", "yui.example.com", "yui.example.com:8443"):  # fmt: skip
        assert refused(host=host) is None, host
    for host in ("evil.example", "127.0.0.1.nip.io", "localhost.evil.example", "",
                 "localhost:http", "[::1", "yui.example.com.evil.example"):  # fmt: skip
        assert refused(host=host) == 421, host
    for origin in ("http://127.0.0.1:8000", "http://LOCALHOST:8000", "https://yui.example.com"):
        assert refused(host="127.0.0.1", origin=origin) is None, origin
    for origin in ("http://evil.example", "null", "http://127.0.0.1:8001", "https://127.0.0.1:8000",
                   "http://yui.example.com", "file://"):  # fmt: skip
        assert refused(host="127.0.0.1", origin=origin) == 403, origin
    assert refused() is None  # no Host, no Origin: no browser's


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}"])
def test_a_host_the_relay_does_not_go_by_is_refused(relay: LocalRelay, host: str) -> None:
    sent = {"host": host.format(port=relay.port)}
    answer = requests.get(relay.url + "/health", headers=sent, timeout=10)
    assert answer.status_code == 421 and answer.json() == {"error": "unknown_host"}
    answer = post(relay, REST, b"{}", **sent)
    assert answer.status_code == 421


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"])
def test_the_names_the_relay_goes_by_are_served(relay: LocalRelay, host: str) -> None:
    sent = {"host": host.format(port=relay.port)}
    assert requests.get(relay.url + "/health", headers=sent, timeout=10).status_code == 200


def test_a_websocket_from_another_origin_is_refused(relay: LocalRelay) -> None:
    url = f"ws://127.0.0.1:{relay.port}{SOCKET}?apikey={relay.anon_key}&vsn=1.0.0"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin=Origin("http://evil.example"), open_timeout=10)
    assert refused.value.response.status_code == 403
    own = Origin(f"http://127.0.0.1:{relay.port}")
    with connect(url, origin=own, open_timeout=10) as ws:
        ws.send(json.dumps({"topic": "phoenix", "event": "heartbeat", "payload": {}, "ref": "1"}))
        assert json.loads(ws.recv(timeout=10))["ref"] == "1"


def test_a_websocket_frame_past_the_cap_closes_the_socket(relay: LocalRelay) -> None:
    url = f"ws://127.0.0.1:{relay.port}{SOCKET}?apikey={relay.anon_key}&vsn=1.0.0"
    with connect(url, open_timeout=10, max_size=None) as ws:
        ws.send("x" * (MAX_BODY + 1))
        with pytest.raises(ConnectionClosed) as ended:
            ws.recv(timeout=10)
    assert ended.value.rcvd is not None and ended.value.rcvd.code == 1009  # message too big


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "http://127.0.0.1:{other}", "https://127.0.0.1:{port}"],
)
def test_a_cross_origin_simple_post_never_reaches_a_function(
    relay: LocalRelay, origin: str
) -> None:
    """A page elsewhere can make a browser POST text/plain without asking first (no CORS
    preflight); it is refused, and the live pairing code it carried is still unclaimed."""
    person = relay.person("Browsed")
    _, code = person.add_agent("Target")
    pair = json.dumps({"action": "pair", "code": code, "remote_ref": "r", "host_name": "page"})
    plain = {"content-type": "text/plain"}
    page = origin.format(port=relay.port, other=relay.port + 1)
    answer = post(relay, CONNECT, pair, origin=page, **plain)
    assert answer.status_code == 403 and answer.json() == {"error": "origin_not_allowed"}
    connectors = "select count(*) from yui_connectors where user_id = %s"
    assert relay.sql(connectors, (person.id,)) == [(0,)]
    # From the relay's own origin the same request is served: the code was live.
    own = post(relay, CONNECT, pair, origin=f"http://127.0.0.1:{relay.port}", **plain)
    assert own.status_code == 200, own.text
    assert relay.sql(connectors, (person.id,)) == [(1,)]
