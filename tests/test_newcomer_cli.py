"""A newcomer's command line (issue 19), run as the real `yui`: help and completion that load no
command module, checks that say the rule before anything is sent, `yui app say` naming the
agent it wrote to, a thread a person can read (and follow through a relay restart), the
renamed options with their old spellings, and no styling under NO_COLOR."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from state.errors import ExitStatus
from tests.helpers.bridge import Machine
from tests.helpers.cli import ROOT, yui
from tests.helpers.faultproxy import FaultProxy
from tests.helpers.media import PNG
from tests.helpers.relay import LocalRelay
from yui_cli.main import COMMANDS, cli, short_help

HEAVY = ("requests", "psycopg", "rich", "urllib3", "relay", "bridges")


def _clean(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr


# --- item 11: help and completion import no command ---------------------------------------


def _imported(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`yui ARGS` run with -X importtime: the result, and the top-level packages it loaded."""
    env = {**os.environ, "YUI_HOME": str(home), "NO_COLOR": "1"}
    command = [
        str(ROOT / ".venv" / "bin" / "python"),
        "-X",
        "importtime",
        str(ROOT / "bin" / "yui"),
    ]
    result = subprocess.run([*command, *args], env=env, capture_output=True, text=True, timeout=60)
    names = {
        line.split("|")[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    return result, names


def test_help_lists_every_command_and_loads_none(tmp_path: Path) -> None:
    result, loaded = _imported(tmp_path, "--help")
    assert result.returncode == 0 and not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    listed = result.stdout.split("Commands:")[1]
    for name in COMMANDS:
        command = cli.get_command(click.Context(cli), name)
        assert command is not None
        first_paragraph = " ".join((command.help or "").split("\n\n")[0].split())
        assert COMMANDS[name][1] == first_paragraph  # the table says what the command says
        own = command.get_short_help_str(200)
        assert short_help(name, 200) == own
        assert f"  {name} " in listed and own.split()[0] in listed
    status, loaded = _imported(tmp_path, "status", "--help")
    assert status.returncode == 0 and "--relay URL" in status.stdout
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def _complete(home: Path, words: str) -> list[str]:
    env = {
        "_YUI_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    result = yui(home=home, env=env)
    return result.stdout.splitlines()


def test_tab_completes_commands_options_and_file_names(tmp_path: Path) -> None:
    assert _complete(tmp_path, "yui sta") == ["plain,status"]
    assert "plain,say" in _complete(tmp_path, "yui app s")
    assert _complete(tmp_path, "yui media ") == ["file,"]  # the shell lists the files
    assert "plain,--model-url" in _complete(tmp_path, "yui run-model --mo")


# --- items 6 and 12: say the rule before sending; old spellings still work ------------------


def test_checks_say_the_rule_before_anything_is_sent(relay_env: LocalRelay, tmp_path: Path) -> None:
    home = tmp_path / "me"
    yui("app", "signup", "ann", home=home)
    cases = [
        (
            ("app", "add-agent", "x", "--handle", "Bad Handle!"),
            ExitStatus.ERROR,
            "a handle is 1 to 32 lowercase",
        ),
        (("app", "say", ""), ExitStatus.ERROR, "a message is empty"),
        (("app", "say", "  \n "), ExitStatus.ERROR, "a message is empty"),
        (("app", "reply", "last", ""), ExitStatus.ERROR, "a reply is empty"),
        (
            ("app", "group", "settings", "--max-hops", "9"),
            ExitStatus.USAGE,
            "9 is not in the range 1<=x<=5",
        ),
        (
            ("pair", "123456", "--ref", "bad ref!"),
            ExitStatus.ERROR,
            "a ref is 1 to 64 letters, digits",
        ),
    ]
    for args, status, rule in cases:
        result = yui(*args, home=home, check=False)
        _clean(result)
        assert result.returncode == status, (args, result.stderr)
        assert rule in result.stderr, (args, result.stderr)
    assert yui("app", "agents", "--json", home=home).stdout == ""  # nothing was made


def test_renamed_options_show_the_new_name_and_take_the_old(tmp_path: Path) -> None:
    model = yui("run-model", "--help", home=tmp_path).stdout
    assert "--model-url URL" in model and "--relay URL" in model and "--url" not in model
    pair = yui("pair", "--help", home=tmp_path).stdout
    assert "--relay URL" in pair and "--url" not in pair
    old = yui("run-model", "--url", "ftp://x", "--model", "m", home=tmp_path, check=False)
    _clean(old)
    assert old.returncode == ExitStatus.USAGE and "--model-url" in old.stderr
    relay = yui("app", "signup", "bob", "--url", "notaurl", home=tmp_path, check=False)
    assert relay.returncode == ExitStatus.USAGE and "--relay 'notaurl'" in relay.stderr


# --- item 5: `yui app say` names the agent it wrote to ---------------------------------------


def test_say_names_the_agent_and_warns_when_its_bridge_is_not_running(
    relay_env: LocalRelay, tmp_path: Path
) -> None:
    home = tmp_path / "me"
    yui("app", "signup", "ann", home=home)
    yui("app", "add-agent", "Coach", home=home)
    said = yui("app", "say", "hi", home=home)
    _clean(said)
    row = json.loads(yui("app", "thread", "--json", home=home).stdout)
    assert said.stdout.strip() == f"sent {row['id']} to Coach (@coach)"
    assert "@coach is pending: it reads this once its bridge runs" in said.stderr
    record = json.loads(yui("app", "say", "again", "--json", home=home).stdout)
    assert record["agent"]["handle"] == "coach" and record["body"] == "again"


# --- item 13: a thread a person can read, followed through a relay restart -------------------


def test_thread_shows_pictures_and_reactions_and_follow_rides_out_a_restart(
    relay: LocalRelay, machine: Machine, tmp_path: Path
) -> None:
    proxy = FaultProxy(relay.port)
    machine.url = proxy.url
    try:
        machine.yui("app", "signup", "ann")
        code = json.loads(machine.yui("app", "add-agent", "Coach", "--json").stdout)["code"]
        machine.yui("pair", code, "--ref", "coach")
        picture = tmp_path / "dot.png"
        picture.write_bytes(PNG)
        machine.yui("media", str(picture), "a red dot")
        machine.yui("app", "react", "last", "up")

        human = machine.yui("app", "thread").stdout
        assert "Coach: [picture] a red dot [👍]" in human
        assert "/object/sign/" not in human and "react msg=" not in human
        assert "/object/sign/" in machine.yui("app", "thread", "--links").stdout
        rows = [
            json.loads(line) for line in machine.yui("app", "thread", "--json").stdout.splitlines()
        ]
        assert "/object/sign/" in rows[0]["body"] and rows[1]["kind"] == "event"

        follow = subprocess.Popen(
            [sys.executable, str(ROOT / "bin" / "yui"), "app", "thread", "--follow"],
            env=machine.env(),
            preexec_fn=ctrl_c_as_at_a_terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert "[picture] a red dot" in _line(follow)
            said = json.loads(machine.yui("app", "say", "hi", "--json").stdout)
            assert _line(follow).endswith("you: hi")
            relay.sql("update yui_messages set handled_at = now() where id = %s", (said["id"],))
            assert _line(follow).endswith("you: hi ✓✓")  # the same row, its marks changed

            proxy.down()  # the relay restarts: follow waits for it
            time.sleep(2.5)
            assert follow.poll() is None
            proxy.pass_through()
            machine.yui("app", "say", "back")
            assert _line(follow, timeout=30).endswith("you: back")
        finally:
            follow.send_signal(signal.SIGINT)
            try:
                _, err = follow.communicate(timeout=10)
            finally:
                ended(follow)
        assert "trying again in" in err and "Traceback" not in err
    finally:
        proxy.close()


def ctrl_c_as_at_a_terminal() -> None:
    """A command started from a shell's background (as CI may run the suite) inherits Ctrl-C
    ignored, and Python then never turns SIGINT into KeyboardInterrupt: start it as a terminal
    would, so the test's Ctrl-C is one."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ended(process: subprocess.Popen[str]) -> None:
    """A child the test didn't see end is killed, so a failing test leaves nothing running."""
    if process.poll() is None:
        process.kill()
        process.wait()


def _line(process: subprocess.Popen[str], timeout: float = 20) -> str:
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, "no line within the timeout"
    return process.stdout.readline().rstrip("\n")  # type: ignore[union-attr]


# --- item 14: NO_COLOR means no escape at all; the example's banner once ---------------------


def test_no_color_sends_no_escape_and_the_example_says_where_once(tmp_path: Path) -> None:
    result = yui("status", home=tmp_path, env={"FORCE_COLOR": "1"}, check=False)
    assert result.returncode == ExitStatus.NOT_PAIRED and "\x1b" not in result.stderr
    example = subprocess.Popen(
        [sys.executable, str(ROOT / "bin" / "yui"), "example-agent", "--port", "0"],
        env={**os.environ, "YUI_HOME": str(tmp_path), "NO_COLOR": "1"},
        preexec_fn=ctrl_c_as_at_a_terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert _line(example).startswith("example agent on http://127.0.0.1:")
        example.send_signal(signal.SIGINT)
        rest, _ = example.communicate(timeout=10)
    finally:
        ended(example)
    assert "example agent on" not in rest and "Traceback" not in rest
    assert example.returncode == ExitStatus.INTERRUPTED  # Ctrl-C, as the exit code table says
