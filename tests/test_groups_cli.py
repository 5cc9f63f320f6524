"""`yui app say` mentions and `yui app group …`, end to end against the real relay: the
commands write the rows the app writes, and the relay routes them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.helpers.relay import Host, LocalRelay
from tests.helpers.talk import answer, by_id, queue
from yui_cli.main import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def lines(*args: str) -> list[dict[str, Any]]:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture
def agents(relay_env: LocalRelay) -> dict[str, tuple[dict[str, Any], Host]]:
    """Ria with Coach, Sage and Quill, each paired with its own host."""
    assert run("app", "signup", "ria").exit_code == 0
    made = {}
    for name in ("Coach", "Sage", "Quill"):
        (added,) = lines("app", "add-agent", name)
        made[name.lower()] = (added["agent"], Host.pair(relay_env, added["code"], name.lower()))
    return made


def test_say_with_an_at_makes_a_mention(relay_env: LocalRelay, agents: dict) -> None:
    coach, sage = agents["coach"][0], agents["sage"][0]
    (two,) = lines("app", "add-agent", "Sage Two")
    (row,) = lines("app", "say", "@Sage Two, does this fit?", "--agent", "coach")
    assert row["body"] == "[yui] mention to=sage-two\n@Sage Two, does this fit?"
    assert row["meta"]["mention"]["to"] == two["agent"]["id"]  # the longest name that fits
    assert row["agent_id"] == coach["id"] and row["handled_at"]
    (row,) = lines("app", "say", "ask @sage", "--agent", "coach")
    assert row["meta"]["mention"]["to"] == sage["id"]
    (plain,) = lines("app", "say", "@Coach hi, and @nobody", "--agent", "coach")
    assert plain["meta"] == {} and not plain["handled_at"]  # its own agent, and no one
    copy = queue(agents["sage"][1], sage)[-1]
    assert copy["body"].startswith("[yui] mention from=coach by=person")
    human = run("app", "thread", "--agent", "coach")
    assert "you: [yui] mention to=sage" in human.stdout


def test_a_group_from_the_command_line(relay_env: LocalRelay, agents: dict) -> None:
    (coach, hc), (sage, hs), (quill, hq) = agents["coach"], agents["sage"], agents["quill"]
    (group,) = lines(
        "app", "group", "create", "Race week", "--with", "sage,quill", "--lead", "coach"
    )
    assert group["title"] == "Race week" and group["lead"] == coach["id"]
    assert [a["handle"] for a in group["members"]] == ["coach", "sage", "quill"]
    (listed,) = lines("app", "group", "list")
    assert listed["id"] == group["id"]

    (msg,) = lines("app", "group", "say", "@Sage plan the wind-downs")
    assert msg["agent_id"] == sage["id"] and msg["meta"]["group"]["words"] == (
        "@Sage plan the wind-downs"
    )
    (both,) = lines("app", "group", "say", "and you two?", "--to", "sage,quill", "-g", "race week")
    assert both["meta"]["group"]["to"] == [sage["id"], quill["id"]]
    (lead,) = lines("app", "group", "say", "anyone?")
    assert lead["agent_id"] == coach["id"]

    (settings,) = lines("app", "group", "settings", "--max-hops", "1", "--max-turns", "4")
    assert (settings["max_hops"], settings["max_turns"]) == (1, 4)
    bad = run("app", "group", "settings", "--max-hops", "9")
    assert bad.exit_code == 2 and "1<=x<=5" in bad.stderr  # the rule, before anything is sent
    none_held = run("app", "group", "continue")
    assert none_held.exit_code == 1 and "nothing is held" in none_held.stderr

    answer(hs, sage, "Four minutes a night. @quill cards?", [msg["id"]], mentions=["quill"])
    ask = queue(hq, quill)[-1]
    answer(hq, quill, "Cards done. @coach check?", [ask["id"]], mentions=["coach"])  # held
    (tapped,) = lines("app", "group", "continue")
    guard_id = tapped["meta"]["group"]["guard"]
    assert by_id(relay_env, guard_id)["meta"]["group"]["guard"]["state"] == "continued"
    assert queue(hc, coach)[-1]["meta"]["group"]["root"] == tapped["id"]
    (stopped,) = lines("app", "group", "stop")
    assert stopped["meta"]["group"] == {"thread": group["id"], "control": "stop"}

    rows = lines("app", "group", "thread")
    assert {r["thread_id"] for r in rows} == {group["id"]}
    human = run("app", "group", "thread")
    assert human.exit_code == 0
    out = human.stdout
    assert "you → Sage: @Sage plan the wind-downs" in out
    assert "you → Sage, Quill: and you two?" in out
    assert '── Sage → Quill · "Four minutes a night. @quill cards?" ──' in out
    assert "Quill wants to hand this to Coach" in out and "[continued]" in out
    assert "you: (let it)" in out and "you: (stop)" in out
    assert "Race week: Coach, Sage, Quill (lead Coach)" in human.stderr


def test_group_create_needs_two_agents(agents: dict) -> None:
    result = run("app", "group", "create", "Solo", "--with", "coach")
    assert result.exit_code == 1 and "two agents or more" in result.stderr
    missing = run("app", "group", "say", "hi", "--group", "nope")
    assert missing.exit_code == 1 and "no group" in missing.stderr
