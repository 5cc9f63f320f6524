"""The relay's gateway processes: is a port free, is a gateway up, stop one for good."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import requests

from state.errors import YuiError

HEALTH_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def check_port_free(host: str, port: int) -> None:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            raise YuiError(
                f"port {port} on {host} is already in use", hint="pick another with --port"
            ) from None


def healthy(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/health", timeout=2).ok
    except requests.RequestException:
        return False


def wait_healthy(child: subprocess.Popen[bytes], port: int, tail: Callable[[], str]) -> None:
    """Until the gateway `child` answers on `port`; YuiError with its log's `tail()` if it
    stops or stays silent."""
    deadline = time.monotonic() + HEALTH_TIMEOUT
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise YuiError("the gateway stopped as it started:\n" + tail())
        if healthy(port):
            return
        time.sleep(0.05)
    raise YuiError(
        f"the gateway did not answer on port {port} within {HEALTH_TIMEOUT:.0f} s:\n" + tail()
    )


def stop_process(pid: int) -> None:
    """TERM, then KILL after STOP_TIMEOUT."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or is_zombie(pid):
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (OSError, IndexError):
        return True
