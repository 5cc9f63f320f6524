"""The README's five-minute path, run line by line as written, in a fresh shell with `yui` on
its PATH and nothing else set: the local relay found from its own record (no $YUI_URL), a
webhook agent and a second agent paired to a model on the same machine, each answered by its
own bridge, both online at once (the heartbeat is set far off, so only the bridge's first
report can make them so)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.helpers.cli import ROOT
from tests.helpers.http import free_port
from tests.helpers.model import FakeModel, says
from tests.helpers.relay import LocalRelay

MARK = "<!-- five-minute path"


def readme_lines() -> list[str]:
    """The commands of the README's five-minute blocks, comments dropped, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in text.split(MARK)[1:]:
        body = block.split("```sh\n", 1)[1].split("```", 1)[0]
        for line in body.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command:
                commands.append(command)
    return commands


def test_the_five_minute_path_runs_as_written(relay: LocalRelay, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "relay").symlink_to(relay.home / "relay")  # `yui relay up` finds it running
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "yui").write_text(f'#!/bin/sh\nexec {sys.executable} {ROOT}/bin/yui "$@"\n')
    (shim / "yui").chmod(0o755)
    env = {
        "PATH": f"{shim}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "YUI_HOME": str(home),
        "NO_COLOR": "1",
        "YUI_HEARTBEAT": "600",
        "LANG": "C.UTF-8",
    }
    port = free_port()
    model = FakeModel(says("Leg day: squats."))
    swaps = {
        "yui example-agent": f"yui example-agent --port {port}",
        "127.0.0.1:8787": f"127.0.0.1:{port}",
        "--server ollama": f"--model-url {model.url}",
    }
    codes: list[str] = []
    background: list[subprocess.Popen[str]] = []
    outputs: dict[str, str] = {}
    lines = readme_lines()
    assert lines[0] == "yui relay up" and any("run-model" in line for line in lines)
    try:
        for line in lines:
            command = line
            for old, new in swaps.items():
                command = command.replace(old, new)
            for placeholder, code in zip(("123456", "654321"), codes, strict=False):
                command = command.replace(placeholder, code)
            if command.endswith("&"):
                background.append(
                    subprocess.Popen(
                        ["bash", "-c", f"exec {command[:-1]}"],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        text=True,
                        start_new_session=True,
                    )
                )
                _ready(command, home, port)
                continue
            done = subprocess.run(
                ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr
            outputs[line] = done.stdout
            if "add-agent" in command:
                codes.append(re.search(r"pairing code (\d{6})", done.stdout).group(1))  # type: ignore[union-attr]
        assert f"on {relay.url}" in outputs["yui app signup ann"]  # the relay's own record

        coach = _thread(env, "coach", lambda rows: any(r["sender"] == "agent" for r in rows))
        qwen = _thread(env, "qwen", lambda rows: any(r["sender"] == "agent" for r in rows))
        assert [r["body"] for r in qwen if r["sender"] == "agent"] == ["Leg day: squats."]
        assert len([r for r in coach if r["sender"] == "agent"]) == 1  # the example's, once
        assert "```yui" in next(r["body"] for r in coach if r["sender"] == "agent")
        agents = _wait(lambda: _agents_online(env))
        assert agents == {"coach": "online", "qwen": "online"}
    finally:
        for process in background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
            _, err = process.communicate(timeout=30)
            assert "Traceback" not in err, err
        model.close()


def _yui(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bin" / "yui"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _ready(command: str, home: Path, port: int) -> None:
    """Wait until a command started in the background serves: the example listens, a bridge
    has opened its session (its lock is held)."""
    if "example-agent" in command:
        _wait(
            lambda: (
                subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"]).returncode == 0
            )
        )
    else:
        ref = re.search(r"--agent (\S+)", command).group(1)  # type: ignore[union-attr]
        _wait(lambda: any(
            f"@{ref}" in p.read_text() for p in home.glob("state.json.bridge.*.lock")
        ))  # fmt: skip


def _thread(env: dict[str, str], agent: str, done: Any) -> list[dict[str, Any]]:
    def rows() -> list[dict[str, Any]] | None:
        read = _yui(env, "app", "thread", "--agent", agent, "--json").stdout.splitlines()
        found = [json.loads(line) for line in read]
        return found if done(found) else None

    return _wait(rows)


def _agents_online(env: dict[str, str]) -> dict[str, str] | None:
    listed = {
        a["handle"]: a["presence"]
        for a in map(json.loads, _yui(env, "app", "agents", "--json").stdout.splitlines())
    }
    return listed if set(listed.values()) == {"online"} else None


def _wait(probe: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.3)
