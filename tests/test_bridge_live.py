"""The live wake-up: a Realtime subscription starts a turn at once; catch-up reads cover what
the socket misses, including a gateway that dies under a running bridge."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.bridge import FakeWebhook, Machine, echo
from tests.helpers.relay import Gateway, Host, LocalRelay


@pytest.fixture
def gateway(relay: LocalRelay) -> Iterator[Gateway]:
    second = Gateway(relay).start()
    yield second
    second.kill()


def say(person, agent, body: str) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id).status_code == 201
    return row_id


def test_the_socket_starts_the_turn_not_a_read(relay, tmp_path: Path, webhook) -> None:
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(webhook.url)
    bridge.wait("live", up=True)
    for n in range(3):
        row_id = say(person, agent, f"hello {n}")
        turn = bridge.wait("turn", turn=[row_id])
        assert turn["by"] == "live"
        bridge.acked([row_id])
    machine.stop_all()


def test_poll_only_keeps_polling(relay, tmp_path: Path, webhook) -> None:
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(webhook.url, "--poll-only")
    bridge.wait("start")
    row_id = say(person, agent, "hi")
    assert bridge.wait("turn", turn=[row_id])["by"] == "poll"
    bridge.acked([row_id])
    assert not any(e["event"] == "live" for e in bridge.seen)
    machine.stop_all()


def test_two_gateways_on_one_database(relay, tmp_path: Path, webhook, gateway) -> None:
    machine = Machine(tmp_path / "host", relay, url=gateway.url)
    person = relay.person()  # the person writes through the session's own gateway
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(webhook.url)
    bridge.wait("live", up=True)
    row_id = say(person, agent, "through the other gateway")
    assert bridge.wait("turn", turn=[row_id])["by"] == "live"
    bridge.acked([row_id])
    machine.stop_all()


def test_a_gateway_killed_under_a_running_bridge(relay, tmp_path: Path, webhook, gateway) -> None:
    machine = Machine(tmp_path / "host", relay, url=gateway.url)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(webhook.url)
    bridge.wait("live", up=True)
    first = say(person, agent, "before")
    bridge.acked([first])

    gateway.kill()
    bridge.wait("live", up=False)
    waiting = [say(person, agent, f"while it was down {n}") for n in range(3)]
    time.sleep(1)
    gateway.start()
    bridge.wait("live", up=True, timeout=90)
    bridge.acked(waiting, timeout=60)
    turns = [e["turn"] for e in bridge.seen if e["event"] == "turn"]
    assert turns == [[first], waiting]
    bodies = [r["body"] for r in person.thread(agent) if r["sender"] == "agent"]
    assert bodies == [
        "echo: before",
        "echo: " + "\n".join(f"while it was down {n}" for n in range(3)),
    ]
    machine.stop_all()


def test_each_reply_is_pushed_and_a_send_is_a_handoff(relay, tmp_path: Path, webhook) -> None:
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    phone = relay.fn("yui-push", {"action": "register", "token": "cd" * 32}, person.token)
    assert phone.status_code == 200
    bridge = machine.bridge(webhook.url)
    bridge.wait("live", up=True)
    row_id = say(person, agent, "hi")
    bridge.acked([row_id])
    machine.yui("send", "your plan is ready")
    pushes = relay.rest(
        "GET",
        "yui_notifications",
        person.token,
        params={"select": "title,body,status", "order": "created_at.asc"},
    ).json()
    assert pushes == [
        {"title": "Coach", "body": "echo: hi", "status": "sunk"},
        {"title": "Coach", "body": "Coach has something for you in Yui", "status": "sunk"},
    ]
    machine.stop_all()


def test_a_restart_costs_one_token_trade_at_most(relay, tmp_path: Path, webhook) -> None:
    """Found by the crash test: two yui-connect calls per start let a bridge in a restart
    loop empty its own host's bucket. Now a restart with a live saved session costs one."""
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    machine.pair(person, "Coach", "coach")
    key = f"connect:c:{machine.state()['connector']['id']}"

    def tokens() -> float:
        return relay.sql("select tokens from yui_rate_buckets where key = %s", (key,))[0][0]

    with relay.limits(connect_per_min=0):  # no refill: the bucket counts the calls
        first = machine.bridge(webhook.url)
        first.wait("start")
        assert first.terminate() == 0
        before = tokens()
        again = machine.bridge(webhook.url)
        again.wait("start")
        assert tokens() == before - 1
        assert again.terminate() == 0


def test_a_message_sent_mid_turn_goes_next_without_waiting_for_a_catch_up(
    relay, tmp_path: Path
) -> None:
    """Found by the bench: the live wake-up for a row that came while its agent was busy was
    used up, so it waited for the next catch-up read (20 s). The turn's end reads again."""
    release = threading.Event()

    def first_waits(call):
        if len(hook.calls) == 1:
            release.wait(30)
        return echo(call)

    hook = FakeWebhook(first_waits)
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("live", up=True)
    first = say(person, agent, "one")
    hook.wait_calls(1)
    second = say(person, agent, "two")
    release.set()
    assert bridge.wait("turn", turn=[second])["by"] == "live"
    bridge.acked([first, second])
    machine.stop_all()
    hook.close()


def test_a_host_may_serve_more_than_fifty_agents(relay, tmp_path: Path, webhook) -> None:
    """Found by the bench: only the first 50 agents a bridge served read online."""
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    with relay.limits(pair_code_burst=1000, connect_burst=1000, agents_per_user=1000):
        first = machine.pair(person, "Agent 0", "agent-0")
        host = Host(relay, machine.state()["token"], machine.state()["connector"])
        for n in range(1, 60):
            assert host.call("add", remote_ref=f"agent-{n}").status_code == 200
        bridge = machine.bridge(webhook.url)
        bridge.wait("start")
        presences = {a["presence"] for a in person.listing().values()}
    assert presences == {"online"} and len(person.listing()) == 60
    assert first["agent"]["id"] in {a["id"] for a in person.listing().values()}
    machine.stop_all()
