"""Shared fixtures: a private PostgreSQL for the session, and isolation of every test's home."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from relay.cluster import Cluster, cluster_for
from tests.helpers.bridge import FakeWebhook, Machine
from tests.helpers.relay import LocalRelay, remove_relays_under, running_relay

# A test that uses any of these, itself or through another fixture, needs PostgreSQL or the
# relay: it is an integration test, and `make check` (pytest -m "not integration") skips it.
INTEGRATION_FIXTURES = frozenset({"relay", "relay_env", "pg_cluster", "scratch_db", "machine"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark integration tests from the fixtures they use (`fixturenames` is the closure: the
    fixtures a test asks for and every fixture those ask for), so no test has to say it."""
    for item in items:
        if INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def _no_relay_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After the session, no relay it made is left on the machine: whatever a test started
    under the session's temporary folder and didn't remove (a crash, a failed setup) is
    destroyed here, its PostgreSQL cluster included, wherever that lives."""
    yield
    remove_relays_under(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def pg_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster, started once for the whole session."""
    cluster = cluster_for(tmp_path_factory.mktemp("pg") / "relay")
    cluster.init()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.remove()


@pytest.fixture
def scratch_db(pg_cluster: Cluster) -> Iterator[str]:
    """A fresh, empty database in the session's cluster; yields a superuser conninfo."""
    name = f"scratch_{uuid.uuid4().hex[:10]}"
    admin = pg_cluster.conninfo(dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    try:
        yield pg_cluster.conninfo(dbname=name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'drop database "{name}" with (force)')


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own YUI_HOME, so no test reads or writes a real user's files."""
    monkeypatch.setenv("YUI_HOME", str(tmp_path / "home"))
    for var in ("YUI_STATE", "YUI_WEBHOOK_STATE", "YUI_URL"):
        monkeypatch.delenv(var, raising=False)
    os.environ.setdefault("NO_COLOR", "1")


# --- a real local relay, started once per session with `yui relay up` --------------------


@pytest.fixture(scope="session")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRelay]:
    """The local relay, as `yui relay up` starts it, on a free port in its own home.

    It believes X-Forwarded-For from loopback (`--trusted-proxy 127.0.0.1`), as a relay behind
    a local proxy does, so a test can name its own client address (`fn(..., ip=...)`) and get
    a pairing throttle of its own. The default, which believes no one, is proven on a relay of
    its own in tests/test_pairing_guard.py.
    """
    home = tmp_path_factory.mktemp("relay-home")
    with running_relay(home, "--trusted-proxy", "127.0.0.1") as running:
        yield running


@pytest.fixture
def relay_env(relay: LocalRelay, monkeypatch: pytest.MonkeyPatch) -> LocalRelay:
    """Point this test's commands at the session's relay, as one would a hosted relay."""
    monkeypatch.setenv("YUI_URL", relay.url)
    monkeypatch.setenv("YUI_ANON_KEY", relay.anon_key)
    monkeypatch.setenv("YUI_SERVICE_KEY", relay.service_key)
    return relay


@pytest.fixture
def machine(relay: LocalRelay, tmp_path: Path) -> Iterator[Machine]:
    """A host machine of its own (home folder, `yui` as real processes) on the session relay."""
    host = Machine(tmp_path / "host", relay)
    yield host
    host.stop_all()


@pytest.fixture
def webhook() -> Iterator[FakeWebhook]:
    """A fake webhook that answers every turn by echoing its text."""
    hook = FakeWebhook()
    yield hook
    hook.close()
