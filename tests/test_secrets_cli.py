"""No secret on a command line, where every local user reads it in `ps`: the webhook secret
comes from $YUI_WEBHOOK_SECRET or `--secret-file`; `--secret VALUE` is a usage error that
names both; a secret file that is unreadable, empty or open to other users is refused."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from standardwebhooks.webhooks import Webhook

from state.errors import ExitStatus
from tests.helpers.bridge import FakeWebhook, Machine
from tests.helpers.cli import yui
from yui_cli.bridge_cmd import webhook_secret
from yui_cli.main import cli

SECRET = "whsec-file-" + "k" * 24


def secret_file(folder: Path, text: str, mode: int = 0o600) -> Path:
    path = folder / "webhook.secret"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("flag", [["--secret", SECRET], [f"--secret={SECRET}"]])
def test_a_secret_on_the_command_line_is_a_usage_error(tmp_path, flag) -> None:
    result = yui(
        "run-webhook", "--webhook", "http://127.0.0.1:9/", *flag, home=tmp_path, check=False
    )
    assert result.returncode == ExitStatus.USAGE
    (line,) = result.stderr.splitlines()  # one line, and nothing on stdout
    assert "$YUI_WEBHOOK_SECRET" in line and "--secret-file" in line
    assert SECRET not in result.stderr and result.stdout == ""


def test_help_shows_only_the_safe_ways() -> None:
    shown = CliRunner().invoke(cli, ["run-webhook", "--help"]).stdout
    assert "--secret-file PATH" in shown and "$YUI_WEBHOOK_SECRET" in shown
    assert "--secret S" not in shown and "--secret TEXT" not in shown


@pytest.mark.parametrize(
    ("text", "mode", "says"),
    [
        (None, 0o600, "can't read"),
        ("\n", 0o600, "is empty"),
        (SECRET + "\n", 0o640, "chmod 600"),
        (SECRET + "\n", 0o604, "chmod 600"),
    ],
    ids=["missing", "empty", "group-readable", "world-readable"],
)
def test_a_secret_file_that_cant_be_trusted_is_refused(tmp_path, text, mode, says) -> None:
    path = tmp_path / "nowhere.secret" if text is None else secret_file(tmp_path, text, mode)
    args = ["run-webhook", "--webhook", "http://127.0.0.1:9/", "--secret-file", str(path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == ExitStatus.ERROR, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: ") and str(path) in line and says in line
    assert SECRET not in result.stderr and "Traceback" not in result.stderr


def test_the_file_is_read_once_its_newline_stripped_and_it_wins(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("YUI_WEBHOOK_SECRET", "from-the-environment")
    path = secret_file(tmp_path, SECRET + "\r\n")
    assert webhook_secret(path) == SECRET
    assert webhook_secret(None) == "from-the-environment"
    monkeypatch.delenv("YUI_WEBHOOK_SECRET")
    assert webhook_secret(None) is None


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_secret_file_signs_every_post_end_to_end(relay, machine: Machine, tmp_path) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    hook = FakeWebhook()
    path = secret_file(tmp_path, SECRET + "\n")
    bridge = machine.bridge(hook.url, "--secret-file", str(path))
    bridge.wait("start")
    assert SECRET not in cmdline(bridge.process.pid)
    assert person.say(agent, "hi").status_code == 201
    (call,) = hook.wait_calls(1)
    stamp = call.headers["x-yui-timestamp"]
    mac = hmac.new(SECRET.encode(), stamp.encode() + b"." + call.raw, hashlib.sha256)
    assert call.headers["x-yui-signature"] == "sha256=" + mac.hexdigest()
    Webhook(SECRET.encode()).verify(call.raw, call.headers)
    bridge.wait("ack")
    bridge.terminate()
    out, err = bridge.output()
    assert SECRET not in out + err
    hook.close()


def test_the_environments_secret_signs_and_stays_off_the_command_line(relay, machine) -> None:
    secret = "env-secret-" + os.urandom(8).hex()
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    hook = FakeWebhook()
    bridge = machine.bridge(hook.url, YUI_WEBHOOK_SECRET=secret)
    bridge.wait("start")
    assert secret not in cmdline(bridge.process.pid)
    assert person.say(agent, "hi").status_code == 201
    (call,) = hook.wait_calls(1)
    stamp = call.headers["x-yui-timestamp"]
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + call.raw, hashlib.sha256)
    assert call.headers["x-yui-signature"] == "sha256=" + mac.hexdigest()
    hook.close()
