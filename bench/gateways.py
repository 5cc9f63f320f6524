"""The relay's throughput with one gateway, and with two on the same database (the second
started as an operator would, `yui relay serve --database`): what a second gateway buys, and
what it costs, on this machine.

Each of CLIENTS threads is the person's app at its busiest: it writes a message, then reads the
thread's newest rows, again and again for the window, through one gateway (with two, half the
clients use each, as a load balancer would spread them). The agent has no host, so the figures
are the relay's own: gateway, PostgreSQL and its triggers. On 2 cores, expect little gain: the
two gateways and PostgreSQL share them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from typing import Any

import requests
from rich.table import Table

from bench.relay import YUI, Person, Relay, free_port
from bench.report import percentile

CLIENTS = 8


def _second_gateway(relay: Relay) -> tuple[subprocess.Popen[bytes], str]:
    """`yui relay serve` on the relay's database and folder, on a port of its own."""
    database = json.loads((relay.folder / "relay.json").read_text())["gateway_conninfo"]
    port = free_port()
    command = [*YUI, "relay", "serve", "--database", database]
    command += ["--port", str(port), "--dir", str(relay.folder)]
    env = {**os.environ, "NO_COLOR": "1"}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/health", timeout=1).ok:
                return process, url
        except requests.ConnectionError:
            time.sleep(0.1)
    process.kill()
    process.wait(timeout=10)
    raise RuntimeError("the second gateway did not come up")


def _client(
    url: str, person: Person, agent_id: str, until: float, out: list[float], errors: list[int]
) -> None:
    http = requests.Session()
    headers = person.headers()
    read = {"agent_id": f"eq.{agent_id}", "order": "created_at.desc", "limit": "20"}
    while time.monotonic() < until:
        start = time.perf_counter()
        row = {"user_id": person.id, "agent_id": agent_id, "sender": "user", "body": "load"}
        wrote = http.post(f"{url}/rest/v1/yui_messages", json=row, headers=headers, timeout=30)
        got = http.get(f"{url}/rest/v1/yui_messages", params=read, headers=headers, timeout=30)
        if wrote.status_code >= 300 or got.status_code >= 300:
            errors.append(1)
        out.append(time.perf_counter() - start)
    http.close()


def _load(urls: list[str], person: Person, agent_id: str, window: float) -> dict[str, Any]:
    """CLIENTS clients for `window` seconds, client n on urls[n % len(urls)]."""
    rounds: list[float] = []
    errors: list[int] = []
    until = time.monotonic() + window
    threads = [
        threading.Thread(
            target=_client,
            args=(urls[n % len(urls)], person, agent_id, until, rounds, errors),
            daemon=True,
        )
        for n in range(CLIENTS)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(window + 60)
    seconds = time.monotonic() - started
    times = [r * 1000 for r in rounds] or [0.0]
    return {
        "requests_per_s": 2 * len(rounds) / seconds,
        "round_p50_ms": percentile(times, 50),
        "round_p99_ms": percentile(times, 99),
        "errors": len(errors),
        "rounds": len(rounds),
    }


def measure(relay: Relay, person: Person, window: float) -> dict[str, Any]:
    """Throughput through 1 gateway, then through 2 on the same database."""
    agent, _ = person.add_agent("Gateway load")
    process, second = _second_gateway(relay)
    try:
        _load([relay.url], person, agent["id"], min(window, 1.0))  # warm-up
        one = _load([relay.url], person, agent["id"], window)
        two = _load([relay.url, second], person, agent["id"], window)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return {"clients": CLIENTS, "window_s": window, "1 gateway": one, "2 gateways": two}


def table(figures: dict[str, Any]) -> Table:
    grid = Table(
        title=f"The relay alone, {figures['clients']} clients writing and reading "
        f"({figures['window_s']:.0f} s each): one gateway, then two on one database",
        title_justify="left",
    )
    for name in ("gateways", "requests/s", "round p50 ms", "round p99 ms", "errors"):
        grid.add_column(name, justify="left" if name == "gateways" else "right")
    for name in ("1 gateway", "2 gateways"):
        row = figures[name]
        grid.add_row(
            name,
            f"{row['requests_per_s']:.0f}",
            f"{row['round_p50_ms']:.1f}",
            f"{row['round_p99_ms']:.1f}",
            str(row["errors"]),
        )
    return grid
