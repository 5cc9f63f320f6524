"""Remote media is fetched from public addresses only: a URL an agent names (or `yui media` is
given) that resolves to loopback, a private or link-local range, cloud metadata, or any other
address that isn't public is refused before a byte is sent, on the first hop and on every
redirect, and the connection goes to the address that was checked. `--allow-private-media`
lifts it for local testing.

No test here sends a packet off this machine: a "public" host is a fake resolver's answer, and
a connection to it is a fake too."""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import urllib3
from click.testing import CliRunner

from bridges.media import remote
from bridges.media.files import fetch
from state.errors import MediaRefused
from tests.helpers.bridge import FakeWebhook, Machine, reply
from tests.helpers.cli import yui
from tests.helpers.http import LOOPBACK, LoopbackServer
from tests.helpers.media import JPEG, SIGNED, fetch_signed
from tests.helpers.tls import certificate
from yui_cli.main import cli

PUBLIC = "93.184.216.34"  # what the fake resolver says a public name is (never connected to)

REFUSED = {
    "127.0.0.1": "loopback",
    "127.8.9.10": "loopback",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "cloud metadata",
    "169.254.170.2": "cloud metadata",
    "100.100.100.200": "cloud metadata",
    "192.0.0.192": "cloud metadata",
    "fd00:ec2::254": "cloud metadata",
    "169.254.1.1": "link-local",
    "100.64.0.1": "shared",
    "224.0.0.1": "multicast",
    "0.0.0.0": "unspecified",
    "240.0.0.1": "reserved",
    "255.255.255.255": "reserved",
    "192.0.2.7": "private",  # documentation ranges count as private in Python's table
    "::1": "loopback",
    "::": "unspecified",
    "fe80::1": "link-local",
    "fc00::1": "private",
    "fec0::1": "site-local",
    "ff02::1": "multicast",
    "::ffff:127.0.0.1": "loopback",  # IPv4-mapped
    "::ffff:169.254.169.254": "cloud metadata",
    "2002:7f00:1::": "loopback",  # 6to4 around 127.0.0.1
    "64:ff9b::a00:1": "private",  # NAT64 around 10.0.0.1
    "::127.0.0.1": "reserved",  # IPv4-compatible (deprecated)
}
ALLOWED = ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize(("address", "why"), REFUSED.items())
def test_addresses_that_are_not_public_are_refused(address: str, why: str) -> None:
    assert remote.not_public(ipaddress.ip_address(address)) == why


@pytest.mark.parametrize("address", ALLOWED)
def test_public_addresses_pass(address: str) -> None:
    assert remote.not_public(ipaddress.ip_address(address)) is None


# --- a loopback web server, and a resolver the test writes -------------------------------


class Web(LoopbackServer):
    """A web server on loopback with a picture at /cat.jpg (over TLS with `tls`); it records
    what it was asked, as `Host path`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.asked: list[str] = []
        web = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                web.asked.append(f"{self.headers['host']} {self.path}")
                found = self.path == "/cat.jpg"
                self.send_response(200 if found else 404)
                self.send_header("content-type", "image/jpeg")
                self.send_header("content-length", str(len(JPEG) if found else 0))
                self.end_headers()
                if found:
                    self.wfile.write(JPEG)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        if tls is not None:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
        self._serve(server)


@pytest.fixture
def web() -> Iterator[Web]:
    with Web() as server:
        yield server


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """A resolver the test fills: name → addresses, in order; each lookup is recorded."""
    table: dict[str, list[str]] = {"looked up": []}

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        table["looked up"].append(host)
        found = table.get(host) or [host]  # an address resolves to itself
        family = {4: socket.AF_INET, 6: socket.AF_INET6}
        return [
            (family[ipaddress.ip_address(a).version], socket.SOCK_STREAM, 6, "", (a, port))
            for a in found
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


def test_loopback_is_refused_before_any_request(web: Web) -> None:
    with pytest.raises(MediaRefused) as refused:
        fetch(f"{web.url}/cat.jpg?token=s3cret")
    assert "loopback" in refused.value.message and "s3cret" not in refused.value.message
    assert web.asked == []


def test_a_name_that_resolves_to_loopback_is_refused(web: Web, names) -> None:
    names["pics.example"] = ["127.0.0.1"]
    with pytest.raises(MediaRefused, match="loopback"):
        fetch(f"http://pics.example:{web.port}/cat.jpg")
    names["mixed.example"] = [PUBLIC, "10.0.0.5"]  # one bad address is enough
    with pytest.raises(MediaRefused, match="private"):
        fetch(f"http://mixed.example:{web.port}/cat.jpg")
    assert web.asked == []


def test_allowed_private_media_connects_to_the_checked_address(web, names, monkeypatch) -> None:
    monkeypatch.setattr(remote.POLICY, "private", True)
    names["pics.example"] = ["127.0.0.1"]
    media = fetch(f"http://pics.example:{web.port}/cat.jpg")
    assert media.data == JPEG and media.type.mime == "image/jpeg"
    assert web.asked == [f"pics.example:{web.port} /cat.jpg"]  # its own name, as Host
    looked_up_names = [h for h in names["looked up"] if not h[0].isdigit()]
    assert looked_up_names == ["pics.example"]  # once: the connection went where it checked


def test_the_next_checked_address_is_tried_when_one_refuses(web, names, monkeypatch) -> None:
    monkeypatch.setattr(remote.POLICY, "private", True)
    names["two.example"] = ["127.0.0.2", "127.0.0.1"]  # the server listens on the second only
    assert fetch(f"http://two.example:{web.port}/cat.jpg").data == JPEG
    assert web.asked == [f"two.example:{web.port} /cat.jpg"]


class FakeHop:
    """Connections to a 'public' address, faked: each answers a redirect to `location`."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.opened: list[tuple[str, int, str]] = []

    def __call__(self, scheme: str, address: str, port: int, host: str, timeout: float) -> Any:
        assert address == PUBLIC, f"connected to {address}, not the address that was checked"
        self.opened.append((address, port, host))
        headers = {"location": self.location, "content-length": "0"}
        return FakePool(urllib3.HTTPResponse(b"", headers=headers, status=302))


