"""`yui relay up | down | status | migrate`: the local relay's lifecycle, all idempotent.

The first `up` creates the database, applies the migrations, generates the secret and keys,
then starts PostgreSQL and the gateway in the background. Later `up`s start what isn't running
and apply new migrations; `down` stops both and keeps the data.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg
import requests

from relay import schema
from relay.cluster import DATABASE, Cluster, cluster_for, log_tail
from relay.keys import RelayKeys
from state.errors import YuiError
from state.local_relay import RelayFiles
from state.paths import DEFAULT_URL, ensure_private_dir

DEFAULT_PORT = int(DEFAULT_URL.rsplit(":", 1)[1])
HEALTH_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
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

    def changes(self, config: dict[str, Any]) -> dict[str, Any]:
        """The settings this asks for that differ from the recorded ones."""
        wanted = {"trusted_proxies": self.trusted_proxies, "allowed_origins": self.allowed_origins}
        found: dict[str, Any] = {
            key: list(value)
            for key, value in wanted.items()
            if value is not None and list(value) != list(config.get(key) or [])
        }
        anonymous = self.anonymous_signin
        if anonymous is not None and anonymous != bool(config.get("anonymous_signin")):
            found["anonymous_signin"] = anonymous
        return found


def up(
    folder: Path,
    port: int | None = None,
    host: str = "127.0.0.1",
    progress: Progress = _quiet,
    exposure: Exposure = Exposure(),
) -> RelayStatus:
    """Start what isn't running, creating it first if needed, and return the status."""
    files = RelayFiles(folder)
    _prepare(folder, files, progress)
    config = files.config.read()
    port = port or config.get("port") or DEFAULT_PORT
    pid = _gateway_pid(config)
    if pid is not None:
        if config.get("port") != port or exposure.changes(config):
            raise YuiError(
                f"the relay is already running on port {config.get('port')} with other settings",
                hint="run `yui relay down` first to change them",
            )
        progress(f"gateway already running (pid {pid})")
        return status(folder)
    _check_port_free(host, port)
    with files.config.edit() as doc:
        doc.update(exposure.changes(doc))
    ensure_private_dir(files.logs)
    log = _open_log(files.logs / "gateway.log")
    env = {**os.environ, "PYTHONPATH": _import_root()}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            GATEWAY_MODULE,
            "--dir",
            str(folder),
            "--host",
            host,
            "--port",
            str(port),
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env=env,
        start_new_session=True,
    )
    log.close()
    with files.config.edit() as doc:
        doc.update(port=port, host=host, gateway_pid=child.pid)
    progress(f"starting the gateway on {host}:{port}")
    _wait_healthy(child, port, files)
    return status(folder)


def run_foreground(
    folder: Path,
    port: int | None = None,
    host: str = "127.0.0.1",
    progress: Progress = _quiet,
    exposure: Exposure = Exposure(),
) -> None:
    """Serve the gateway in this process (for systemd); stop PostgreSQL when it ends."""
    from relay.server import serve

    files = RelayFiles(folder)
    cluster = _prepare(folder, files, progress)
    config = files.config.read()
    port = port or config.get("port") or DEFAULT_PORT
    if _gateway_pid(config) is not None:
        raise YuiError(
            "the relay's gateway is already running in the background",
            hint="run `yui relay down` first",
        )
    _check_port_free(host, port)
    with files.config.edit() as doc:
        doc.update(port=port, host=host, gateway_pid=os.getpid(), **exposure.changes(doc))
    progress(f"serving on http://{host}:{port}")
    try:
        serve(folder, host, port)
    finally:
        with files.config.edit() as doc:
            doc["gateway_pid"] = None
        cluster.stop()


def down(folder: Path, progress: Progress = _quiet) -> RelayStatus:
    """Stop the gateway and PostgreSQL; keep every file."""
    files = RelayFiles(folder)
    config = files.config.read()
    pid = _gateway_pid(config)
    if pid is not None:
        progress(f"stopping the gateway (pid {pid})")
        _terminate(pid)
    if config:
        with files.config.edit() as doc:
            doc["gateway_pid"] = None
    cluster = cluster_for(folder)
    if cluster.running():
        progress("stopping PostgreSQL")
        cluster.stop()
    return status(folder)


def migrate(folder: Path, progress: Progress = _quiet) -> list[str]:
    """Apply new migrations (starting PostgreSQL if needed) and publish the channel guide."""
    cluster = _prepare(folder, RelayFiles(folder), progress, apply=False)
    return _migrate(cluster, progress)


def status(folder: Path) -> RelayStatus:
    files = RelayFiles(folder)
    config = files.config.read()
    port = config.get("port") or DEFAULT_PORT
    cluster = cluster_for(folder)
    pg_running = cluster.running()
    pid = _gateway_pid(config)
    gateway = "stopped"
    if pid is not None:
        gateway = "running" if _healthy(port) else "starting"
    migrations: list[str] = []
    guide = None
    if pg_running:
        try:
            migrations = schema.applied(cluster.conninfo())
            guide = _guide_version(cluster) if migrations else None
        except psycopg.OperationalError:
            pass
    return RelayStatus(
        url=f"http://127.0.0.1:{port}",
        folder=str(folder),
        postgres="running" if pg_running else ("stopped" if cluster.initialized() else "absent"),
        postgres_data=str(cluster.data),
        gateway=gateway,
        gateway_pid=pid,
        migrations=len(migrations),
        guide_version=guide,
    )


# --- the parts ------------------------------------------------------------------------------


def _prepare(folder: Path, files: RelayFiles, progress: Progress, apply: bool = True) -> Cluster:
    """Folder, keys, cluster, database and (unless `apply` is false) migrations, as needed."""
    ensure_private_dir(folder)
    with files.keys.edit() as keys:
        if not keys.get("jwt_secret"):
            progress("generating the relay's secret and keys")
            keys.update(RelayKeys.generate().as_dict())
    cluster = cluster_for(folder)
    if not cluster.initialized():
        progress(f"creating a PostgreSQL cluster in {cluster.data}")
        cluster.init()
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


def _guide_version(cluster: Cluster) -> str | None:
    with psycopg.connect(cluster.conninfo()) as conn:
        row = conn.execute(
            "select version from public.yui_channel_guides order by created_at desc limit 1"
        ).fetchone()
    return row[0] if row else None


def _gateway_pid(config: dict[str, Any]) -> int | None:
    """The recorded gateway's pid, if that process is alive and really is our gateway."""
    pid = config.get("gateway_pid")
    if not pid:
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if pid == os.getpid() or GATEWAY_MODULE.encode() in cmdline or b"--foreground" in cmdline:
        return int(pid)
    return None


def _check_port_free(host: str, port: int) -> None:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            raise YuiError(
                f"port {port} on {host} is already in use", hint="pick another with --port"
            ) from None


def _healthy(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/health", timeout=2).ok
    except requests.RequestException:
        return False


def _wait_healthy(child: subprocess.Popen[bytes], port: int, files: RelayFiles) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise YuiError("the gateway stopped as it started:\n" + _tail(files))
        if _healthy(port):
            return
        time.sleep(0.05)
    raise YuiError(
        f"the gateway did not answer on port {port} within {HEALTH_TIMEOUT:.0f} s:\n" + _tail(files)
    )


def _terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _is_zombie(pid):
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (OSError, IndexError):
        return True


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
