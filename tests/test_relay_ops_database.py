"""A database made outside `yui relay`, as an operator's managed PostgreSQL is: a plain initdb
cluster, a database and a user made with psql (not a superuser: the user the README asks for).
`yui relay migrate --database` sets it up, `yui relay up --database` serves it, and the
five-minute path runs against it, served by two gateway processes on one port (`--workers`):
pair, bridge, say hi, the agent answers."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.cluster import Cluster
from tests.helpers.bridge import FakeWebhook, Machine
from tests.helpers.cli import yui
from tests.helpers.http import free_port
from tests.helpers.relay import LocalRelay


def psql(cluster: Cluster, *commands: str, dbname: str = "postgres") -> None:
    """Run SQL as the cluster's superuser with the real psql, as an operator would."""
    args = [str(cluster.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1"]
    args += ["-h", str(cluster.socket_dir), "-U", "postgres", "-d", dbname]
    for command in commands:
        args += ["-c", command]
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)


@pytest.fixture
def outside_database(pg_cluster: Cluster) -> Iterator[str]:
    """A database and its owner, made with psql as a provider's console would: the owner may
    create roles; the one role only a superuser can make on PostgreSQL 15 (service_role, which
    bypasses row-level security) is made for it, with the right to grant it."""
    name = f"ext_{uuid.uuid4().hex[:8]}"
    psql(
        pg_cluster,
        f"create user {name} createrole",
        f"create database {name} owner {name}",
        "do $$ begin if not exists (select from pg_roles where rolname = 'service_role') then"
        " create role service_role nologin noinherit bypassrls; end if; end $$",
        f"grant service_role to {name} with admin option",
    )
    try:
        yield f"postgresql://{name}@/{name}?host={pg_cluster.socket_dir}"
    finally:
        psql(pg_cluster, f"drop database {name} with (force)", f"drop role {name}")


def test_a_database_made_elsewhere_is_migrated_and_serves_the_five_minute_path(
    outside_database: str, pg_cluster: Cluster, tmp_path: Path
) -> None:
    home = tmp_path / "operator"
    migrated = yui("relay", "migrate", "--database", outside_database, "--json", home=home)
    assert len(json.loads(migrated.stdout)["applied"]) >= 20
    again = yui("relay", "migrate", "--database", outside_database, "--json", home=home)
    assert json.loads(again.stdout) == {"applied": []}  # a deploy pipeline may run it each time

    port = free_port()
    flags = ("--database", outside_database, "--port", str(port), "--workers", "2", "--json")
    up = yui("relay", "up", *flags, home=home)
    machine = None
    try:
        status = json.loads(up.stdout)
        assert status["postgres"] == "external" and status["gateway"] == "running"
        workers = status["gateway_pids"]  # two processes share the port
        assert len(workers) == 2 and all(map(alive, workers))
        assert not (home / "relay" / "postgres").exists()  # no PostgreSQL of its own
        keys = json.loads((home / "relay" / "keys.json").read_text())
        dbname = outside_database.rsplit("/", 1)[1].split("?")[0]
        relay = LocalRelay(
            url=f"http://127.0.0.1:{port}",
            home=home,
            anon_key=keys["anon_key"],
            service_key=keys["service_key"],
            jwt_secret=keys["jwt_secret"],
            superuser=pg_cluster.conninfo(dbname=dbname),
        )
        person = relay.person("Ann")
        machine = Machine(tmp_path / "host", relay)
        with FakeWebhook() as hook:
            agent = machine.pair(person, "Helper", "helper")["agent"]
            bridge = machine.bridge(hook.url)
            assert person.say(agent, "hi").status_code == 201
            assert hook.wait_calls(1)[0].payload["text"] == "hi"
            bridge.wait("ack")
            assert [row["body"] for row in person.thread(agent)] == ["hi", "echo: hi"]
    finally:
        if machine is not None:
            machine.stop_all()
        down = yui("relay", "down", "--json", home=home, check=False)
    assert json.loads(down.stdout)["gateway_pids"] == []
    assert not [pid for pid in workers if alive(pid)]


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie waiting for its parent to reap it doesn't)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False
