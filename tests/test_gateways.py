"""Several gateways on one database: the session relay's own gateway (A) and a second one
started with `yui relay serve --database` (B), as an operator runs them behind a load
balancer. A bridge on A answers a person writing through B at once (the live feed, not a
read); a suspended host is refused by both; a rate limit spent on A is spent on B."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.bridge import FakeWebhook, Machine
from tests.helpers.cli import ROOT
from tests.helpers.http import free_port
from tests.helpers.relay import Host, LocalRelay, Person, wait_healthy


@pytest.fixture(scope="module")
def gateway_b(relay: LocalRelay, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRelay]:
    """`yui relay serve` on the session relay's database and folder (its keys), another port,
    logging JSON lines to a file."""
    folder = Path(relay.home) / "relay"
    log = tmp_path_factory.mktemp("gateway-b") / "gateway.log"
    database = json.loads((folder / "relay.json").read_text())["gateway_conninfo"]
    port = free_port()
    with log.open("w") as sink:
        process = subprocess.Popen(
            [
                sys.executable, str(ROOT / "bin" / "yui"), "relay", "serve",
                "--database", database, "--port", str(port), "--dir", str(folder),
                "--log-format", "json",
            ],
            stdout=subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
    other = dataclasses.replace(relay, url=f"http://127.0.0.1:{port}")
    try:
        try:
            wait_healthy(other.url)
        except AssertionError:
            process.kill()
            process.wait(timeout=10)
            raise AssertionError(log.read_text()[-2000:]) from None
        yield other
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    logged = log.read_text()
    assert process.returncode == 0, logged[-2000:]
    lines = [json.loads(line) for line in logged.splitlines() if line.startswith("{")]
    logged_requests = [line for line in lines if line.get("route")]
    assert logged_requests  # a line a request, with what it was and how it went
    assert all({"method", "path", "status", "ms"} <= set(r) for r in logged_requests)
    assert relay.service_key not in logged and relay.anon_key not in logged  # never a token


def test_a_bridge_on_one_gateway_hears_a_person_on_another_at_once(
    relay: LocalRelay, gateway_b: LocalRelay, machine: Machine, webhook: FakeWebhook
) -> None:
    person = relay.person("Two doors")
    agent = machine.pair(person, "Coach", "coach")["agent"]  # the host talks to A
    bridge = machine.bridge(webhook.url)
    bridge.wait("live", up=True)
    through_b = Person(gateway_b, person.id, person.token)
    for n in range(2):
        row_id = str(uuid.uuid4())
        assert through_b.say(agent, f"hello {n}", id=row_id).status_code == 201
        assert bridge.wait("turn", turn=[row_id])["by"] == "live"  # woken, not a catch-up read
        bridge.acked([row_id])
    assert [r["body"] for r in through_b.thread(agent)][-1] == "echo: hello 1"


def test_the_kill_switch_and_rate_limits_hold_across_gateways(
    relay: LocalRelay, gateway_b: LocalRelay
) -> None:
    person = relay.person("Limited")
    _, code = person.add_agent("Held")
    host = Host.pair(relay, code, "held")
    suspend = {"kind": "connector", "target": host.connector["id"], "reason": "test"}
    answer = relay.rest("POST", "rpc/yui_suspend", relay.service_key, body={**suspend, "on_": True})
    assert answer.status_code == 200, answer.text
    try:
        for gateway in (relay, gateway_b):
            refused = dataclasses.replace(host, relay=gateway).call("heartbeat")
            assert refused.status_code == 403 and refused.json()["error"] == "suspended"
    finally:
        restore = {**suspend, "on_": False, "reason": None}
        relay.rest("POST", "rpc/yui_suspend", relay.service_key, body=restore)
    assert dataclasses.replace(host, relay=gateway_b).call("heartbeat").status_code == 200

    spender = relay.person("Spender")
    with relay.limits(agents_api_burst=2, agents_api_per_min=0.001):
        listing = {"action": "list"}
        assert relay.fn("yui-agents", listing, spender.token).status_code == 200
        assert relay.fn("yui-agents", listing, spender.token).status_code == 200
        spent = gateway_b.fn("yui-agents", listing, spender.token)
        assert spent.status_code == 429 and spent.json()["error"] == "rate_limited"
