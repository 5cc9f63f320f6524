"""The command line's shape, with no relay: rows printed once (a table on a terminal or with
--table, JSON lines in a pipe or with --json), `yui app controls` taking its options on each
command, shared options reading the same everywhere, and every command explaining itself."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from yui_cli import options
from yui_cli.main import cli
from yui_cli.output import emit_rows

ROOT = Path(__file__).resolve().parent.parent


def yui(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


# --- the row helper -------------------------------------------------------------------------

RECORDS: list[dict[str, Any]] = [
    {"name": "Coach", "handle": "coach", "host": None},
    {"name": "Sage Two", "handle": "sage-two", "host": "desk\nlaptop"},
]
COLUMNS: dict[str, Any] = {"NAME": "name", "HANDLE": lambda r: "@" + r["handle"], "HOST": "host"}
TABLE = [
    "NAME      HANDLE     HOST",
    "Coach     @coach     -",
    "Sage Two  @sage-two  desk laptop",
]


@click.command()
@click.option("--title")
@options.json_option
@options.table_option
def rows_command(title: str | None, json_: bool, table_: bool) -> None:
    emit_rows(RECORDS, COLUMNS, json_=json_, table_=table_, title=title)


def test_rows_are_an_aligned_table_with_headers() -> None:
    result = CliRunner().invoke(rows_command, ["--table"], catch_exceptions=False)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.splitlines() == TABLE  # a missing value is "-", a line break a space


def test_rows_are_json_lines_in_a_pipe_and_with_json() -> None:
    for args in ([], ["--json", "--title", "2 agents"], ["--json", "--table"]):
        result = CliRunner().invoke(rows_command, args)
        assert result.exit_code == 0
        assert [json.loads(line) for line in result.stdout.splitlines()] == RECORDS  # no title


def test_a_title_goes_above_the_table_and_headers_stay_without_rows() -> None:
    result = CliRunner().invoke(rows_command, ["--title", "2 agents", "--table"])
    assert result.stdout.splitlines() == ["2 agents", *TABLE]
    empty = CliRunner().invoke(
        click.command()(lambda: emit_rows([], COLUMNS, json_=False, table_=True))
    )
    assert empty.stdout == "NAME  HANDLE  HOST\n"


def test_rows_are_a_table_on_a_terminal() -> None:
    """On a terminal the table needs no --table (in a pipe, above, it does)."""
    script = (
        "import json, sys\n"
        "from yui_cli.output import emit_rows\n"
        "emit_rows(json.loads(sys.argv[1]), {'NAME': 'name', 'HOST': 'host'}, json_=False)\n"
    )
    parent, child = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, json.dumps(RECORDS)],
            stdout=child,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            timeout=60,
        )
        os.close(child)
        assert done.returncode == 0, done.stderr
        shown = os.read(parent, 65536).decode()
    finally:
        os.close(parent)
    assert shown.replace("\r\n", "\n").splitlines() == [
        "NAME      HOST",
        "Coach     -",
        "Sage Two  desk laptop",
    ]


# --- `yui app controls`: --as, --agent, --json (and --timeout) on each command --------------


@dataclass
class Asked:
    """What a fake person's app was asked."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)


ITEM = {"id": "SOUL.md", "title": "Scout", "text": "# Scout\n", "read_only": False}
ANSWERS: dict[str, dict[str, Any]] = {
    "list": {
        "ok": True,
        "items": [
            {"id": "SOUL.md", "title": "Scout", "rev": "r1", "read_only": True},
            {"id": "notes.md", "rev": "r2"},
        ],
    },
    "get": {"ok": True, "rev": "r1", "item": ITEM},
    "put": {"ok": True, "rev": "r2", "item": ITEM},
    "act": {"ok": True, "rev": "r3", "item": {"id": "morning", "read_only": False}},
    "delete": {"ok": True, "deleted": True, "id": "m1"},
}


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[Asked]:
    """`yui app controls` talking to a fake person's app, which records who asked what."""
    from people import person

    record = Asked(answers=dict(ANSWERS))

    class FakeApp:
        def __init__(self, as_: str | None) -> None:
            self.as_ = as_

        def controls_report(self, agent: str | None) -> dict[str, Any]:
            record.calls.append({"as_": self.as_, "agent": agent, "op": "report"})
            return {"v": 1, "sections": {"soul": "rw"}}

        def control(
            self,
            op: str,
            section: str,
            item_id: str | None = None,
            *,
            agent: str | None = None,
            timeout: float = 99.0,
            **fields: Any,
        ) -> dict[str, Any]:
            record.calls.append(
                {"as_": self.as_, "agent": agent, "op": op, "timeout": timeout, **fields}
            )
            return {**record.answers[op], "request": "row-1"}

    monkeypatch.setattr(person, "PersonApp", FakeApp)
    yield record


