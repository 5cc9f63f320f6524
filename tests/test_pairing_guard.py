"""Pairing codes can't be walked (issue 14): the address the throttle counts is the peer's
unless the operator named a proxy, the throttle's check and count are one step, and, whatever
the addresses, a code dies after a few wrong guesses and an account refuses pairing past a
daily budget (relay/migrations/0016_pairing_guard.sql).

Every guess here lands on a relay of this module's own, started with no `--trusted-proxy`
(the default), so no test elsewhere sees its wrong guesses; `proxied` is a second gateway on
the same database that believes its loopback peer, as `--trusted-proxy 127.0.0.1` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
import requests
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from relay.gateway.app import GatewaySettings
from relay.gateway.functions import client_ip
from relay.keys import sha256_hex
from relay.server import settings_for
from tests.helpers.relay import (
    Host,
    LocalRelay,
    Person,
    fresh_ip,
    gateway_in_process,
    running_relay,
)

WRONG = {"error": "invalid_or_expired_code"}
THROTTLED = {"error": "too_many_attempts"}

# `bare` is not one of conftest's INTEGRATION_FIXTURES, so the tests that use it say so.
integration = pytest.mark.integration


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRelay]:
    """A relay as `yui relay up` starts it with no options: it believes no forwarded header."""
    with running_relay(tmp_path_factory.mktemp("bare-relay")) as relay:
        yield relay


@pytest.fixture(scope="module")
def proxied(bare: LocalRelay) -> Iterator[LocalRelay]:
    """A gateway on `bare`'s database whose loopback peer is a trusted proxy, served by uvicorn
    in this process. uvicorn's own reading of X-Forwarded-For is off, as the relay's must be:
    the gateway alone decides whom to believe."""
    settings = replace(settings_for(Path(bare.home) / "relay"), trusted_proxies=("127.0.0.1/32",))
    with gateway_in_process(settings) as url:
        yield replace(bare, url=url)


@pytest.fixture(autouse=True)
def _no_attempts_on_record(request: pytest.FixtureRequest) -> None:
    """Every caller of `bare` is 127.0.0.1: each test starts with that address's slate clean."""
    if "bare" in request.fixturenames:
        request.getfixturevalue("bare").sql("delete from yui_pair_attempts")


def pair(relay: LocalRelay, code: str, ip: str | None = None) -> requests.Response:
    """Claim `code`, saying X-Forwarded-For: `ip` (believed only from a trusted proxy)."""
    return relay.fn(
        "yui-connect",
        {"action": "pair", "code": code, "remote_ref": "bot", "host_name": "Laptop"},
        ip=ip,
    )


def wrong_codes(relay: LocalRelay, n: int) -> list[str]:
    """`n` codes that are no live code's, so each claim of one is a wrong guess."""
    taken = {h for (h,) in relay.sql("select code_hash from yui_pairings where used_at is null")}
    codes = (f"{i:06d}" for i in range(1_000_000))
    return list(islice((c for c in codes if sha256_hex("pair:" + c) not in taken), n))


def new_code(person: Person, agent: dict[str, Any]) -> requests.Response:
    return person.relay.fn(
        "yui-agents", {"action": "pair_code", "agent_id": agent["id"]}, person.token
    )


def attempts(relay: LocalRelay) -> list[tuple[Any, ...]]:
    """The wrong guesses on record, by the address they were counted against."""
    return relay.sql("select ip, count(*) from yui_pair_attempts group by ip order by ip")


def wrong_guesses(relay: LocalRelay, person: Person) -> list[tuple[Any, ...]]:
    """What each of the person's codes took, and whether it has expired (died) by now."""
    return relay.sql(
        "select wrong_guesses, expires_at <= now() from yui_pairings where user_id = %s",
        (person.id,),
    )


def strikes(relay: LocalRelay, person: Person) -> int:
    """The wrong guesses the person's account has taken today."""
    rows = relay.sql("select count(*) from yui_pair_strikes where user_id = %s", (person.id,))
    return int(rows[0][0])


# --- whose address is counted ----------------------------------------------------------------


@integration
def test_rotating_x_forwarded_for_from_loopback_does_not_reset_the_throttle(
    bare: LocalRelay,
) -> None:
    person = bare.person()
    _, code = person.add_agent("Guarded")
    for guess in wrong_codes(bare, 10):
        assert pair(bare, guess, ip=fresh_ip()).json() == WRONG
    eleventh = pair(bare, wrong_codes(bare, 11)[-1], ip=fresh_ip())
    assert (eleventh.status_code, eleventh.json()) == (429, THROTTLED)
    assert pair(bare, code, ip=fresh_ip()).status_code == 429  # the right one too, from here
    assert attempts(bare) == [("127.0.0.1", 10)]


