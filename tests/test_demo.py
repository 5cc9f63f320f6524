"""`make demo` run as a new user runs it, then what it leaves: only the relay, which
`yui relay list` shows (still, once its `$YUI_HOME` is deleted) and `yui relay destroy` removes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from relay.cluster import register_dir, registered_keys
from tests.helpers.cli import ROOT, yui
from tests.helpers.http import free_port

pytestmark = pytest.mark.integration

AGENT_PORT = 8787  # the demo's example agent, as a new user runs it


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def processes_of(home: Path) -> list[str]:
    """Every process whose environment names this `$YUI_HOME`: what the demo started."""
    wanted = f"YUI_HOME={home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        try:
            if wanted in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def test_make_demo_ends_what_it_started_and_the_relay_it_leaves_can_be_destroyed(
    tmp_path: Path,
) -> None:
    assert port_free(AGENT_PORT), f"port {AGENT_PORT} is taken: the demo's agent can't run"
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUI_")}
    env.update(YUI_HOME=str(home), YUI_URL=f"http://127.0.0.1:{free_port()}", NO_COLOR="1")
    # What it makes lies under tmp_path: tests/conftest.py removes it if this fails halfway.
    # As `out=$(make demo)` does: it returns only once nothing holds the demo's stdout.
    demo = subprocess.run(
        ["make", "-s", "demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "Walk it is." in demo.stdout and "Traceback" not in demo.stderr
    ending = demo.stderr[demo.stderr.index("== done") :]
    assert "yui relay down" in ending and "yui relay destroy" in ending
    assert "pipx install ." in ending and "uv tool install ." in ending

    assert port_free(AGENT_PORT)  # the example agent is gone, and the bridge with it
    status = json.loads(yui("relay", "status", "--json", home=home).stdout)
    left = processes_of(home)
    assert [p for p in left if "relay.gateway" in p] and not [
        p for p in left if "example-agent" in p or "run-webhook" in p
    ], left

    # A temporary home deleted with its relay running: the cluster is not lost.
    subprocess.run(["rm", "-rf", str(home)], check=True)
    listed = [json.loads(line) for line in yui("relay", "list", home=home).stdout.splitlines()]
    ours = [e for e in listed if e["folder"] == str(Path(status["folder"]).resolve())]
    assert len(ours) == 1 and not ours[0]["folder_exists"] and ours[0]["size"] > 1_000_000
    key = ours[0]["key"]

    unasked = yui("relay", "destroy", key, home=home, check=False)
    assert unasked.returncode == 2 and "needs --yes" in unasked.stderr
    assert "4 messages" in unasked.stderr  # what goes is named: hi, the menu, tap, answer
    destroyed = yui("relay", "destroy", key, "--yes", "--json", home=home)
    assert json.loads(destroyed.stdout)["key"] == key
    assert key not in registered_keys() and not (register_dir() / key).exists()
    assert processes_of(home) == []  # gateway and PostgreSQL stopped
