"""`yui app`: the person's side, end to end against the real relay."""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from tests.helpers.cli import ROOT
from tests.helpers.relay import Host, LocalRelay
from yui_cli.main import cli


def yui(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def lines(result: Result) -> list[dict]:
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture
def alice(relay_env: LocalRelay) -> str:
    result = yui("app", "signup", "alice", "--json")
    assert result.exit_code == 0, result.stderr
    return lines(result)[0]["user_id"]


def test_signup_keeps_the_person_in_a_private_file(alice: str) -> None:
    app_json = Path(os.environ["YUI_HOME"]) / "app.json"
    assert stat.S_IMODE(app_json.stat().st_mode) == 0o600
    assert alice in app_json.read_text()
    again = yui("app", "signup", "alice")
    assert again.exit_code == 1 and "already signed up" in again.stderr


def test_add_agent_prints_its_pairing_code(alice: str) -> None:
    result = yui("app", "add-agent", "Coach", "--handle", "coach", "--json")
    (added,) = lines(result)
    assert len(added["code"]) == 6 and added["code"].isdigit()
    assert added["agent"]["handle"] == "coach"
    assert "yui pair " + added["code"] in result.stderr
    human = yui("app", "add-agent", "Second Coach")
    assert human.exit_code == 0
    assert human.stdout.startswith("Second Coach (@second-coach): pairing code ")


def test_say_and_read_the_thread(alice: str) -> None:
    yui("app", "add-agent", "Coach")
    sent = lines(yui("app", "say", "hello there", "--json"))[0]
    assert sent["sender"] == "user" and sent["body"] == "hello there"
    thread = lines(yui("app", "thread", "--json"))
    assert [(r["id"], r["body"]) for r in thread] == [(sent["id"], "hello there")]
    human = yui("app", "thread")
    assert human.exit_code == 0 and "you: hello there" in human.stdout


@pytest.mark.parametrize(
    ("args", "body"),
    [
        (["hiit", "timer", "done", "rounds=8"], "[yui] hiit timer done rounds=8"),
        (["n1", "ask", "answer=Not now"], '[yui] n1 ask answer="Not now"'),
        (["n3", "pick", "picked=Dumbbells|Bands"], "[yui] n3 pick picked=Dumbbells|Bands"),
        (
            ["n1", "form", "form.mood=4", "form.notes=slept badly"],
            '[yui] n1 form form.mood=4 form.notes="slept badly"',
        ),
    ],
)
def test_tap_writes_the_seeds_event_lines(alice: str, args: list[str], body: str) -> None:
    yui("app", "add-agent", "Coach")
    row = lines(yui("app", "tap", *args, "--echo", "ok", "--json"))[0]
    assert row["kind"] == "event" and row["body"] == body
    assert row["meta"]["id"] == args[0] and row["meta"]["preset"] == args[1]
    assert row["meta"]["echo"] == "ok"


def test_tap_meta_carries_the_structured_event(alice: str) -> None:
    yui("app", "add-agent", "Coach")
    row = lines(yui("app", "tap", "n1", "choose", "choice=Walk", "--echo", "Walk", "--json"))[0]
    assert row["meta"] == {
        "id": "n1",
        "preset": "choose",
        "value": {"choice": "Walk"},
        "echo": "Walk",
    }
    assert row["body"] == "[yui] n1 choose choice=Walk"


def test_agents_show_presence_and_hosts_can_be_removed(alice: str, relay_env: LocalRelay) -> None:
    added = lines(yui("app", "add-agent", "Coach", "--json"))[0]
    (agent,) = lines(yui("app", "agents", "--json"))
    assert agent["presence"] == "pending"
    host = Host.pair(relay_env, added["code"], "coach")
    (agent,) = lines(yui("app", "agents", "--json"))
    assert agent["presence"] == "online" and agent["connector_name"] == "Test host"
    (listed,) = lines(yui("app", "hosts", "--json"))
    assert listed["id"] == host.connector["id"] and listed["revoked_at"] is None

    removed = yui("app", "remove-host", host.connector["id"])
    assert removed.exit_code == 0
    assert host.call("session").status_code == 401
    (agent,) = lines(yui("app", "agents", "--json"))
    assert agent["presence"] == "offline"
    unknown = yui("app", "remove-host", "00000000-0000-0000-0000-000000000000")
    assert unknown.exit_code == 1 and "no host" in unknown.stderr


def test_two_people_share_a_relay_without_seeing_each_other(alice: str) -> None:
    yui("app", "add-agent", "Coach", "--handle", "coach")
    assert yui("app", "signup", "bob").exit_code == 0
    assert lines(yui("app", "agents", "--as", "bob", "--json")) == []
    refused = yui("app", "say", "hi", "--as", "bob", "--agent", "coach")
    assert refused.exit_code == 1 and "no agents yet" in refused.stderr
    yui("app", "add-agent", "Bobbot", "--as", "bob")
    wrong = yui("app", "say", "hi", "--as", "bob", "--agent", "coach")
    assert wrong.exit_code == 1 and "no agent 'coach'" in wrong.stderr
    assert yui("app", "say", "for coach", "--as", "alice", "--agent", "coach").exit_code == 0
    unknown = yui("app", "agents", "--as", "carol")
    assert unknown.exit_code == 1 and "no person named 'carol'" in unknown.stderr


def test_tap_rejects_malformed_values(alice: str) -> None:
    yui("app", "add-agent", "Coach")
    bad = yui("app", "tap", "n1", "choose", "=Walk")
    assert bad.exit_code == 1 and bad.stderr.startswith("Error:")


def test_every_command_explains_itself() -> None:
    for group in ("app", "relay"):
        names = cli.get_command(click.Context(cli), group).commands  # type: ignore[union-attr]
        for name in names:
            result = yui(group, name, "--help")
            assert result.exit_code == 0 and len(result.stdout) > 80, (group, name)


def test_thread_follow_prints_rows_as_they_land(alice: str, relay_env: LocalRelay) -> None:
    yui("app", "add-agent", "Coach")
    first = lines(yui("app", "say", "before following", "--json"))[0]
    follower = subprocess.Popen(
        [sys.executable, str(ROOT / "bin" / "yui"), "app", "thread", "--follow", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert json.loads(_read_line(follower))["id"] == first["id"]
        later = lines(yui("app", "say", "while following", "--json"))[0]
        assert json.loads(_read_line(follower))["id"] == later["id"]
    finally:
        follower.kill()
        follower.communicate(timeout=10)  # waits, and closes the pipes


def _read_line(process: subprocess.Popen[str], timeout: float = 20) -> str:
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, "no line within the timeout"
    return process.stdout.readline()  # type: ignore[union-attr]


def test_notifications_show_what_the_phones_were_sent(alice: str, relay_env: LocalRelay) -> None:
    from people.person import PersonApp

    added = lines(yui("app", "add-agent", "Coach", "--json"))[0]
    token = PersonApp().token()
    phone = relay_env.fn(
        "yui-push",
        {"action": "register", "token": "ab" * 32, "environment": "sandbox", "name": "test phone"},
        token,
    )
    assert phone.status_code == 200, phone.text
    host = Host.pair(relay_env, added["code"], "coach")
    sent = host.reply(added["agent"], 'Here is your plan\n```yui\nask "Go?"\n```')
    assert sent.status_code == 201
    reply_id = relay_env.sql(
        "select id::text from yui_messages where agent_id = %s", (added["agent"]["id"],)
    )[0][0]
    pushed = relay_env.fn("yui-push", {"action": "notify", "message_id": reply_id}, host.token)
    assert pushed.status_code == 200 and pushed.json()["delivered"] == 1
    (shown,) = lines(yui("app", "notifications", "--json"))
    assert shown["message_id"] == reply_id and shown["title"] == "Coach"
    assert shown["body"] == "Here is your plan" and shown["status"] == "sunk"
    assert "Coach: Here is your plan [sunk]" in yui("app", "notifications", "--table").stdout
