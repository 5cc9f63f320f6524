"""`run-webhook --controls`: the report asked of the webhook with a signed GET, each checked
request forwarded as its own signed POST, and the webhook's answers checked like any item
(shape, 32 KB, secrets) before they are written. Also the capability report as the bridges
send it at start, with `yui run-webhook` and `yui run-model` as real processes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from standardwebhooks.webhooks import Webhook

from bridges.client.host import HostSession, pair
from bridges.controls.store import ControlsState
from bridges.controls.text import HIDDEN, looks_like_key
from bridges.webhook.controls import WebhookControls
from bridges.webhook.plugin import WebhookAgent
from state.host import HostState
from tests.helpers.bridge import run_model
from tests.helpers.controls import SECTIONS, TOKEN, ControlsHook, serve_controls
from tests.helpers.relay import LocalRelay
from yui_cli.main import cli

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()
SERVED = {k: v for k, v in SECTIONS.items() if k != "channels"}  # channels are read only


@pytest.fixture
def hook() -> Iterator[ControlsHook]:
    served = ControlsHook()
    yield served
    served.close()


def yui(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def controls(*args: str) -> dict[str, Any]:
    result = yui("app", "controls", "--json", *args)
    return json.loads(result.stdout)


@pytest.fixture
def host(relay_env: LocalRelay, tmp_path: Path, hook: ControlsHook) -> Iterator[WebhookControls]:
    """A person with Scout, a host serving it through the webhook, answering in the background."""
    assert yui("app", "signup", "owner").exit_code == 0
    code = json.loads(yui("app", "add-agent", "Scout", "--json").stdout)["code"]
    state = HostState(tmp_path / "host" / "state.json")
    pair(code, ref="scout", host_name="Test host", url=relay_env.url, state=state)
    session = HostSession(state)
    session.open(serving=["scout"])
    provider = WebhookControls(WebhookAgent(hook.url, secret=SECRET))
    provider.load_report()
    cs = ControlsState(Path(os.environ["YUI_HOME"]))
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.2):
            serve_controls(session, state, provider, cs)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield provider
    stop.set()
    thread.join(timeout=10)


def test_the_report_is_a_signed_get(host: WebhookControls, hook: ControlsHook) -> None:
    assert host.sections() == SECTIONS
    assert controls("list", "channels")["error"] == "bad_section"
    method, headers, raw = hook.requests[0]
    assert method == "GET" and headers["x-yui-kind"] == "controls" and raw == b""
    # signed over the empty body (the library's verify() would then parse it as JSON)
    stamp = datetime.fromtimestamp(int(headers["webhook-timestamp"]), UTC)
    assert Webhook(SECRET).sign(headers["webhook-id"], stamp, "") == headers["webhook-signature"]
    mac = hmac.new(SECRET.encode(), headers["x-yui-timestamp"].encode() + b".", hashlib.sha256)
    assert headers["x-yui-signature"] == "sha256=" + mac.hexdigest()


def test_each_op_goes_to_the_webhook_as_its_own_signed_post(host, hook) -> None:
    assert [i["id"] for i in controls("list", "memory")["items"]] == ["m1", "m2"]
    got = controls("get", "memory", "m1")
    assert got["item"]["text"] == "Likes tea"
    saved = controls("put", "memory", "m1", "--text", "Likes green tea", "--rev", got["rev"])
    assert saved["ok"] and hook.items["memory"]["m1"]["text"] == "Likes green tea"
    stale = controls("put", "memory", "m1", "--text", "Coffee", "--rev", got["rev"])
    assert stale["error"] == "conflict" and stale["item"]["text"] == "Likes green tea"
    paused = controls("act", "schedules", "morning", "pause")
    assert paused["ok"] and paused["item"]["paused"] is True
    assert controls("delete", "memory", "m1")["error"] == "confirm"
    assert controls("delete", "memory", "m1", "--yes")["deleted"] is True
    assert "m1" not in hook.items["memory"]

    sent = hook.controls()
    assert [c["op"] for c in sent] == [
        "list",
        "get",
        "get",
        "put",  # a put is checked against a fresh get first
        "get",
        "get",
        "act",
        "get",
        "get",
        "delete",
    ]
    assert sent[3]["rev"] == got["rev"] and sent[3]["value"] == {"text": "Likes green tea"}
    assert sent[-1]["confirmed"] is True
    for method, headers, raw in hook.requests[1:]:
        assert method == "POST" and headers["x-yui-kind"] == "control"
        Webhook(SECRET).verify(raw, headers)
        assert "x-yui-turn" not in headers


def test_the_model_stays_read_only_whatever_the_webhook_says(host, hook) -> None:
    got = controls("get", "model", "model")
    refused = controls("put", "model", "model", "--text", "gpt", "--rev", got["rev"])
    assert refused["error"] == "not_allowed"
    assert "put" not in [c["op"] for c in hook.controls()]


def test_a_token_in_the_webhooks_answer_never_reaches_the_relay(host, hook, relay_env) -> None:
    got = controls("get", "memory", "m2")
    assert got["item"]["text"] == f"Team chat\n{HIDDEN}" and got["item"]["read_only"] is True
    listed = controls("list", "memory")
    assert [i["read_only"] for i in listed["items"]] == [False, True]
    put = controls("put", "memory", "m2", "--text", f"Team chat\n{HIDDEN}", "--rev", got["rev"])
    assert put["error"] == "read_only" and TOKEN in hook.items["memory"]["m2"]["text"]
    hook.special["get"] = {"ok": False, "error": "bundled", "message": f"no: token={TOKEN}"}
    assert controls("get", "memory", "m1")["message"] == HIDDEN
    rows = relay_env.sql("select body, meta::text from yui_messages where kind = 'control'")
    assert rows and not any(TOKEN in b + m or looks_like_key(b + m) for b, m in rows)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"ok": True, "item": {"id": "../../etc", "text": "x"}}, "failed"),
        ({"ok": True, "item": {"id": "m1", "text": "x" * (33 * 1024)}}, "too_big"),
        ({"ok": True, "item": "just words"}, "failed"),
        ({"ok": False, "error": "teapot"}, "failed"),
        ({"ok": False, "error": "bundled"}, "bundled"),
        (["not", "an", "object"], "failed"),
    ],
)
def test_the_webhooks_answer_is_checked_like_any_item(host, hook, answer, error) -> None:
    hook.special["get"] = answer
    assert controls("get", "memory", "m1")["error"] == error


def test_a_webhook_without_a_report_serves_nothing(relay_env, hook) -> None:
    hook.report = False
    provider = WebhookControls(WebhookAgent(hook.url))
    provider.load_report()
    assert provider.sections() == {}


# --- the capability report, from the bridges as real processes ----------------------------------


def test_run_webhook_reports_the_webhooks_sections_and_clears_them_without(
    relay, machine, hook
) -> None:
    person = relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = machine.bridge(hook.url, "--controls")
    event = bridge.wait("controls", agent=agent["handle"])
    assert event["sections"] == sorted(SERVED)
    assert person.listing()["Echo"]["controls"] == {"v": 1, "sections": SERVED}
    assert bridge.terminate() == 0

    again = machine.bridge(hook.url)
    assert again.wait("controls", agent=agent["handle"])["sections"] == []
    assert person.listing()["Echo"]["controls"] is None
    assert again.terminate() == 0
    third = machine.bridge(hook.url)  # nothing reported, nothing to clear: no call at all
    third.wait("start")
    assert third.terminate() == 0
    out, _ = third.output()
    assert '"controls"' not in out


def test_run_model_reports_its_sections_and_no_controls_clears_them(
    relay, machine, tmp_path
) -> None:
    person = relay.person()
    agent = machine.pair(person, "Qwen", "qwen")["agent"]
    system = tmp_path / "soul.md"
    system.write_text("# Qwen\nBe brief.\n")
    bridge = run_model(machine, "http://127.0.0.1:9/v1", "--system", str(system))
    assert bridge.wait("controls", agent=agent["handle"])["sections"] == [
        "channels",
        "model",
        "soul",
    ]
    assert person.listing()["Qwen"]["controls"] == {
        "v": 1,
        "sections": {"soul": "rw", "model": "r", "channels": "r"},
    }
    assert bridge.terminate() == 0
    plain = run_model(machine, "http://127.0.0.1:9/v1")
    assert plain.wait("controls", agent=agent["handle"])["sections"] == ["channels", "model"]
    assert plain.terminate() == 0
    off = run_model(machine, "http://127.0.0.1:9/v1", "--no-controls")
    assert off.wait("controls", agent=agent["handle"])["sections"] == []
    assert person.listing()["Qwen"]["controls"] is None
    assert off.terminate() == 0
