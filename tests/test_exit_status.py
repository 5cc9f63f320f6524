"""The exit codes the README documents, as a script or systemd sees them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from state.errors import ExitStatus
from tests.helpers.relay import LocalRelay
from yui_cli.main import cli


def run(*args: str) -> int:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False).exit_code


def test_documented_values() -> None:
    assert [int(s) for s in ExitStatus] == [0, 1, 2, 3, 4, 5, 6, 75, 130]


def test_usage_errors_are_2() -> None:
    assert run("app", "say") == ExitStatus.USAGE
    assert run("no-such-command") == ExitStatus.USAGE


def test_an_unreachable_relay_is_75(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUI_SERVICE_KEY", "anything")
    assert run("app", "signup", "x", "--url", "http://127.0.0.1:9") == ExitStatus.UNREACHABLE


def test_a_refusal_is_4(relay_env: LocalRelay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUI_SERVICE_KEY", "not-a-key")
    assert run("app", "signup", "x") == ExitStatus.REFUSED


def test_a_suspended_account_is_5(relay_env: LocalRelay) -> None:
    assert run("app", "signup", "suspended") == 0
    assert run("app", "add-agent", "Bot") == 0
    user_id = relay_env.sql("select id from yui_users order by created_at desc limit 1")[0][0]
    relay_env.sql("select yui_suspend('user', %s, true)", (user_id,))
    try:
        assert run("app", "say", "hi") == ExitStatus.SUSPENDED
    finally:
        relay_env.sql("select yui_suspend('user', %s, false)", (user_id,))


def test_bad_input_is_1(relay_env: LocalRelay) -> None:
    assert run("app", "agents", "--as", "nobody") == ExitStatus.ERROR


def test_version_needs_no_install() -> None:
    """`bin/yui` runs from a checkout, where no package metadata exists."""
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.output == "yui, version 0.1.0\n"
