"""`yui relay up | down | status | migrate`, run as real processes: idempotent, private files,
data that survives a restart."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from relay.cluster import cluster_for
from tests.helpers.cli import ROOT, yui
from tests.helpers.http import free_port

# Each test runs a relay of its own (PostgreSQL included) in its own home, through none of the
# fixtures conftest marks by: say so here.
pytestmark = pytest.mark.integration


def status(home: Path) -> dict:
    """The status, whatever it is (a stopped relay's exits 75: tests/test_relay_ops.py)."""
    return json.loads(yui("relay", "status", "--json", home=home, check=False).stdout)


@pytest.fixture
def home(tmp_path: Path):
    yield tmp_path / "yui"
    yui("relay", "down", home=tmp_path / "yui", check=False)
    cluster_for(tmp_path / "yui" / "relay").remove()


def test_lifecycle(home: Path) -> None:
    port = free_port()
    first = json.loads(yui("relay", "up", "--port", str(port), "--json", home=home).stdout)
    assert first["gateway"] == "running" and first["postgres"] == "running"
    assert first["url"] == f"http://127.0.0.1:{port}"
    assert first["migrations"] >= 6 and first["guide_version"].startswith("v1+")
    folder = home / "relay"
    for name in ("keys.json", "relay.json", "logs/gateway.log"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    keys = json.loads((folder / "keys.json").read_text())
    assert set(keys) >= {"jwt_secret", "anon_key", "service_key"}

    again = json.loads(yui("relay", "up", "--json", home=home).stdout)
    assert again["gateway_pid"] == first["gateway_pid"]
    migrated = json.loads(yui("relay", "migrate", "--json", home=home).stdout)
    assert migrated == {"applied": []}

    person = requests.post(
        f"http://127.0.0.1:{port}/functions/v1/yui-auth",
        json={"grant_type": "signup", "name": "Keeper"},
        headers={"authorization": f"Bearer {keys['service_key']}"},
        timeout=10,
    )
    assert person.status_code == 200

    down = json.loads(yui("relay", "down", "--json", home=home).stdout)
    assert down["gateway"] == "stopped" and down["postgres"] == "stopped"
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/health", timeout=2)

    back = json.loads(yui("relay", "up", "--json", home=home).stdout)
    assert back["gateway"] == "running" and back["url"] == first["url"]
    refreshed = requests.post(
        f"http://127.0.0.1:{port}/functions/v1/yui-auth",
        json={"grant_type": "refresh", "refresh_token": person.json()["refresh_token"]},
        timeout=10,
    )
    assert refreshed.status_code == 200  # the person survived the restart
    assert json.loads((folder / "keys.json").read_text()) == keys


def test_proxies_and_origins_are_checked_kept_and_not_changed_under_a_running_gateway(
    home: Path,
) -> None:
    bad_proxy = yui("relay", "up", "--trusted-proxy", "proxy.lan", home=home, check=False)
    assert bad_proxy.returncode == 2 and "IP address or network" in bad_proxy.stderr
    bad_origin = yui("relay", "up", "--allow-origin", "ftp://x/y", home=home, check=False)
    assert bad_origin.returncode == 2 and "give an origin" in bad_origin.stderr
    assert status(home)["postgres"] == "absent"  # refused before anything was made

    port = free_port()
    yui(
        "relay", "up", "--port", str(port), "--trusted-proxy", "10.0.0.7",
        "--allow-origin", "https://Yui.Example.com", home=home,
    )  # fmt: skip
    config_file = home / "relay" / "relay.json"
    config = json.loads(config_file.read_text())
    assert config["trusted_proxies"] == ["10.0.0.7/32"]
    assert config["allowed_origins"] == ["https://yui.example.com"]

    moved = yui("relay", "up", "--trusted-proxy", "10.0.0.0/8", home=home, check=False)
    assert moved.returncode == 1 and "yui relay down" in moved.stderr
    assert json.loads(config_file.read_text())["trusted_proxies"] == ["10.0.0.7/32"]
    assert yui("relay", "up", home=home).returncode == 0  # nothing asked to change

    yui("relay", "down", home=home)
    yui("relay", "up", "--trusted-proxy", "10.0.0.0/8", home=home)
    config = json.loads(config_file.read_text())
    assert config["trusted_proxies"] == ["10.0.0.0/8"]
    assert config["allowed_origins"] == ["https://yui.example.com"]  # left out: kept


def test_a_busy_port_is_refused_clearly(home: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = yui("relay", "up", "--port", str(port), home=home, check=False)
    assert result.returncode == 1
    assert f"port {port}" in result.stderr and "already in use" in result.stderr


def test_status_of_a_relay_never_started(home: Path) -> None:
    assert status(home)["postgres"] == "absent"
    assert status(home)["gateway"] == "stopped"


def test_foreground_serves_until_sigterm(home: Path) -> None:
    port = free_port()
    env = {**os.environ, "YUI_HOME": str(home), "NO_COLOR": "1"}
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bin" / "yui"),
            "relay",
            "up",
            "--foreground",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.1)
        running = status(home)
        assert running["gateway"] == "running" and running["gateway_pid"] == server.pid
    finally:
        server.send_signal(signal.SIGTERM)
        _, errors = server.communicate(timeout=60)  # waits, and closes the pipes
    assert server.returncode == 0, errors
    stopped = status(home)
    assert stopped["gateway"] == "stopped" and stopped["postgres"] == "stopped"
