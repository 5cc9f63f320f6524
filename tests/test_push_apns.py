"""yui-push's APNs path: the provider token, the request, Apple's answers, and the relay in apns
mode against an HTTP/2-only fake Apple on loopback.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import h2.config
import h2.connection
import h2.events
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from relay.gateway.apns import ApnsClient, Credentials, ProviderToken
from tests.helpers.push import devices, new_thread, notify, phone, push, rows, written
from tests.helpers.relay import LocalRelay

# --- APNs: the provider token and the request ---------------------------------------------


def p256() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def credentials(key: ec.EllipticCurvePrivateKey) -> Credentials:
    return Credentials("TEAM123456", "KEY1234567", "com.example.yui", key)


def test_the_provider_token_verifies_with_the_public_key_and_is_kept_40_minutes() -> None:
    key = p256()
    now = [1_800_000_000.0]
    tokens = ProviderToken(credentials(key), clock=lambda: now[0])
    token = tokens.get()
    assert jwt.get_unverified_header(token) == {"alg": "ES256", "kid": "KEY1234567", "typ": "JWT"}
    claims = jwt.decode(
        token, key.public_key(), algorithms=["ES256"], options={"verify_iat": False}
    )
    assert claims == {"iss": "TEAM123456", "iat": 1_800_000_000}
    now[0] += 39 * 60
    assert tokens.get() == token
    now[0] += 60
    renewed = tokens.get()
    assert renewed != token
    assert (
        jwt.decode(renewed, key.public_key(), algorithms=["ES256"], options={"verify_iat": False})[
            "iat"
        ]
        == 1_800_000_000 + 40 * 60
    )
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, p256().public_key(), algorithms=["ES256"])
    assert "BEGIN" not in repr(credentials(key)) and token not in repr(tokens)


def test_the_apns_request_and_apples_answers() -> None:
    key = p256()
    seen: list[httpx.Request] = []
    answers = {
        "a" * 64: httpx.Response(200),
        "b" * 64: httpx.Response(410, json={"reason": "Unregistered"}),
        "c" * 64: httpx.Response(400, json={"reason": "BadDeviceToken"}),
        "d" * 64: httpx.Response(500),
    }

    def apple(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        token = request.url.path.rsplit("/", 1)[-1]
        if token == "e" * 64:
            raise httpx.ConnectError("no route to " + str(request.url))
        return answers[token]

    client = ApnsClient(credentials(key), transport=httpx.MockTransport(apple))
    request = client.request("a" * 64, "sandbox", {"aps": {}})
    assert str(request.url) == "https://api.sandbox.push.apple.com/3/device/" + "a" * 64
    assert str(client.request("a" * 64, "production", {}).url).startswith(
        "https://api.push.apple.com/3/device/"
    )
    assert request.headers["apns-topic"] == "com.example.yui"
    assert request.headers["apns-push-type"] == "alert"
    assert request.headers["apns-priority"] == "10"
    scheme, bearer = request.headers["authorization"].split(" ")
    assert scheme == "bearer"
    assert jwt.decode(bearer, key.public_key(), algorithms=["ES256"])["iss"] == "TEAM123456"
    assert json.loads(request.content) == {"aps": {}}

    async def send_all() -> list[Any]:
        try:
            return [await client.send(t * 64, "production", {}) for t in "abcde"]
        finally:
            await client.aclose()

    ok, gone, bad, broken, unreachable = asyncio.run(send_all())
    assert (ok.ok, ok.status, ok.gone) == (True, 200, False)
    assert (gone.ok, gone.status, gone.reason, gone.gone) == (False, 410, "Unregistered", True)
    assert (bad.reason, bad.gone) == ("BadDeviceToken", False)
    assert (broken.status, broken.reason) == (500, "HTTP 500")
    assert (unreachable.status, unreachable.reason) == (0, "ConnectError")  # no URL, no token


# --- APNs through the relay, against a fake Apple -----------------------------------------


class FakeApple:
    """An HTTP/2-only server on loopback that answers like Apple and keeps every request."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        conn = h2.connection.H2Connection(config=config)
        conn.initiate_connection()
        streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        with sock:
            try:
                sock.sendall(conn.data_to_send())
                while data := sock.recv(65536):
                    for event in conn.receive_data(data):
                        if isinstance(event, h2.events.RequestReceived):
                            # header_encoding="utf-8" above: names and values come as str
                            headers = cast(list[tuple[str, str]], event.headers)
                            streams[event.stream_id] = (dict(headers), bytearray())
                        elif isinstance(event, h2.events.DataReceived):
                            streams[event.stream_id][1].extend(event.data)
                            conn.acknowledge_received_data(
                                event.flow_controlled_length, event.stream_id
                            )
                        elif isinstance(event, h2.events.StreamEnded):
                            self._answer(conn, event.stream_id, *streams.pop(event.stream_id))
                    sock.sendall(conn.data_to_send())
            except OSError:
                return

    def _answer(
        self, conn: h2.connection.H2Connection, stream: int, headers: dict, body: bytearray
    ) -> None:
        self.requests.append({"headers": headers, "body": json.loads(body)})
        status, reason = self.answers.get(headers[":path"].rsplit("/", 1)[-1], (200, ""))
        reply = json.dumps({"reason": reason}).encode() if reason else b""
        conn.send_headers(
            stream,
            [(":status", str(status)), ("apns-id", str(uuid.uuid4()))],
            end_stream=not reply,
        )
        if reply:
            conn.send_data(stream, reply, end_stream=True)


