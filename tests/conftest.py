"""Shared fixtures: a private PostgreSQL for the session, and isolation of every test's home."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from relay.cluster import Cluster, cluster_for

ROOT = Path(__file__).resolve().parent.parent


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
