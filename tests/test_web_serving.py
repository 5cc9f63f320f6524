"""The web app's side of the relay, over HTTP as a browser meets it: the built page at /app/ on
the relay's own origin (or the one line that says how to build it), and the one-time sign-in
link of `yui app web`: good once, for its person only, for ten minutes."""

from __future__ import annotations

import gzip
import json
import stat
from pathlib import Path

import pytest
import requests

from relay.gateway import webapp
from relay.server import settings_for
from tests.helpers.bridge import Machine
from tests.helpers.relay import LocalRelay, fresh_ip, gateway_in_process

BUILT = pytest.mark.skipif(
    not (webapp.WEB_DIST / "index.html").is_file(), reason="the web app isn't built (make web)"
)


@BUILT
def test_the_page_is_served_from_the_relays_own_origin(relay: LocalRelay) -> None:
    page = requests.get(f"{relay.url}/app/", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.text == (webapp.WEB_DIST / "index.html").read_text()
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"

    bare = requests.get(f"{relay.url}/app", timeout=10, allow_redirects=False)
    assert bare.status_code == 308 and bare.headers["location"] == "/app/"

    script = requests.get(f"{relay.url}/app/main.js", timeout=10, stream=True)
    assert script.headers["content-encoding"] == "gzip"
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert gzip.decompress(script.raw.read()) == (webapp.WEB_DIST / "main.js").read_bytes()

    for name in ("../pyproject.toml", "%2e%2e/pyproject.toml", "/etc/passwd", "%2Fetc%2Fpasswd"):
        assert requests.get(f"{relay.url}/app/{name}", timeout=10).status_code == 404
    for name in (".x", "nope.js", "dist/../../pyproject.toml"):
        assert requests.get(f"{relay.url}/app/{name}", timeout=10).status_code == 404


@BUILT
def test_the_pages_key_is_the_anon_key_and_reads_nothing(relay: LocalRelay) -> None:
    key = requests.get(f"{relay.url}/app/config.json", timeout=10).json()["anon_key"]
    answer = requests.get(
        f"{relay.url}/rest/v1/yui_messages",
        headers={"apikey": key, "authorization": f"Bearer {key}"},
        timeout=10,
    )
    assert answer.status_code in (401, 403) or answer.json() == []


def test_a_relay_without_a_built_page_says_how_to_build_it(
    relay: LocalRelay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webapp, "WEB_DIST", tmp_path / "dist")
    with gateway_in_process(settings_for(Path(relay.home) / "relay")) as url:
        answer = requests.get(f"{url}/app/", timeout=10)
        assert answer.status_code == 503
        assert answer.text == "the page isn't built: run make setup\n"
        assert requests.get(f"{url}/app/main.js", timeout=10).status_code == 503


def link_secret(machine: Machine, *args: str) -> str:
    record = json.loads(machine.yui("app", "web", "--json", *args).stdout)
    link = record["link"]
    assert link.startswith(f"{machine.relay.url}/app/#signin=") and record["opened"] is False
    return link.split("#signin=", 1)[1]


def redeem(relay: LocalRelay, secret: object) -> requests.Response:
    return relay.fn("yui-web", {"action": "redeem", "secret": secret}, ip=fresh_ip())


def test_a_link_signs_its_person_in_once(relay: LocalRelay, machine: Machine) -> None:
    machine.yui("app", "signup", "Fay")
    machine.yui("app", "add-agent", "Mine")
    machine.yui("app", "signup", "Gus")
    machine.yui("app", "add-agent", "His")
    secret = link_secret(machine, "--as", "Fay")
    assert secret not in json.dumps(relay.sql("select * from yui_signin_links", None), default=str)

    first = redeem(relay, secret)
    assert first.status_code == 200, first.text
    session = first.json()
    assert session["user"]["name"] == "Fay" and session["refresh_token"].startswith("yui_rt_")
    agents = relay.rest("GET", "yui_agent_list", session["access_token"]).json()
    assert [a["name"] for a in agents] == ["Mine"]

    assert redeem(relay, secret).json() == {"error": "invalid_link"}
    assert redeem(relay, secret).status_code == 401
    for wrong in ("yui_web_" + "A" * 43, "nope", 7, None, "yui_web_" + "A" * 200):
        assert redeem(relay, wrong).status_code == 401


def test_a_link_lasts_ten_minutes_and_nobody_reads_the_links(
    relay: LocalRelay, machine: Machine
) -> None:
    machine.yui("app", "signup", "Hal")
    secret = link_secret(machine)
    relay.sql(
        "update yui_signin_links set expires_at = now() - interval '1 second',"
        " created_at = now() - interval '601 seconds'"
        " where used_at is null and user_id = (select id from yui_users where name = 'Hal')"
    )
    assert redeem(relay, secret).status_code == 401

    token = json.loads((machine.home / "app.json").read_text())
    person = next(iter(token["people"].values()))["access_token"]
    listed = relay.rest("GET", "yui_signin_links", person)
    assert listed.status_code in (401, 403) or listed.json() == []
    forged = relay.rest(
        "POST",
        "yui_signin_links",
        person,
        body={"secret_hash": "0" * 64, "expires_at": "2999-01-01T00:00:00Z"},
    )
    assert forged.status_code in (401, 403)


def test_a_person_makes_only_so_many_links_an_hour(relay: LocalRelay, machine: Machine) -> None:
    machine.yui("app", "signup", "Ida")
    with relay.limits(signin_links_per_hour=2):
        link_secret(machine)
        link_secret(machine)
        refused = machine.yui("app", "web", check=False)
    assert refused.returncode == 75 and refused.stdout == ""  # EX_TEMPFAIL: later, it works
    assert refused.stderr.startswith("Error: too many sign-in links in the last hour\n")
    assert "Traceback" not in refused.stderr


def test_without_a_person_there_is_no_link(machine: Machine) -> None:
    refused = machine.yui("app", "web", check=False)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("Error: nobody has signed up on this machine yet\n")


def test_guessing_links_is_counted_per_address(relay: LocalRelay) -> None:
    ip = fresh_ip()
    body = {"action": "redeem", "secret": "yui_web_" + "B" * 43}
    with relay.limits(signin_address_burst=2, signin_address_per_min=0):
        tries = [relay.fn("yui-web", body, ip=ip).status_code for _ in range(3)]
        elsewhere = relay.fn("yui-web", body, ip=fresh_ip()).status_code
    assert tries == [401, 401, 429] and elsewhere == 401


def test_open_starts_the_browser_without_the_secret_in_its_arguments(
    relay: LocalRelay, machine: Machine, tmp_path: Path
) -> None:
    machine.yui("app", "signup", "Max")
    seen = tmp_path / "argv.txt"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$@" > {seen}\n')
    browser.chmod(0o700)
    done = machine.yui("app", "web", "--open", "--json", BROWSER=str(browser))
    record = json.loads(done.stdout)
    secret = record["link"].split("#signin=", 1)[1]
    assert record["opened"] is True
    (argument,) = seen.read_text().split()
    assert secret not in argument and argument.startswith("file://")
    opener = Path(argument.removeprefix("file://"))
    assert opener.parent == machine.home and stat.S_IMODE(opener.stat().st_mode) == 0o600
    assert f'url={record["link"]}"' in opener.read_text()
