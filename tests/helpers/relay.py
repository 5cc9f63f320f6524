"""Helpers for tests that talk to the real relay over HTTP, as its clients do, and a second
gateway process on the same database (a relay with two gateways, or one that dies)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import requests
import uvicorn

from relay import server
from relay.cluster import cluster_for
from relay.gateway.app import GatewaySettings, create_app
from tests.helpers.cli import ROOT, yui
from tests.helpers.http import free_port

_addresses = itertools.count(1)


def fresh_ip() -> str:
    """A client address no other test uses, so the pairing throttle counts per test."""
    n = next(_addresses)
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


@dataclass
class LocalRelay:
    url: str
    home: Any
    anon_key: str
    service_key: str
    jwt_secret: str
    superuser: str

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def sql(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run SQL as the database's superuser (test setup: age a heartbeat, lower a limit)."""
        with psycopg.connect(self.superuser, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    @contextmanager
    def limits(self, **values: float) -> Iterator[None]:
        """Change some limits for the length of a block (the limits table is data)."""
        names = list(values)
        before = dict(self.sql("select name, value from yui_limits where name = any(%s)", (names,)))
        for name, value in values.items():
            self.sql("update yui_limits set value = %s where name = %s", (value, name))
        try:
            yield
        finally:
            for name, value in before.items():
                self.sql("update yui_limits set value = %s where name = %s", (value, name))

    def http(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        body: Any = None,
        params: Any = None,
        prefer: str | None = None,
        apikey: bool = True,
        headers: dict[str, str] | None = None,
    ) -> requests.Response:
        sent: dict[str, str] = {"content-type": "application/json"}
        if apikey:
            sent["apikey"] = self.anon_key
        if token:
            sent["authorization"] = f"Bearer {token}"
        if prefer:
            sent["prefer"] = prefer
        sent.update(headers or {})
        return requests.request(
            method, self.url + path, json=body, params=params, headers=sent, timeout=20
        )

    def rest(self, method: str, table: str, token: str | None, **kwargs: Any) -> requests.Response:
        return self.http(method, f"/rest/v1/{table}", token=token, **kwargs)

    def fn(
        self, name: str, body: dict[str, Any], token: str | None = None, ip: str | None = None
    ) -> requests.Response:
        headers = {"x-forwarded-for": ip} if ip else None
        return self.http("POST", f"/functions/v1/{name}", token=token, body=body, headers=headers)

    def person(self, name: str = "Test person") -> Person:
        answer = self.fn("yui-auth", {"grant_type": "signup", "name": name}, token=self.service_key)
        assert answer.status_code == 200, answer.text
        data = answer.json()
        return Person(self, data["user"]["id"], data["access_token"])


@dataclass
class Person:
    relay: LocalRelay
    id: str
    token: str
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add_agent(self, name: str, **extra: Any) -> tuple[dict[str, Any], str]:
        """A new agent and its pairing code."""
        answer = self.relay.fn(
            "yui-agents", {"action": "create", "name": name, "pair": True, **extra}, self.token
        )
        assert answer.status_code == 200, answer.text
        data = answer.json()
        self.agents[name] = data["agent"]
        return data["agent"], data["pairing"]["code"]

    def say(self, agent: dict[str, Any], body: str = "hi", **row: Any) -> requests.Response:
        message = {
            "id": str(uuid.uuid4()),
            "user_id": self.id,
            "agent_id": agent["id"],
            "sender": "user",
            "body": body,
            **row,
        }
        return self.relay.rest("POST", "yui_messages", self.token, body=message)

    def thread(self, agent: dict[str, Any]) -> list[dict[str, Any]]:
        answer = self.relay.rest(
            "GET",
            "yui_messages",
            self.token,
            params={"agent_id": f"eq.{agent['id']}", "order": "created_at.asc,id.asc"},
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

    def listing(self) -> dict[str, dict[str, Any]]:
        """The app's agent list, by name."""
        answer = self.relay.rest("GET", "yui_agent_list", self.token)
        assert answer.status_code == 200, answer.text
        return {a["name"]: a for a in answer.json()}


@dataclass
class Host:
    """A paired computer: its connector token and a session JWT."""

    relay: LocalRelay
    token: str
    connector: dict[str, Any]
    user_id: str = ""
    jwt: str = ""

    @classmethod
    def pair(cls, relay: LocalRelay, code: str, ref: str = "agent", **extra: Any) -> Host:
        answer = relay.fn(
            "yui-connect",
            {"action": "pair", "code": code, "remote_ref": ref, "host_name": "Test host", **extra},
            ip=fresh_ip(),
        )
        assert answer.status_code == 200, answer.text
        data = answer.json()
        host = cls(relay, data["connector_token"], data["connector"])
        host.session()
        return host

    def call(self, action: str, **body: Any) -> requests.Response:
        return self.relay.fn("yui-connect", {"action": action, **body}, self.token)

    def session(self, **body: Any) -> dict[str, Any]:
        answer = self.call("session", **body)
        assert answer.status_code == 200, answer.text
        data = answer.json()
        self.jwt, self.user_id = data["access_token"], data["user_id"]
        return data

    def reply(self, agent: dict[str, Any], body: str = "hello", **row: Any) -> requests.Response:
        message = {
            "id": str(uuid.uuid4()),
            "user_id": self.user_id,
            "agent_id": agent["id"],
            "sender": "agent",
            "body": body,
            **row,
        }
        return self.relay.rest("POST", "yui_messages", self.jwt, body=message)


@dataclass
class TwoPeople:
    """The usual cast of the isolation tests: A has Alpha (served by HA) and Loose (served by
    nobody); B has Bravo (served by HB)."""

    relay: LocalRelay
    a: Person
    b: Person
    alpha: dict[str, Any]
    loose: dict[str, Any]
    bravo: dict[str, Any]
    ha: Host
    hb: Host


def two_people(relay: LocalRelay) -> TwoPeople:
    a, b = relay.person("A"), relay.person("B")
    alpha, alpha_code = a.add_agent("Alpha")
    loose, _ = a.add_agent("Loose")
    bravo, bravo_code = b.add_agent("Bravo")
    ha = Host.pair(relay, alpha_code, "alpha")
    hb = Host.pair(relay, bravo_code, "bravo")
    return TwoPeople(relay, a, b, alpha, loose, bravo, ha, hb)


@contextmanager
def running_relay(home: Path, *flags: str) -> Iterator[LocalRelay]:
    """A relay as `yui relay up [FLAGS]` starts it, on a free port in `home`; stopped and
    its database removed afterwards."""
    port = free_port()
    folder = home / "relay"
    try:
        yui("relay", "up", "--port", str(port), *flags, home=home)
        keys = json.loads((folder / "keys.json").read_text())
        yield LocalRelay(
            url=f"http://127.0.0.1:{port}",
            home=home,
            anon_key=keys["anon_key"],
            service_key=keys["service_key"],
            jwt_secret=keys["jwt_secret"],
            superuser=cluster_for(folder).conninfo(),
        )
    finally:
        yui("relay", "down", home=home, check=False)
        cluster_for(folder).remove()


def remove_relays_under(root: Path) -> list[str]:
    """Destroy every relay on this machine whose folder lies under `root` (a test session's
    temporary folder), gateways and PostgreSQL stopped first; the keys removed. Relays of
    other sessions, other users or other checkouts are never looked at twice."""
    from relay import admin, inventory, processes
    from relay.cluster import cluster_by_key, registered_folder, registered_keys
    from state.errors import YuiError

    removed = []
    try:
        keys = registered_keys()
    except (YuiError, OSError):
        return []  # no PostgreSQL here: no cluster either
    for key in keys:
        folder = registered_folder(key)
        if folder is None or not folder.is_relative_to(root):
            continue
        inventory.destroy(cluster_by_key(key), admin.stop_gateways, processes.stop_process)
        removed.append(key)
    return removed


# --- a second gateway ------------------------------------------------------------------------


class Gateway:
    """A second gateway process on the session relay's database."""

    def __init__(self, relay: LocalRelay, port: int | None = None) -> None:
        self.relay = relay
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Gateway:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "relay.gateway",
                "--dir",
                str(self.relay.home / "relay"),
                "--port",
                str(self.port),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_healthy(self.url)
        return self

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def wait_healthy(url: str, timeout: float = 30) -> None:
    """Until the gateway at `url` answers its health check."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/health", timeout=1).ok:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no gateway came up at {url}")


@contextmanager
def gateway_in_process(settings: GatewaySettings) -> Iterator[str]:
    """A gateway served in this process exactly as the real one is served, so a test can
    lower a constant or change a setting first; yields its URL, and stops it after."""
    port = free_port()
    serving = uvicorn.Server(server.config(create_app(settings), "127.0.0.1", port))
    thread = threading.Thread(target=serving.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        serving.should_exit = True
        thread.join(15)
