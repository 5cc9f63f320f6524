"""`yui relay up | down | status | migrate | serve`: the relay's lifecycle, all idempotent.

The first `up` creates the database, applies the migrations, generates the secret and keys,
then starts PostgreSQL and the gateway (one process or `--workers`) in the background. Later
`up`s start what isn't running and apply new migrations; `down` stops both and keeps the data.
With `--database` the relay serves a database made elsewhere (relay/database.py) and runs no
PostgreSQL of its own; `serve` adds one more gateway on such a shared database. Listing and
destroying relays is relay/inventory.py's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg

from relay import database as external
from relay import schema
from relay.cluster import DATABASE, Cluster, cluster_for, log_tail, register
from relay.keys import RelayKeys
from relay.processes import check_port_free, healthy, stop_process, wait_healthy
from state.errors import BadInput, YuiError
from state.local_relay import RelayFiles
from state.paths import DEFAULT_URL, ensure_private_dir

DEFAULT_PORT = int(DEFAULT_URL.rsplit(":", 1)[1])
GATEWAY_MODULE = "relay.gateway"

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass
class RelayStatus:
    """What `yui relay status` reports."""

    url: str
    folder: str
    postgres: str
    postgres_data: str
    gateway: str
    gateway_pid: int | None
    gateway_pids: list[int]
    migrations: int
    guide_version: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Exposure:
    """Who the gateway believes and serves beyond this machine; None keeps what was set."""

    trusted_proxies: tuple[str, ...] | None = None
    allowed_origins: tuple[str, ...] | None = None
    anonymous_signin: bool | None = None  # /auth/v1's signInAnonymously; off when never set
    metrics_from: tuple[str, ...] | None = None  # who may read /metrics; loopback when never set

    def changes(self, config: dict[str, Any]) -> dict[str, Any]:
        """The settings this asks for that differ from the recorded ones."""
        wanted = {
            "trusted_proxies": self.trusted_proxies,
            "allowed_origins": self.allowed_origins,
            "metrics_from": self.metrics_from,
        }
        found: dict[str, Any] = {
            key: list(value)
            for key, value in wanted.items()
            if value is not None and list(value) != list(config.get(key) or [])
        }
        anonymous = self.anonymous_signin
        if anonymous is not None and anonymous != bool(config.get("anonymous_signin")):
            found["anonymous_signin"] = anonymous
        return found


@dataclass(frozen=True)
class Serving:
    """How the gateway processes run: how many on the port, and how they log."""

    workers: int = 1  # processes sharing the port (SO_REUSEPORT): the kernel spreads connections
    log_format: str = "text"  # or "json": one object a line, never a token or a body

    def args(self) -> list[str]:
        extra = ["--log-format", self.log_format]
        return extra + (["--reuse-port"] if self.workers > 1 else [])


def up(
    folder: Path,
    port: int | None = None,
    host: str = "127.0.0.1",
    progress: Progress = _quiet,
    exposure: Exposure = Exposure(),
    database: str | None = None,
    serving: Serving = Serving(),
) -> RelayStatus:
    """Start what isn't running, creating it first if needed, and return the status."""
    files = RelayFiles(folder)
    config = files.config.read()
    port = port or config.get("port") or DEFAULT_PORT
    pids = _gateway_pids(config)
    if not pids:
        check_port_free(host, port)  # before anything is made or started
    _prepare_any(folder, files, progress, database)
    if pids:
        config = files.config.read()
        if config.get("port") != port or exposure.changes(config):
            raise YuiError(
                f"the relay is already running on port {config.get('port')} with other settings",
                hint="run `yui relay down` first to change them",
            )
        progress(f"gateway already running (pid {', '.join(map(str, pids))})")
        return status(folder)
    with files.config.edit() as doc:
        doc.update(exposure.changes(doc))
    ensure_private_dir(files.logs)
    env = {**os.environ, "PYTHONPATH": _import_root()}
    children = []
    for _ in range(serving.workers):
        log = _open_log(files.logs / "gateway.log")
        command = [sys.executable, "-m", GATEWAY_MODULE, "--dir", str(folder)]
        command += ["--host", host, "--port", str(port), *serving.args()]
        children.append(
            subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        )
        log.close()
    with files.config.edit() as doc:
        doc.update(
            port=port,
            host=host,
            gateway_pid=children[0].pid,
            gateway_pids=[child.pid for child in children],
        )
    progress(f"starting {len(children)} gateway process(es) on {host}:{port}")
    for child in children:
        wait_healthy(child, port, lambda: _tail(files))
    return status(folder)


