"""Fault scenarios: the gateway or PostgreSQL restarted mid-turn, the network to the relay
black-holed for a minute, a flapping webhook, a half-open socket. Nothing lost, nothing twice."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from relay.cluster import cluster_for
from tests.helpers.bridge import Call, FakeWebhook, Machine, echo
from tests.helpers.faultproxy import BLACKHOLE, DELAY, HALF_OPEN, REFUSE, FaultProxy
from tests.helpers.relay import Gateway, LocalRelay


def say(person, agent, body: str) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id).status_code == 201
    return row_id


def answered_once(relay: LocalRelay, agent: dict, ids: list[str]) -> None:
    """Each row is named by exactly one reply, and every row is handled."""
    turns = relay.sql(
        "select meta->'turn' from yui_messages where agent_id = %s"
        " and sender = 'agent' order by created_at, id",
        (agent["id"],),
    )
    named = Counter(row for (turn,) in turns for row in turn)
    assert {row: named[row] for row in ids} == dict.fromkeys(ids, 1)
    unhandled = relay.sql(
        "select count(*) from yui_messages where id = any(%s::uuid[]) and handled_at is null",
        (ids,),
    )
    assert unhandled == [(0,)]


def holding_webhook() -> tuple[FakeWebhook, threading.Event]:
    """A webhook that holds the first turn until the test lets it go."""
    release = threading.Event()

    def first_waits(call: Call):
        if len(hook.calls) == 1:
            release.wait(60)
        return echo(call)

    hook = FakeWebhook(first_waits)
    return hook, release


def test_the_gateway_restarted_mid_turn(relay, tmp_path: Path) -> None:
    gateway = Gateway(relay).start()
    hook, release = holding_webhook()
    machine = Machine(tmp_path / "host", relay, url=gateway.url)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("live", up=True)
    first = say(person, agent, "one")
    hook.wait_calls(1)
    gateway.kill()
    second = say(person, agent, "two")
    release.set()
    bridge.wait("retry", what="relay")
    gateway.start()
    bridge.acked([first, second], timeout=90)
    answered_once(relay, agent, [first, second])
    machine.stop_all()
    gateway.kill()
    hook.close()


def test_postgres_restarted_mid_turn(relay, tmp_path: Path) -> None:
    hook, release = holding_webhook()
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("live", up=True)
    first = say(person, agent, "one")
    hook.wait_calls(1)
    cluster = cluster_for(relay.home / "relay")
    cluster.stop()
    release.set()
    time.sleep(16)  # down long enough that a pool's reconnect backoff outgrows its timeout
    cluster.start()
    second = say(person, agent, "two")
    bridge.acked([first, second], timeout=90)
    answered_once(relay, agent, [first, second])
    machine.stop_all()
    hook.close()


def test_the_network_to_the_relay_black_holed_for_a_minute(relay, tmp_path: Path) -> None:
    proxy = FaultProxy(relay.port)
    hook, release = holding_webhook()
    machine = Machine(tmp_path / "host", relay, url=proxy.url)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("live", up=True)
    first = say(person, agent, "one")
    hook.wait_calls(1)
    proxy.set(BLACKHOLE)
    release.set()  # the answer is ready while nothing gets through
    bridge.wait("answer")
    second = say(person, agent, "two")
    time.sleep(60)
    proxy.pass_through()
    bridge.acked([first, second], timeout=120)
    answered_once(relay, agent, [first, second])
    machine.stop_all()
    proxy.close()
    hook.close()


def test_a_flapping_webhook(relay, tmp_path: Path) -> None:
    hook = FakeWebhook(echo)
    flaky = FaultProxy(int(hook.url.rsplit(":", 1)[1]))
    machine = Machine(tmp_path / "host", relay)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(flaky.url, "--timeout", "2")
    bridge.wait("live", up=True)
    sent = []
    for n, (mode, delay) in enumerate(
        [(REFUSE, 0), (DELAY, 3.0), ("pass", 0), (REFUSE, 0), (DELAY, 0.5), ("pass", 0)]
    ):
        flaky.set(mode, delay)
        if mode == REFUSE:
            flaky.reset()
        sent.append(say(person, agent, f"message {n}"))
        time.sleep(2)
    flaky.pass_through()
    bridge.acked(sent, timeout=180)
    answered_once(relay, agent, sent)
    assert any(e["event"] == "retry" and e["what"] == "agent" for e in bridge.seen)
    machine.stop_all()
    flaky.close()
    hook.close()


def test_a_half_open_socket_is_noticed(relay, tmp_path: Path) -> None:
    proxy = FaultProxy(relay.port)
    hook = FakeWebhook(echo)
    machine = Machine(tmp_path / "host", relay, url=proxy.url)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url, YUI_LIVE_HEARTBEAT="2")
    bridge.wait("live", up=True)
    proxy.set(HALF_OPEN)  # every open connection goes silent for good; new ones work
    down = bridge.wait("live", up=False, timeout=30)
    assert "silent" in down["reason"]
    bridge.wait("live", up=True, timeout=60)
    row_id = say(person, agent, "after the socket came back")
    assert bridge.wait("turn", turn=[row_id])["by"] == "live"
    bridge.acked([row_id])
    answered_once(relay, agent, [row_id])
    machine.stop_all()
    proxy.close()
    hook.close()