@contextmanager
def push_config(relay: LocalRelay, key_pem: bytes, **config: Any) -> Iterator[Path]:
    """The relay's push.json (and key file) for the length of a test; the folder."""
    folder = Path(relay.home) / "relay"
    key_file = folder / "test-push-key.p8"
    key_file.write_bytes(key_pem)
    key_file.chmod(0o600)
    (folder / "push.json").write_text(json.dumps({"key_file": key_file.name, **config}))
    try:
        yield folder
    finally:
        (folder / "push.json").unlink()
        key_file.unlink()


def pem(key: Any) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def test_apns_mode_pushes_over_http2_and_forgets_unregistered_phones(
    relay: LocalRelay,
) -> None:
    person, agent, host = new_thread(relay)
    ok, gone, bad, watching = (phone(person) for _ in range(4))
    push(relay, person.token, "presence", token=watching, active=True, agent_id=agent["id"])
    ids = {t: d["id"] for t, d in devices(person).items()}
    apple = FakeApple({gone: (410, "Unregistered"), bad: (400, "BadDeviceToken")})
    key = p256()
    config = {
        "mode": "apns",
        "team_id": "TEAM123456",
        "key_id": "KEY1234567",
        "topic": "com.example.yui",
        "endpoint": apple.url,
    }
    try:
        with push_config(relay, pem(key), **config) as folder:
            message_id = written(host, agent, "Ready when you are")
            answer = notify(host, message_id)
            assert answer.status_code == 200, answer.text
            data = answer.json()
            log = (folder / "logs" / "gateway.log").read_text()
    finally:
        apple.close()
    assert (data["devices"], data["delivered"], data["skipped"]) == (4, 1, 1)
    results = {r["device"]: (r["ok"], r["status"], r["reason"]) for r in data["results"]}
    assert results == {
        ids[ok]: (True, 200, None),
        ids[gone]: (False, 410, "Unregistered"),
        ids[bad]: (False, 400, "BadDeviceToken"),
    }

    assert sorted(r["headers"][":path"] for r in apple.requests) == sorted(
        f"/3/device/{t}" for t in (ok, gone, bad)
    )
    for request in apple.requests:
        headers = request["headers"]
        assert headers[":method"] == "POST"
        assert (headers["apns-topic"], headers["apns-push-type"], headers["apns-priority"]) == (
            "com.example.yui",
            "alert",
            "10",
        )
        scheme, token = headers["authorization"].split(" ")
        assert scheme == "bearer"
        assert jwt.get_unverified_header(token)["kid"] == "KEY1234567"
        assert jwt.decode(token, key.public_key(), algorithms=["ES256"])["iss"] == "TEAM123456"
        assert request["body"]["aps"]["alert"] == {"title": "Coach", "body": "Ready when you are"}
        assert request["body"]["message_id"] == message_id

    left = devices(person)
    assert gone not in left  # Apple said Unregistered: the row is gone
    assert left[bad]["last_error"] == "BadDeviceToken" and left[bad]["last_push_at"] is None
    assert left[ok]["last_error"] is None and left[ok]["last_push_at"] is not None
    recorded = {
        (n["device_id"], n["status"], n["reason"]) for n in rows(person, "yui_notifications")
    }
    assert recorded == {
        (ids[ok], "sent", None),
        (None, "failed", "Unregistered"),
        (ids[bad], "failed", "BadDeviceToken"),
    }
    # Neither the key, the provider token nor a device token reaches the log.
    secret_lines = pem(key).decode().splitlines()[1:-1]
    assert not any(line in log for line in secret_lines)
    assert all(t not in log for t in (ok, gone, bad)) and "bearer" not in log.lower()

    # Back to the sink once push.json is gone.
    assert notify(host, written(host, agent)).json()["results"][0]["reason"] == "sunk"


def test_a_bad_push_config_is_503_and_shows_no_key(relay: LocalRelay) -> None:
    person, agent, host = new_thread(relay)
    phone(person)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    config = {"mode": "apns", "team_id": "T", "key_id": "K", "topic": "com.example.yui"}
    with push_config(relay, pem(rsa_key), **config) as folder:
        answer = notify(host, written(host, agent))
        log = (folder / "logs" / "gateway.log").read_text()
    assert answer.status_code == 503 and answer.json() == {"error": "push_unavailable"}
    assert "not a P-256 key" in log
    secret_lines = pem(rsa_key).decode().splitlines()[1:-1]
    assert not any(line in log or line in answer.text for line in secret_lines)