EACH_COMMAND = [
    ["report"],
    ["list", "soul"],
    ["get", "soul", "SOUL.md"],
    ["put", "soul", "SOUL.md", "--text", "# Scout\n", "--rev", "r1"],
    ["act", "schedules", "morning", "pause"],
    ["delete", "memory", "m1", "--yes", "--rev", "r1"],
]


@pytest.mark.parametrize("args", EACH_COMMAND, ids=lambda args: args[0])
def test_each_controls_command_takes_as_agent_and_json(asked: Asked, args: list[str]) -> None:
    result = yui("app", "controls", *args, "--as", "pat", "--agent", "coach", "--json")
    assert result.exit_code == 0, result.stderr
    (answer,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert answer.get("ok", True) and ("controls" in answer) == (args[0] == "report")
    assert [(c["as_"], c["agent"], c["op"]) for c in asked.calls] == [("pat", "coach", args[0])]


@pytest.mark.parametrize("args", EACH_COMMAND[1:], ids=lambda args: args[0])
def test_each_request_takes_its_own_timeout(asked: Asked, args: list[str]) -> None:
    assert yui("app", "controls", *args, "--timeout", "2.5").exit_code == 0
    assert [c["timeout"] for c in asked.calls] == [2.5]
    asked.calls.clear()
    assert yui("app", "controls", *args).exit_code == 0
    assert [c["timeout"] for c in asked.calls] == [options.CONTROLS_TIMEOUT]


def test_the_group_still_takes_them_and_the_command_wins(asked: Asked) -> None:
    group = ["--as", "old", "--agent", "alpha", "--timeout", "1", "--json", "--protocol", "2"]
    result = yui("app", "controls", *group, "list", "soul", "--agent", "coach", "--timeout", "3")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["items"][0]["id"] == "SOUL.md"
    (call,) = asked.calls
    assert (call["as_"], call["agent"], call["timeout"], call["v"]) == ("old", "coach", 3.0, 2)


def test_a_list_reads_as_a_table_and_other_answers_as_lines(asked: Asked) -> None:
    assert [
        json.loads(line)["id"]
        for line in yui("app", "controls", "list", "soul").stdout.split("\n")[:-1]
    ] == ["SOUL.md", "notes.md"]  # in a pipe, the items as JSON lines
    listed = yui("app", "controls", "list", "soul", "--table")
    assert listed.stdout.splitlines() == [
        "ID        TITLE  REV",
        "SOUL.md   Scout  r1   read only",
        "notes.md         r2",
    ]
    got = yui("app", "controls", "get", "soul", "SOUL.md")
    assert got.stdout.splitlines()[:2] == ["SOUL.md  rev r1", "# Scout"]
    assert yui("app", "controls", "report").stdout == "soul (rw)\n"


def test_a_refusal_exits_1_with_the_hosts_words(asked: Asked) -> None:
    asked.answers["delete"] = {"ok": False, "error": "confirm", "message": "Say yes first."}
    human = yui("app", "controls", "delete", "memory", "m1", "--agent", "coach")
    assert human.exit_code == 1 and human.stdout == ""
    assert "Say yes first." in human.stderr and "confirm: add --yes" in human.stderr
    machine = yui("app", "controls", "delete", "memory", "m1", "--json")
    assert machine.exit_code == 1 and json.loads(machine.stdout)["error"] == "confirm"


# --- every command explains itself, and a shared option reads the same everywhere -----------


def walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # `yui` loads a command's module when it is asked for
        command = group.get_command(ctx, name)
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from walk(command, (*path, name))


def test_every_command_and_option_explains_itself() -> None:
    for path, command in walk(cli):
        result = yui(*path, "--help")
        assert result.exit_code == 0 and len(result.stdout) > 80, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, (path, param.opts)


def declared(option: Any) -> list[click.Option]:
    """The click.Options a shared decorator in yui_cli.options adds."""
    return option(lambda: None).__click_params__


SHARED = [
    options.json_option,
    options.state_option,
    options.host_url_option,
    options.url_option,
    options.host_agent_option,
    options.agent_option,
    options.as_option,
    options.group_option,
    options.controls_timeout_option,
    options.rev_option,
    options.dir_option,
    options.poll_options,
    options.bridge_agents_option,
    options.bridge_relay_option,
]
ANOTHER_MEANING = {
    (("run-webhook",), "--timeout"),  # what the agent gets per turn
    (("run-a2a",), "--timeout"),  # how long the agent may stay silent
}


def test_a_shared_option_is_one_of_its_declarations_wherever_it_appears() -> None:
    helps: dict[str, set[str | None]] = {}
    for option in (o for shared in SHARED for o in declared(shared)):
        helps.setdefault(option.opts[0], set()).add(option.help)
    seen = set()
    for path, command in walk(cli):
        for param in command.params:
            flag = param.opts[0]
            if flag in helps and (path, flag) not in ANOTHER_MEANING:
                assert isinstance(param, click.Option) and param.help in helps[flag], (path, flag)
                seen.add(param.help)
    assert seen == set().union(*helps.values())  # and each declaration is used