def run_foreground(
    folder: Path,
    port: int | None = None,
    host: str = "127.0.0.1",
    progress: Progress = _quiet,
    exposure: Exposure = Exposure(),
    database: str | None = None,
    serving: Serving = Serving(),
) -> None:
    """Serve the gateway in this process (for systemd); stop PostgreSQL when it ends."""
    from relay.server import serve

    files = RelayFiles(folder)
    config = files.config.read()
    port = port or config.get("port") or DEFAULT_PORT
    if _gateway_pids(config):
        raise YuiError(
            "the relay's gateway is already running in the background",
            hint="run `yui relay down` first",
        )
    check_port_free(host, port)
    cluster = _prepare_any(folder, files, progress, database)
    with files.config.edit() as doc:
        doc.update(
            port=port,
            host=host,
            gateway_pid=os.getpid(),
            gateway_pids=[os.getpid()],
            **exposure.changes(doc),
        )
    progress(f"serving on http://{host}:{port}")
    try:
        serve(folder, host, port, log_format=serving.log_format)
    finally:
        with files.config.edit() as doc:
            doc.update(gateway_pid=None, gateway_pids=[])
        if cluster is not None:
            cluster.stop()


def serve_only(
    folder: Path,
    database: str,
    port: int,
    host: str = "127.0.0.1",
    progress: Progress = _quiet,
    serving: Serving = Serving(),
) -> None:
    """One more gateway on a database other gateways serve too, in this process: it needs the
    relay folder's keys.json (the shared signing secret) and a migrated database, and records
    nothing, so any number can run, here or on other machines."""
    from relay.server import serve

    files = RelayFiles(folder)
    if not files.keys.read().get("jwt_secret"):
        raise BadInput(
            f"no keys.json in {folder}: every gateway of a relay signs with the same secret",
            hint="copy the first gateway's relay folder's keys.json (mode 600) there",
        )
    with external.connect(database) as conn:  # the catalog: readable by any login
        found = conn.execute(
            "select 1 from pg_catalog.pg_tables"
            " where schemaname = 'public' and tablename = 'yui_messages'"
        ).fetchone()
    if not found:
        raise BadInput(
            f"the database {external.redacted(database)} has no relay schema",
            hint="run `yui relay migrate --database URL` first",
        )
    check_port_free(host, port)
    progress(f"serving {external.redacted(database)} on http://{host}:{port}")
    serve(folder, host, port, database=database, log_format=serving.log_format)


def down(folder: Path, progress: Progress = _quiet) -> RelayStatus:
    """Stop the gateway and PostgreSQL; keep every file."""
    files = RelayFiles(folder)
    config = files.config.read()
    stop_gateways(folder, progress)
    if not config.get("database"):
        cluster = cluster_for(folder)
        if cluster.running():
            progress("stopping PostgreSQL")
            cluster.stop()
    return status(folder)


def stop_gateways(folder: Path, progress: Progress = _quiet) -> None:
    """Stop every gateway process the relay folder records."""
    files = RelayFiles(folder)
    config = files.config.read()
    for pid in _gateway_pids(config):
        progress(f"stopping the gateway (pid {pid})")
        stop_process(pid)
    if config:
        with files.config.edit() as doc:
            doc.update(gateway_pid=None, gateway_pids=[])


def migrate(folder: Path, progress: Progress = _quiet, database: str | None = None) -> list[str]:
    """Apply new migrations and publish the channel guide: to `database` (a URL or conninfo
    for a database made elsewhere), else to the relay's own, which must exist already
    (`up` creates one) and is left running or stopped as it was found."""
    files = RelayFiles(folder)
    if database is not None or files.config.read().get("database"):
        _prepare_external(folder, files, progress, database)
        return _migrate_url(_database_of(files), progress)
    cluster = cluster_for(folder)
    if not cluster.initialized():
        raise BadInput(
            f"no relay in {folder}",
            hint="check the path; `yui relay up` creates a relay, `--database URL` migrates "
            "a database made elsewhere",
        )
    was_running = cluster.running()
    try:
        cluster = _prepare(folder, files, progress, apply=False)
        return _migrate(cluster, progress)
    finally:
        if not was_running:
            cluster.stop()


def status(folder: Path) -> RelayStatus:
    files = RelayFiles(folder)
    config = files.config.read()
    port = config.get("port") or DEFAULT_PORT
    pids = _gateway_pids(config)
    gateway = "stopped"
    if pids:
        gateway = "running" if healthy(port) else "starting"
    migrations: list[str] = []
    guide = None
    database = config.get("database")
    if database:
        where, conninfo = external.redacted(database), database
        postgres = "external" if external.answers(database) else "unreachable"
        reachable = postgres == "external"
    else:
        cluster = cluster_for(folder)
        where, conninfo = str(cluster.data), cluster.conninfo()
        reachable = cluster.running()
        postgres = "running" if reachable else "stopped" if cluster.initialized() else "absent"
    if reachable:
        try:
            migrations = schema.applied(conninfo)
            guide = _guide_version(conninfo) if migrations else None
        except psycopg.Error:
            pass
    return RelayStatus(
        url=f"http://127.0.0.1:{port}",
        folder=str(folder),
        postgres=postgres,
        postgres_data=where,
        gateway=gateway,
        gateway_pid=pids[0] if pids else None,
        gateway_pids=pids,
        migrations=len(migrations),
        guide_version=guide,
    )


