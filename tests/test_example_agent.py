"""The example agent over real HTTP: a greeting with a screen, a named tap, and signatures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from bridges.client.rows import AgentInfo
from bridges.engine.turns import Turn
from bridges.webhook.example import make_server
from bridges.webhook.plugin import WebhookAgent, payload
from tests.helpers.http import LoopbackServer

SCREEN = '```yui\nchoose "Pick one" Coffee|Walk|Nap\n```'


@pytest.fixture
def agent_url() -> Iterator[str]:
    with LoopbackServer.serving(make_server(0)) as server:
        yield server.url


def turn_of(*rows: dict[str, Any]) -> Turn:
    agent = AgentInfo(id="a-1", name="Example", handle="example", ref="example")
    return Turn(agent=agent, rows=list(rows), guide={"version": "v1", "body": "guide"})


def text(id: str, body: str) -> dict[str, Any]:
    return {"id": id, "kind": "text", "body": body, "meta": None, "created_at": "t"}


def tap(id: str, meta: dict[str, Any]) -> dict[str, Any]:
    body = f"[yui] {meta['id']} {meta['preset']} ..."
    return {"id": id, "kind": "event", "body": body, "meta": meta, "created_at": "t"}


def post(url: str, turn: Turn) -> requests.Response:
    return requests.post(url, json=payload(turn), timeout=5)


def test_hi_gets_a_greeting_and_three_buttons(agent_url: str) -> None:
    resp = post(agent_url, turn_of(text("r1", "hi")))
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    reply = resp.json()["reply"]
    assert SCREEN in reply
    assert reply.split("```yui")[0].strip()  # a chat line before the fence


def test_a_tap_is_named_by_its_echo(agent_url: str) -> None:
    walk = {"id": "n1", "preset": "choose", "value": {"choice": "Walk"}, "echo": "Walk"}
    resp = post(agent_url, turn_of(text("r1", "hmm"), tap("r2", walk)))
    assert resp.json() == {"reply": "Walk it is."}


def test_a_tap_without_echo_names_the_preset_and_value(agent_url: str) -> None:
    rate = {"id": "n2", "preset": "rate", "value": {"stars": 4}}
    reply = post(agent_url, turn_of(tap("r1", rate))).json()["reply"]
    assert "rate" in reply and '{"stars": 4}' in reply


def test_not_a_turn_is_a_400(agent_url: str) -> None:
    assert requests.post(agent_url, data=b"[1, 2]", timeout=5).status_code == 400
    assert requests.post(agent_url, data=b"{nope", timeout=5).status_code == 400


def test_with_a_secret_unsigned_posts_get_401(
    agent_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUI_WEBHOOK_SECRET", "s3cret")
    assert post(agent_url, turn_of(text("r1", "hi"))).status_code == 401
    forged = requests.post(
        agent_url,
        data=json.dumps(payload(turn_of(text("r1", "hi")))),
        headers={"x-yui-timestamp": "1800000000", "x-yui-signature": "sha256=" + "0" * 64},
        timeout=5,
    )
    assert forged.status_code == 401


def test_the_webhook_plugin_and_the_example_agent_agree(
    agent_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUI_WEBHOOK_SECRET", "s3cret")
    signed = WebhookAgent(agent_url, secret="s3cret")
    [greeting] = signed.answer(turn_of(text("r1", "hi")))
    assert greeting.endswith(SCREEN)
    walk = {"id": "n1", "preset": "choose", "value": {"choice": "Walk"}, "echo": "Walk"}
    assert signed.answer(turn_of(tap("r2", walk))) == ["Walk it is."]