@integration
def test_behind_a_trusted_proxy_the_forwarded_address_is_counted(proxied: LocalRelay) -> None:
    person = proxied.person()
    _, code = person.add_agent("Forwarded")
    ip = fresh_ip()
    for guess in wrong_codes(proxied, 10):
        assert pair(proxied, guess, ip=ip).json() == WRONG
    # A client may write its own X-Forwarded-For; the proxy appends the address it saw, and
    # that one, the rightmost the proxy didn't write for itself, is who is counted.
    spoofed = pair(proxied, wrong_codes(proxied, 1)[0], ip=f"{fresh_ip()}, {ip}")
    assert (spoofed.status_code, spoofed.json()) == (429, THROTTLED)
    assert pair(proxied, code, ip=fresh_ip()).status_code == 200  # another address pairs
    assert (ip, 10) in attempts(proxied)


@integration
def test_a_malformed_forwarded_header_counts_as_the_proxy(proxied: LocalRelay) -> None:
    before = dict(attempts(proxied)).get("127.0.0.1", 0)
    assert pair(proxied, wrong_codes(proxied, 1)[0], ip="not-an-address").json() == WRONG
    counted = dict(attempts(proxied))
    assert counted["127.0.0.1"] == before + 1 and "not-an-address" not in counted


# --- one step: check and count ---------------------------------------------------------------


@integration
def test_forty_concurrent_wrong_guesses_from_one_address_check_exactly_ten(
    bare: LocalRelay,
) -> None:
    guesses = wrong_codes(bare, 40)
    with ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(lambda guess: pair(bare, guess), guesses))
    assert Counter(a.status_code for a in answers) == {401: 10, 429: 30}
    assert attempts(bare) == [("127.0.0.1", 10)]


# --- independent of addresses ----------------------------------------------------------------


@integration
def test_a_code_dies_after_its_wrong_guesses_from_any_number_of_addresses(
    proxied: LocalRelay,
) -> None:
    person = proxied.person()
    agent, code = person.add_agent("Walked")
    with proxied.limits(pair_guesses_per_code=3):
        for guess in wrong_codes(proxied, 3):
            assert pair(proxied, guess, ip=fresh_ip()).json() == WRONG
        assert wrong_guesses(proxied, person) == [(3, True)]  # the app sees it expired
        dead = pair(proxied, code, ip=fresh_ip())
        assert (dead.status_code, dead.json()) == (401, WRONG)
        fresh = new_code(person, agent)
        assert fresh.status_code == 200, fresh.text
        assert pair(proxied, fresh.json()["code"], ip=fresh_ip()).status_code == 200


@integration
def test_concurrent_guesses_from_many_addresses_count_exactly_against_a_code(
    proxied: LocalRelay,
) -> None:
    person = proxied.person()
    _, code = person.add_agent("Crowded")
    with proxied.limits(pair_guesses_per_code=5):
        guesses = wrong_codes(proxied, 30)
        with ThreadPoolExecutor(max_workers=30) as pool:
            answers = list(pool.map(lambda guess: pair(proxied, guess, ip=fresh_ip()), guesses))
        assert {a.status_code for a in answers} == {401}
        assert wrong_guesses(proxied, person) == [(5, True)]
        assert strikes(proxied, person) == 5
        assert pair(proxied, code, ip=fresh_ip()).json() == WRONG


@integration
def test_an_account_refuses_pairing_past_its_daily_budget(proxied: LocalRelay) -> None:
    person = proxied.person()
    agent, first = person.add_agent("Budget")
    with proxied.limits(pair_guesses_per_code=3, pair_guesses_per_user_day=5):
        for guess in wrong_codes(proxied, 3):  # the first code dies: 3 of 5
            assert pair(proxied, guess, ip=fresh_ip()).json() == WRONG
        assert pair(proxied, first, ip=fresh_ip()).json() == WRONG
        answer = new_code(person, agent)
        assert answer.status_code == 200, answer.text
        second = answer.json()["code"]
        for guess in wrong_codes(proxied, 2):  # 5 of 5: the second code dies with 2
            assert pair(proxied, guess, ip=fresh_ip()).json() == WRONG
        assert pair(proxied, second, ip=fresh_ip()).json() == WRONG
        paused = new_code(person, agent)
        assert (paused.status_code, paused.json()) == (429, {"error": "pairing_paused"})
        made = proxied.fn(
            "yui-agents", {"action": "create", "name": "Another", "pair": True}, person.token
        )
        assert (made.status_code, made.json()) == (429, {"error": "pairing_paused"})
        # Someone with no live code while those guesses were made is not touched by them.
        _, theirs = proxied.person("Bystander").add_agent("Theirs")
        assert pair(proxied, theirs, ip=fresh_ip()).status_code == 200


