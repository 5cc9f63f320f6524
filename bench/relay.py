"""The bench's own relay and its people: `yui relay up` in a temporary home on a free port, a
person signed up with the service key, and hosts paired the way `yui pair` pairs them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import urllib3

from bridges.client.host import pair
from relay.cluster import cluster_for
from state.host import HostState

ROOT = Path(__file__).resolve().parent.parent
YUI = [sys.executable, str(ROOT / "bin" / "yui")]
BIG = 1_000_000  # every rate bucket and cap, raised for the bench


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def yui(home: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the real `bin/yui` with `home` as its YUI_HOME; raise with its stderr on failure."""
    env = {**os.environ, "YUI_HOME": str(home), "NO_COLOR": "1"}
    done = subprocess.run(
        [*YUI, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"yui {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}")
    return done


@dataclass
class Relay:
    """A local relay that belongs to this run: started in `home`, removed by `close()`."""

    home: Path
    port: int
    anon_key: str = ""
    service_key: str = ""
    superuser: str = ""
    # Kept connections for every call the bench makes: a third of what `requests` costs a call,
    # so the load the bench makes takes less of the cores the relay and the bridge share with it.
    pool: urllib3.PoolManager = field(
        default_factory=lambda: urllib3.PoolManager(maxsize=16, retries=False, timeout=30.0)
    )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def folder(self) -> Path:
        return self.home / "relay"

    def start(self) -> None:
        yui(self.home, "relay", "up", "--port", str(self.port))
        keys = json.loads((self.folder / "keys.json").read_text())
        self.anon_key, self.service_key = keys["anon_key"], keys["service_key"]
        self.superuser = cluster_for(self.folder).conninfo()

    def close(self) -> None:
        """Stop the gateway and PostgreSQL and delete everything the run created."""
        try:
            yui(self.home, "relay", "down", timeout=60)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"bench: relay down failed: {exc}", file=sys.stderr)
        finally:
            cluster_for(self.folder).remove()
            shutil.rmtree(self.home, ignore_errors=True)

    def sql(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        """SQL as the database's superuser."""
        with psycopg.connect(self.superuser, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    def raise_limits(self) -> int:
        """Lift every rate bucket and cap in `yui_limits` (so the bench measures the bridge,
        not the relay's throttles); returns how many limits were changed."""
        rows = self.sql(
            "update public.yui_limits set value = %s"
            " where name ~ '(_burst|_per_min|_per_10min)$'"
            " or name in ('agents_per_user', 'connectors_per_user') returning name",
            (BIG,),
        )
        return len(rows)

    def gateway_pid(self) -> int:
        return int(json.loads((self.folder / "relay.json").read_text())["gateway_pid"])

    def postmaster_pid(self) -> int:
        pid_file = cluster_for(self.folder).data / "postmaster.pid"
        return int(pid_file.read_text().split("\n", 1)[0])

    def postgres_version(self) -> str:
        return str(self.sql("show server_version")[0][0])

    def call(self, function: str, body: dict[str, Any], token: str) -> dict[str, Any]:
        """An edge function's JSON answer (raise on anything but 200)."""
        headers = {"apikey": self.anon_key, "authorization": f"Bearer {token}"}
        answer = self.pool.request(
            "POST", f"{self.url}/functions/v1/{function}", json=body, headers=headers
        )
        if answer.status != 200:
            raise RuntimeError(f"{function} {body.get('action')}: {answer.status}")
        return answer.json()

    def signup(self, name: str) -> Person:
        data = self.call("yui-auth", {"grant_type": "signup", "name": name}, self.service_key)
        return Person(self, data["user"]["id"], data["access_token"])


@dataclass
class Person:
    """The person's side, as the app does it: REST and functions with the person's token."""

    relay: Relay
    id: str
    token: str

    def headers(self) -> dict[str, str]:
        return {
            "apikey": self.relay.anon_key,
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
            "prefer": "return=minimal",
        }

    def add_agent(self, name: str) -> tuple[dict[str, Any], str]:
        """A new agent and its 6-digit pairing code."""
        body = {"action": "create", "name": name, "pair": True}
        data = self.relay.call("yui-agents", body, self.token)
        return data["agent"], data["pairing"]["code"]

    def say(self, agent_id: str, body: str = "hi") -> str:
        """Insert one message with the person's token; returns its id (thread-safe)."""
        row_id = str(uuid.uuid4())
        row = {
            "id": row_id,
            "user_id": self.id,
            "agent_id": agent_id,
            "sender": "user",
            "body": body,
        }
        url = f"{self.relay.url}/rest/v1/yui_messages"
        answer = self.relay.pool.request("POST", url, json=row, headers=self.headers())
        if answer.status >= 300:
            raise RuntimeError(f"the person's insert: {answer.status} {answer.data[:200]!r}")
        return row_id

    def presence(self, agent_ids: set[str]) -> dict[str, int]:
        """How many of `agent_ids` the app shows in each presence (online, not_listening…)."""
        answer = self.relay.pool.request(
            "GET",
            f"{self.relay.url}/rest/v1/yui_agent_list",
            fields={"select": "id,presence"},
            headers=self.headers(),
        )
        counts: dict[str, int] = {}
        for agent in answer.json():
            if agent["id"] in agent_ids:
                counts[agent["presence"]] = counts.get(agent["presence"], 0) + 1
        return counts


@dataclass
class Host:
    """A paired machine: its state file and its agents (ref → agent id)."""

    name: str
    state: Path
    agents: dict[str, str]

    @property
    def ids(self) -> list[str]:
        return list(self.agents.values())


def pair_host(person: Person, folder: Path, name: str, count: int) -> Host:
    """Pair `count` agents onto one machine: for each, the app makes an agent with a code and
    the host claims it with `yui pair`'s own code path, on one state file."""
    state_path = folder / name / "state.json"
    state_path.parent.mkdir(parents=True, exist_ok=True)
    state = HostState(state_path)
    agents = {}
    for n in range(count):
        ref = f"{name}-{n:03d}"
        agent, code = person.add_agent(ref)
        pair(code, ref=ref, host_name=name, url=person.relay.url, state=state)
        agents[ref] = str(agent["id"])
    return Host(name, state_path, agents)
