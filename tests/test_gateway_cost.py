"""What a request costs the gateway, counted rather than timed (issue 21): database round
trips per REST request, and a token's signature checked once however often it comes back,
while the database still judges the caller on every request. The times are in bench/.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.waiting import Ready

from relay.gateway import tokens
from relay.gateway.tokens import VerifiedTokens
from relay.keys import InvalidToken, mint
from relay.server import settings_for
from tests.helpers.relay import Host, LocalRelay, gateway_in_process

SECRET = "a secret for these tests only, long enough for HS256"


@pytest.fixture(scope="module")
def beside(relay: LocalRelay) -> Iterator[LocalRelay]:
    """A second gateway on the session relay's database, served in this process so its
    database calls and its token checks can be counted."""
    with gateway_in_process(settings_for(Path(relay.home) / "relay")) as url:
        yield replace(relay, url=url)


def talking(gen: Generator[Any, Any, Any], heard: Callable[[], None]) -> Generator[Any, Any, Any]:
    """`gen`, calling `heard` once if it reads an answer from the socket at all: a COMMIT
    outside a transaction never reaches PostgreSQL, and a statement queued in a pipeline is
    only sent, its answer read with the pipeline's sync."""
    answered = False
    try:
        out = next(gen)
    except StopIteration as done:
        return done.value
    while True:
        try:
            sent = yield out
        except BaseException as exc:
            try:
                out = gen.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            if sent & Ready.R and not answered:
                answered = True
                heard()
            try:
                out = gen.send(sent)
            except StopIteration as done:
                return done.value


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A line per exchange with PostgreSQL on the gateway's pool: psycopg reads an answer from
    the socket once for each (a query, a pipeline's sync, a pool's check). The Realtime
    listener's are left out."""
    seen: list[str] = []
    wait = psycopg.AsyncConnection.wait

    async def counted(
        self: psycopg.AsyncConnection, gen: Generator[Any, Any, Any], *args: Any, **kwargs: Any
    ) -> Any:
        if self.info.parameter_status("application_name") == "yui-realtime":
            return await wait(self, gen, *args, **kwargs)
        what = getattr(gen, "__qualname__", "?")
        return await wait(self, talking(gen, lambda: seen.append(what)), *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "wait", counted)
    return seen


@pytest.fixture
def verified(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A line per token whose signature was actually checked."""
    checked: list[str] = []
    verify = tokens.verify

    def counted(secret: str, token: str) -> dict[str, Any]:
        checked.append("verified")
        return verify(secret, token)

    monkeypatch.setattr(tokens, "verify", counted)
    return checked


def test_a_rest_request_is_two_round_trips(beside: LocalRelay, round_trips: list[str]) -> None:
    """BEGIN with the role's settings, then the statement with COMMIT: no check of the
    connection on checkout, no separate BEGIN or COMMIT (five, before issue 21)."""
    person = beside.person("Counted")
    agent, _ = person.add_agent("Counted")
    round_trips.clear()
    for n in range(10):
        assert person.say(agent, f"said {n}").status_code == 201
    for _ in range(10):
        answer = beside.rest("GET", "yui_messages", person.token, params={"select": "id,body"})
        assert sorted(row["body"] for row in answer.json()) == [f"said {n}" for n in range(10)]
    assert len(round_trips) == 40, round_trips[:8]


def test_connections_postgresql_closed_are_replaced_before_a_request_uses_them(
    relay: LocalRelay,
) -> None:
    """Without a query on every checkout, a connection whose backend is gone (a restart, an
    operator's pg_terminate_backend) is still caught: its socket has something to say."""
    folder = Path(relay.home) / "relay"
    settings = settings_for(folder)
    named = replace(settings, conninfo=f"{settings.conninfo} application_name=yui-test-stirred")
    person = relay.person("Stirred")
    with gateway_in_process(named) as url:
        beside = replace(relay, url=url)
        for _ in range(3):
            assert beside.rest("GET", "yui_agents", person.token).status_code == 200
        gone = "select pid from pg_stat_activity where application_name = 'yui-test-stirred'"
        pids = [pid for (pid,) in relay.sql(gone)]
        assert pids
        relay.sql("select pg_terminate_backend(pid) from unnest(%s::int[]) pid", (pids,))
        while relay.sql(gone + " and pid = any(%s)", (pids,)):
            pass  # until PostgreSQL has closed them all
        answers = [beside.rest("GET", "yui_agents", person.token).status_code for _ in range(5)]
        assert answers == [200] * 5


def test_a_token_is_verified_once_and_a_removed_host_is_refused_at_once(
    beside: LocalRelay, verified: list[str]
) -> None:
    person = beside.person("Cached")
    agent, code = person.add_agent("Cached")
    host = Host.pair(beside, code, "cached")
    assert person.say(agent, "before").status_code == 201
    verified.clear()
    for _ in range(5):
        answer = beside.rest("GET", "yui_messages", host.jwt, params={"select": "body"})
        assert answer.json() == [{"body": "before"}]
    assert len(verified) == 1
    revoked = beside.fn(
        "yui-agents", {"action": "connector_revoke", "id": host.connector["id"]}, person.token
    )
    assert revoked.json() == {"revoked": True}
    verified.clear()
    assert beside.rest("GET", "yui_messages", host.jwt).json() == []  # same token, no rows
    assert host.reply(agent, "too late").status_code in (401, 403)
    assert verified == []  # the database refused it, not a second look at the signature


def test_a_remembered_token_still_expires_at_its_exp() -> None:
    now = [1_000_000.0]
    memory = VerifiedTokens(clock=lambda: now[0])
    token = mint(SECRET, {"role": "yui_user", "sub": "someone"}, ttl=3600)
    exp = memory.verify(SECRET, token)["exp"]
    now[0] = exp - 1
    assert memory.verify(SECRET, token)["role"] == "yui_user"
    now[0] = exp
    with pytest.raises(InvalidToken) as refused:
        memory.verify(SECRET, token)
    assert refused.value.expired
    assert len(memory.claims) == 0


def test_bad_tokens_are_not_remembered_and_the_memory_is_bounded() -> None:
    memory = VerifiedTokens(kept=3)
    good = [mint(SECRET, {"role": "anon", "n": n}) for n in range(5)]
    for token in good:
        memory.verify(SECRET, token)
    with pytest.raises(InvalidToken):
        memory.verify("another secret, long enough for HS256 too", good[0])
    with pytest.raises(InvalidToken):
        memory.verify(SECRET, good[0][:-2] + "xx")
    assert len(memory.claims) == 3
    assert memory.verify(SECRET, good[4])["n"] == 4