# --- the parts ------------------------------------------------------------------------------


def _prepare_any(
    folder: Path, files: RelayFiles, progress: Progress, database: str | None
) -> Cluster | None:
    """`_prepare` for the relay's own cluster, or `_prepare_external` for a database made
    elsewhere (given now, or recorded by an earlier `up --database`)."""
    if database is not None or files.config.read().get("database"):
        _prepare_external(folder, files, progress, database)
        _migrate_url(_database_of(files), progress)
        return None
    return _prepare(folder, files, progress)


def _keys(folder: Path, files: RelayFiles, progress: Progress) -> None:
    ensure_private_dir(folder)
    with files.keys.edit() as keys:
        if not keys.get("jwt_secret"):
            progress("generating the relay's secret and keys")
            keys.update(RelayKeys.generate().as_dict())


def _prepare_external(
    folder: Path, files: RelayFiles, progress: Progress, database: str | None
) -> None:
    """Folder and keys, and the database made elsewhere recorded as the one to serve (its
    user joins the request roles after the migrations have made them)."""
    _keys(folder, files, progress)
    if database is not None:
        external.checked(database)
        with files.config.edit() as doc:
            doc["database"] = database
            doc["gateway_conninfo"] = database
            doc.pop("postgres_data", None)


def _database_of(files: RelayFiles) -> str:
    return str(files.config.read()["database"])


def _migrate_url(database: str, progress: Progress) -> list[str]:
    external.connect(database).close()  # unreachable: one line, before any migration
    applied = schema.migrate(database)
    for name in applied:
        progress(f"applied {name}")
    for role in external.join_request_roles(database):
        progress(f"granted {role} to the database user")
    return applied


def _prepare(folder: Path, files: RelayFiles, progress: Progress, apply: bool = True) -> Cluster:
    """Folder, keys, cluster, database and (unless `apply` is false) migrations, as needed."""
    _keys(folder, files, progress)
    cluster = cluster_for(folder)
    if not cluster.initialized():
        progress(f"creating a PostgreSQL cluster in {cluster.data}")
        cluster.init()
    register(cluster.key, folder)  # a cluster made before the register is entered now
    if not cluster.running():
        progress("starting PostgreSQL")
        cluster.start()
    _ensure_database(cluster)
    with files.config.edit() as doc:
        doc["gateway_conninfo"] = cluster.conninfo(user="authenticator")
        doc["postgres_data"] = str(cluster.data)
    if apply:
        _migrate(cluster, progress)
    return cluster


def _migrate(cluster: Cluster, progress: Progress) -> list[str]:
    """Apply new migrations, reporting each; the names applied."""
    applied = schema.migrate(cluster.conninfo())
    for name in applied:
        progress(f"applied {name}")
    return applied


def _ensure_database(cluster: Cluster) -> None:
    with psycopg.connect(cluster.conninfo(dbname="postgres"), autocommit=True) as conn:
        exists = conn.execute(
            "select 1 from pg_database where datname = %s", (DATABASE,)
        ).fetchone()
        if not exists:
            conn.execute(f'create database "{DATABASE}"')


def _guide_version(conninfo: str) -> str | None:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "select version from public.yui_channel_guides order by created_at desc limit 1"
        ).fetchone()
    return row[0] if row else None


def _gateway_pids(config: dict[str, Any]) -> list[int]:
    """The recorded gateways' pids whose processes are alive and really are our gateways."""
    recorded = config.get("gateway_pids") or [config.get("gateway_pid")]
    return [pid for pid in map(_gateway_pid, recorded) if pid is not None]


def _gateway_pid(pid: Any) -> int | None:
    """`pid`, if that process is alive and really is our gateway."""
    if not pid:
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if pid == os.getpid() or GATEWAY_MODULE.encode() in cmdline or b"--foreground" in cmdline:
        return int(pid)
    return None


def _open_log(path: Path) -> Any:
    """The gateway's log for appending, readable by its owner only (from its first byte)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # a log made by an older relay may be 0644
    return os.fdopen(fd, "ab")


def _tail(files: RelayFiles) -> str:
    return log_tail(files.logs / "gateway.log", lines=20)


def _import_root() -> str:
    """The folder the `relay` package is imported from, so the child imports the same code."""
    root = str(Path(__file__).resolve().parent.parent)
    existing = os.environ.get("PYTHONPATH")
    return f"{root}{os.pathsep}{existing}" if existing else root
