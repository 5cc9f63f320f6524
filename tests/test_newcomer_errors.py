"""A newcomer's common mistakes, run as the real `yui`: each is one line naming the problem and
exit 1 (a runtime failure), 2 (a usage mistake) or 4 (a removed host), never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from state.errors import ExitStatus
from tests.helpers.bridge import Machine
from tests.helpers.cli import ROOT, yui

# --- issue 19, item 3: tracebacks on common mistakes ----------------------------------------


def _no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def test_a_webhook_without_its_scheme_is_a_usage_error(tmp_path: Path) -> None:
    result = yui("run-webhook", "--webhook", "127.0.0.1:8787", home=tmp_path, check=False)
    _no_traceback(result)
    assert result.returncode == ExitStatus.USAGE
    assert "--webhook" in result.stderr and "http://127.0.0.1:8787" in result.stderr


def test_example_agent_port_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    result = yui("example-agent", "--port", "99999", home=tmp_path, check=False)
    _no_traceback(result)
    assert result.returncode == ExitStatus.USAGE and "99999" in result.stderr


def test_example_agent_on_a_busy_port_says_so_and_never_that_it_runs(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = yui("example-agent", "--port", str(port), home=tmp_path, check=False, timeout=30)
    _no_traceback(result)
    assert result.returncode == ExitStatus.ERROR
    assert f"can't listen on 127.0.0.1:{port}" in result.stderr
    assert "example agent on" not in result.stdout + result.stderr


def test_lint_refuses_a_binary_file(tmp_path: Path) -> None:
    nul = tmp_path / "zeros.bin"
    nul.write_bytes(b"\x00" * 64 + b"\n```yui\nchoose x\n```\n")  # valid UTF-8, still binary
    result = yui("lint", str(nul), home=tmp_path, check=False)
    _no_traceback(result)
    assert result.returncode == ExitStatus.ERROR and "is a binary file" in result.stderr
    not_utf8 = tmp_path / "latin1.txt"
    not_utf8.write_bytes(b"caf\xe9\n")
    result = yui("lint", str(not_utf8), home=tmp_path, check=False)
    _no_traceback(result)
    assert result.returncode == ExitStatus.ERROR and "is not UTF-8 text" in result.stderr


def _yui_bytes(
    machine: Machine, *args: str | bytes, stdin: bytes = b"", **extra: str
) -> subprocess.CompletedProcess[str]:
    """`yui` with arguments or stdin that may not be UTF-8, as a shell passes them."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "yui"), *args],
        env=machine.env(**extra),
        input=stdin,
        capture_output=True,
        timeout=120,
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode(errors="replace"),
        result.stderr.decode(errors="replace"),
    )


def test_send_refuses_bytes_that_are_not_utf8(relay, machine) -> None:
    person = relay.person()
    coach = machine.pair(person, "Coach", "coach")["agent"]
    for io_encoding in ("utf-8:strict", "utf-8:surrogateescape"):  # whatever the locale gives
        piped = _yui_bytes(
            machine, "send", "-", stdin=b"fine\ncaf\xe9\n", PYTHONIOENCODING=io_encoding
        )
        _no_traceback(piped)
        assert piped.returncode == ExitStatus.ERROR
        assert "line 2 is not UTF-8 text" in piped.stderr
    argv = _yui_bytes(machine, "send", b"caf\xe9")  # argv arrives surrogate-escaped
    _no_traceback(argv)
    assert argv.returncode == ExitStatus.ERROR and "is not UTF-8 text" in argv.stderr
    assert person.thread(coach) == []  # nothing half-sent


# --- item 7: a removed host says so, and how to pair again ----------------------------------


def test_a_removed_host_is_told_to_pair_again(relay, machine) -> None:
    person = relay.person()
    machine.pair(person, "Coach", "coach")
    host_id = machine.state()["connector"]["id"]
    relay.fn("yui-agents", {"action": "connector_revoke", "id": host_id}, person.token)
    for args in (("status",), ("send", "hi")):
        result = machine.yui(*args, check=False)
        _no_traceback(result)
        assert result.returncode == ExitStatus.REFUSED, (args, result.stderr)
        assert "host was removed in the app, or its token is wrong" in result.stderr
        assert "yui pair CODE" in result.stderr


# --- item 8: a malformed relay URL is a usage error, not "unreachable" ----------------------


def test_a_malformed_relay_url_is_a_usage_error(tmp_path: Path) -> None:
    cases = [
        (("pair", "123456", "--url", "127.0.0.1:47311"), {}, "--relay '127.0.0.1:47311'"),
        (("app", "signup", "bob", "--url", "notaurl"), {}, "--relay 'notaurl'"),
        (("status", "--url", "http://127.0.0.1:port"), {}, "--relay 'http://127.0.0.1:port'"),
        (("pair", "123456"), {"YUI_URL": "127.0.0.1:47311"}, "$YUI_URL '127.0.0.1:47311'"),
        (("app", "signup", "bob"), {"YUI_URL": "notaurl"}, "$YUI_URL 'notaurl'"),
    ]
    for args, env, named in cases:
        result = yui(*args, home=tmp_path, env=env, check=False, timeout=30)
        _no_traceback(result)
        assert result.returncode == ExitStatus.USAGE, (args, env, result.stderr)
        assert f"{named} is not a relay URL" in result.stderr, result.stderr
        assert "http://127.0.0.1:54321" in result.stderr