class FakePool:
    """A connection pool that answers every request with one response."""

    def __init__(self, response: urllib3.HTTPResponse) -> None:
        self.response = response

    def urlopen(self, *args: Any, **kwargs: Any) -> urllib3.HTTPResponse:
        return self.response

    def close(self) -> None:
        pass


def test_a_public_url_that_redirects_to_loopback_is_refused(web, names, monkeypatch) -> None:
    names["cdn.example"] = [PUBLIC]
    hop = FakeHop(f"{web.url}/cat.jpg")
    monkeypatch.setattr(remote, "_pool", hop)
    with pytest.raises(MediaRefused) as refused:
        fetch("http://cdn.example/photo.jpg?sig=abc")
    message = refused.value.message
    assert "redirect" in message and "loopback" in message and "sig=abc" not in message
    assert hop.opened == [(PUBLIC, 80, "cdn.example")]
    assert web.asked == []  # the loopback server was never asked


def test_redirects_are_bounded(names, monkeypatch) -> None:
    names["loop.example"] = [PUBLIC]
    hop = FakeHop("/again.jpg")  # a relative redirect, to the same public host, forever
    monkeypatch.setattr(remote, "_pool", hop)
    with pytest.raises(MediaRefused, match="redirects"):
        fetch("http://loop.example/start.jpg")
    assert len(hop.opened) == remote.MAX_HOPS


def test_a_redirect_to_another_scheme_is_refused(names, monkeypatch) -> None:
    names["cdn.example"] = [PUBLIC]
    monkeypatch.setattr(remote, "_pool", FakeHop("file:///etc/passwd"))
    with pytest.raises(MediaRefused, match="http"):
        fetch("http://cdn.example/photo.jpg")


# --- https to the checked address, still verified against the name -----------------------


def test_https_goes_to_the_checked_address_and_checks_the_name(
    names, monkeypatch, tmp_path
) -> None:
    cert, key = certificate(tmp_path, "pics.example")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    monkeypatch.setattr(remote.POLICY, "private", True)
    monkeypatch.setattr(remote, "CA_BUNDLE", str(cert))
    names["pics.example"] = ["127.0.0.1"]
    names["other.example"] = ["127.0.0.1"]
    with Web(tls) as web:
        assert fetch(f"https://pics.example:{web.port}/cat.jpg").data == JPEG
        with pytest.raises(MediaRefused, match="can't fetch"):  # its certificate isn't for it
            fetch(f"https://other.example:{web.port}/cat.jpg")
    assert web.asked == [f"pics.example:{web.port} /cat.jpg"]


# --- the real commands ------------------------------------------------------------------


def test_yui_media_refuses_a_loopback_url_unless_allowed(web, tmp_path) -> None:
    refused = yui("media", f"{web.url}/cat.jpg", home=tmp_path, check=False)
    assert refused.returncode == 1
    assert "loopback" in refused.stderr and "--allow-private-media" in refused.stderr
    assert web.asked == []
    allowed = yui(
        "media", f"{web.url}/cat.jpg", "--allow-private-media", home=tmp_path, check=False
    )
    assert allowed.returncode == 3  # fetched; then: this machine isn't paired
    assert web.asked == [f"127.0.0.1:{web.port} /cat.jpg"]


def test_bridges_document_the_flag() -> None:
    for command in ("run-webhook", "run-model", "run-a2a", "media"):
        shown = CliRunner().invoke(cli, [command, "--help"]).stdout
        assert "--allow-private-media" in shown, command


def test_the_bridge_fetches_loopback_media_only_when_allowed(relay, machine: Machine, web) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    line = f"image {web.url}/cat.jpg"
    hook = FakeWebhook(lambda call: reply(f"```yui\n{line}\n```"))

    refusing = machine.bridge(hook.url)
    refusing.wait("start")
    assert person.say(agent, "one").status_code == 201
    event = refusing.wait("media")
    assert event["stored"] == [] and "loopback" in event["left"][0]["reason"]
    refusing.wait("ack")
    assert refusing.terminate() == 0
    (first,) = [r for r in person.thread(agent) if r["sender"] == "agent"]
    assert line in first["body"]  # left as written, like any remote picture that fails
    assert web.asked == []
    _, logs = refusing.output()
    assert "left as written" in logs and "loopback" in logs

    allowing = machine.bridge(hook.url, "--allow-private-media")
    allowing.wait("start")
    assert person.say(agent, "two").status_code == 201
    assert len(allowing.wait("media")["stored"]) == 1
    allowing.wait("ack")
    second = [r for r in person.thread(agent) if r["sender"] == "agent"][1]
    link = SIGNED.search(second["body"])
    assert link and fetch_signed(link.group(0)).content == JPEG
    assert web.asked == [f"127.0.0.1:{web.port} /cat.jpg"]
    hook.close()
