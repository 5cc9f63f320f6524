"""What an operator watches: after a few turns through the relay, its /metrics counts the
requests, the open Realtime sockets and the changes fanned out to them; a caller from an
address not allowed (here one a trusted proxy vouches for) is refused; /health says whether
PostgreSQL answers."""

from __future__ import annotations

import uuid

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.bridge import FakeWebhook, Machine
from tests.helpers.relay import LocalRelay


def scrape(relay: LocalRelay) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample at /metrics, by name and labels."""
    answer = requests.get(relay.url + "/metrics", timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(
        value
        for (found, having), value in samples.items()
        if found == name and set(labels.items()) <= set(having)
    )


def test_metrics_count_requests_sockets_and_fan_out_for_allowed_callers_only(
    relay: LocalRelay, machine: Machine, webhook: FakeWebhook
) -> None:
    before = scrape(relay)
    person = relay.person("Watched")
    agent = machine.pair(person, "Counted", "counted")["agent"]
    bridge = machine.bridge(webhook.url)
    bridge.wait("live", up=True)
    for n in range(3):
        row_id = str(uuid.uuid4())
        assert person.say(agent, f"turn {n}", id=row_id).status_code == 201
        bridge.acked([row_id])
    after = scrape(relay)

    rest = {"route": "/rest/v1/{target:anything}"}
    inserted = total(after, "yui_http_requests_total", method="POST", status="201", **rest)
    assert (
        inserted - total(before, "yui_http_requests_total", method="POST", status="201", **rest)
        >= 6
    )
    timed = total(after, "yui_http_request_duration_seconds_count", route=rest["route"])
    assert timed >= inserted  # every request timed, by the same route
    assert total(after, "yui_realtime_sockets") >= 1  # the bridge's, open now
    assert total(after, "yui_realtime_subscriptions") >= 1
    fanned = total(after, "yui_realtime_changes_fanned_out_total")
    assert fanned - total(before, "yui_realtime_changes_fanned_out_total") >= 3  # each message
    assert total(after, "yui_pairing_attempts_total", outcome="paired") >= 1
    assert total(after, "yui_db_pool_connections", state="open") >= 1

    # The relay believes X-Forwarded-For from loopback (its trusted proxy): a caller the proxy
    # says is elsewhere is no loopback caller, and is refused.
    far = requests.get(
        relay.url + "/metrics", headers={"x-forwarded-for": "203.0.113.9"}, timeout=10
    )
    assert far.status_code == 403 and far.json() == {"error": "metrics_not_allowed"}
    assert "yui_http" not in far.text

    health = requests.get(relay.url + "/health", timeout=10)
    assert health.status_code == 200 and health.json() == {"ok": True}  # PostgreSQL answered