@integration
def test_one_address_cannot_kill_anyones_code(proxied: LocalRelay) -> None:
    """An address gets 10 wrong codes per 10 minutes, the life of a code, and a code outlives
    20: whoever shares an address with someone careless still pairs, from elsewhere."""
    person = proxied.person()
    _, code = person.add_agent("Survivor")
    ip = fresh_ip()
    statuses = [pair(proxied, guess, ip=ip).status_code for guess in wrong_codes(proxied, 12)]
    assert statuses == [401] * 10 + [429] * 2
    assert wrong_guesses(proxied, person) == [(10, False)]  # a refused guess isn't checked
    assert pair(proxied, code, ip=fresh_ip()).status_code == 200


@integration
def test_a_shared_loopback_address_waits_out_its_window_with_the_code_intact(
    bare: LocalRelay,
) -> None:
    """With no trusted proxy every local client is 127.0.0.1, so someone else's ten wrong
    codes make the right one wait; it is not spent meanwhile, and pairs once they age out."""
    person = bare.person()
    _, code = person.add_agent("Patient")
    for guess in wrong_codes(bare, 10):
        assert pair(bare, guess).json() == WRONG
    assert pair(bare, code).status_code == 429
    bare.sql("update yui_pair_attempts set created_at = created_at - interval '10 minutes'")
    assert pair(bare, code).status_code == 200


@integration
def test_a_right_code_on_the_first_try_pairs(bare: LocalRelay) -> None:
    person = bare.person()
    agent, code = person.add_agent("First try")
    answer = pair(bare, code)
    assert answer.status_code == 200, answer.text
    assert answer.json()["agent"]["id"] == agent["id"]
    assert attempts(bare) == []


@integration
def test_what_the_guard_counts_is_the_relays_alone(proxied: LocalRelay) -> None:
    person = proxied.person()
    _, code = person.add_agent("Reader")
    for token in (person.token, Host.pair(proxied, code).jwt):
        for table, columns in (("yui_pair_strikes", "*"), ("yui_pairings", "wrong_guesses")):
            answer = proxied.rest("GET", table, token, params={"select": columns})
            assert answer.status_code in (401, 403), (table, answer.text)


@integration
def test_the_budgets_are_rows_operators_can_tune(bare: LocalRelay) -> None:
    rows = bare.sql(
        "select name, value::int from yui_limits where name = any(%s) order by name",
        (["pair_attempts_per_10min", "pair_guesses_per_code", "pair_guesses_per_user_day"],),
    )
    assert rows == [
        ("pair_attempts_per_10min", 10),
        ("pair_guesses_per_code", 20),
        ("pair_guesses_per_user_day", 50),
    ]


# --- client_ip, case by case -----------------------------------------------------------------


def connection(peer: str, forwarded: list[str], trusted: tuple[str, ...]) -> HTTPConnection:
    app = Starlette()
    app.state.settings = GatewaySettings("", "", Path("."), trusted_proxies=trusted)
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return HTTPConnection({"type": "http", "app": app, "client": (peer, 4000), "headers": headers})


PROXIES = ("127.0.0.1/32", "10.0.0.0/8")


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "counted"),
    [
        ("127.0.0.1", ["203.0.113.5"], (), "127.0.0.1"),  # loopback alone earns no trust
        ("198.51.100.2", ["203.0.113.5"], PROXIES, "198.51.100.2"),  # not a named proxy
        ("127.0.0.1", [], PROXIES, "127.0.0.1"),
        ("127.0.0.1", ["203.0.113.5"], PROXIES, "203.0.113.5"),
        ("127.0.0.1", ["1.1.1.1, 203.0.113.5, 10.1.2.3"], PROXIES, "203.0.113.5"),
        ("127.0.0.1", ["1.1.1.1", "203.0.113.5"], PROXIES, "203.0.113.5"),  # two header lines
        ("127.0.0.1", ["10.0.0.9, 10.0.0.8"], PROXIES, "10.0.0.9"),  # all proxies: the first
        ("127.0.0.1", ["2001:db8::1"], PROXIES, "2001:db8::1"),
        ("127.0.0.1", ["::ffff:203.0.113.5"], PROXIES, "203.0.113.5"),
        ("::ffff:127.0.0.1", ["203.0.113.5"], PROXIES, "203.0.113.5"),
        ("127.0.0.1", ["203.0.113.5:443"], PROXIES, "127.0.0.1"),  # malformed: the peer
        ("127.0.0.1", ["203.0.113.5, junk"], PROXIES, "127.0.0.1"),
        ("127.0.0.1", ["203.0.113.5,"], PROXIES, "127.0.0.1"),
        ("testclient", ["203.0.113.5"], PROXIES, "testclient"),  # not an address at all
    ],
)
def test_client_ip(peer: str, forwarded: list[str], trusted: tuple[str, ...], counted: str) -> None:
    assert client_ip(connection(peer, forwarded, trusted)) == counted
