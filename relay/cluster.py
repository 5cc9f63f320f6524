"""The local relay's PostgreSQL: find the binaries, create the cluster, start and stop it.

Postgres refuses to run as root, so under root the cluster belongs to the `postgres` user and
lives where that user can reach it (its home, keyed by the relay folder); otherwise it lives in
the relay folder itself. Postgres listens on a Unix socket in a private folder and on no TCP
port at all: only the relay's owner (and root) can connect, so local trust auth is safe.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import pwd
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from state.errors import YuiError

PG_PORT = 5432  # only names the socket file; there is no TCP listener
SUPERUSER = "postgres"
DATABASE = "yui"
_KEY = re.compile(r"[0-9a-f]{12}")
MAX_SOCKET_DIR = 90  # a socket path must fit in 107 bytes, with ".s.PGSQL.5432" after it


class PostgresMissing(YuiError):
    """PostgreSQL's server binaries are not installed."""


@dataclass(frozen=True)
class Cluster:
    """One PostgreSQL cluster serving one relay."""

    base: Path  # holds data/, the log and (usually) the socket folder
    bindir: Path
    run_as: str | None  # OS user to run the server as; None means the current user
    key: str = ""  # names the cluster in the machine's register (`yui relay list`)
    folder: Path | None = None  # the relay folder it serves, when known

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def log(self) -> Path:
        return self.base / "postgres.log"

    @property
    def socket_dir(self) -> Path:
        preferred = self.base / "run"
        if len(str(preferred)) <= MAX_SOCKET_DIR:
            return preferred
        digest = hashlib.sha256(str(self.base).encode()).hexdigest()[:12]
        return Path("/tmp") / f"yui-pg-{digest}"

    def conninfo(self, user: str = SUPERUSER, dbname: str = DATABASE) -> str:
        return f"host={self.socket_dir} port={PG_PORT} user={user} dbname={dbname}"

    # --- running the server's tools -----------------------------------------------------

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        kwargs: dict = {}
        if self.run_as:
            kwargs = {
                "user": self.run_as,
                "group": _primary_group(self.run_as),
                "extra_groups": [],
                "cwd": "/",
            }
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            check=check,
            capture_output=True,
            text=True,
            **kwargs,
        )

    def _own(self, path: Path) -> None:
        """Create `path` as a private folder owned by the user the server runs as."""
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path, 0o700)
        self._give(path)

    def _give(self, path: Path) -> None:
        """Hand `path` to the user the server runs as (nothing to do when that is us)."""
        if self.run_as:
            entry = pwd.getpwnam(self.run_as)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    # --- lifecycle ------------------------------------------------------------------------

    def initialized(self) -> bool:
        return (self.data / "PG_VERSION").exists()

    def init(self) -> None:
        """Create the cluster once: a superuser named postgres, UTF-8, trust on the socket.
        It is entered in the machine's register first, so even a failed init can be found."""
        self._own(self.base)
        register(self.key, self.folder)
        self._own(self.data)
        result = self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "-E",
            "UTF8",
            "--locale=C",
            "--auth=trust",
            check=False,
        )
        if result.returncode != 0:
            raise YuiError(f"initdb failed: {result.stderr.strip() or result.stdout.strip()}")
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\ninclude_if_exists = 'yui.conf'\n")

    def _write_settings(self) -> None:
        settings = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.socket_dir}'",
            "port": str(PG_PORT),
            "max_connections": "200",
            "timezone": "'UTC'",
            "log_timezone": "'UTC'",
        }
        text = "".join(f"{k} = {v}\n" for k, v in settings.items())
        path = self.data / "yui.conf"
        path.write_text(text, encoding="utf-8")
        self._give(path)

    def running(self) -> bool:
        if not self.initialized():
            return False
        return self._run("pg_ctl", "status", "-D", str(self.data), check=False).returncode == 0

    def start(self) -> None:
        if self.running():
            return
        self._own(self.socket_dir)
        self._write_settings()
        if not self.log.exists():
            self.log.touch(mode=0o600)
            self._give(self.log)
        result = self._run(
            "pg_ctl",
            "start",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            check=False,
        )
        if result.returncode != 0:
            tail = log_tail(self.log)
            raise YuiError(f"PostgreSQL did not start: {result.stderr.strip()}\n{tail}")

    def stop(self) -> None:
        if self.running():
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "60")

    def remove(self) -> None:
        """Delete the cluster's files and its entry in the register (the caller stops it
        first)."""
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        if self.key:
            shutil.rmtree(register_dir() / self.key, ignore_errors=True)

    def size(self) -> int:
        """Bytes on disk under the cluster's folder."""
        return folder_size(self.base)


def relay_key(relay_dir: Path) -> str:
    """The 12 hex that name a relay folder's cluster on this machine."""
    return hashlib.sha256(str(relay_dir.resolve()).encode()).hexdigest()[:12]


def cluster_for(relay_dir: Path) -> Cluster:
    """The cluster that serves the relay in `relay_dir`, wherever this user can run it."""
    bindir = find_bindir()
    key = relay_key(relay_dir)
    if os.geteuid() != 0:
        return Cluster(relay_dir / "postgres", bindir, None, key, relay_dir)
    return Cluster(register_dir() / key, bindir, SUPERUSER, key, relay_dir)


# --- the machine's register of clusters -------------------------------------------------------
#
# Every cluster is entered under `register_dir()/<key>/` with a file naming its relay folder, so
# `yui relay list` finds it even once that folder is gone (a deleted temporary $YUI_HOME). Under
# root the entry is the cluster's own folder in ~postgres; otherwise the cluster lives inside
# the relay folder and the entry, in the user's state folder, only points at it.

RELAY_FILE = "relay-folder"


def register_dir() -> Path:
    """Where this user's clusters are entered: ~postgres/yui-relays under root, else
    $XDG_STATE_HOME/yui/relays (default ~/.local/state/yui/relays)."""
    if os.geteuid() == 0:
        try:
            return Path(pwd.getpwnam(SUPERUSER).pw_dir) / "yui-relays"
        except KeyError as exc:
            raise PostgresMissing(
                "running as root needs the 'postgres' user to run PostgreSQL as",
                hint="install Debian's postgresql-15 package: apt-get install -y postgresql-15",
            ) from exc
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "yui" / "relays"


def register(key: str, relay_dir: Path | None) -> None:
    """Enter cluster `key` in the register, naming its relay folder when known."""
    if not key:
        return
    entry = register_dir() / key
    entry.mkdir(parents=True, exist_ok=True, mode=0o700)
    if relay_dir is not None:
        (entry / RELAY_FILE).write_text(str(relay_dir.resolve()) + "\n", encoding="utf-8")


def registered_folder(key: str) -> Path | None:
    """The relay folder cluster `key` was made for, if the register says."""
    try:
        text = (register_dir() / key / RELAY_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text) if text else None


def registered_keys() -> list[str]:
    """Every cluster key in this user's register, sorted."""
    root = register_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _KEY.fullmatch(p.name))


def cluster_by_key(key: str) -> Cluster:
    """The cluster entered under `key` (its relay folder may be gone)."""
    bindir = find_bindir()
    folder = registered_folder(key)
    if os.geteuid() == 0:
        return Cluster(register_dir() / key, bindir, SUPERUSER, key, folder)
    base = folder / "postgres" if folder else register_dir() / key / "missing"
    return Cluster(base, bindir, None, key, folder)


def folder_size(path: Path) -> int:
    """Bytes of the regular files under `path` (0 when it is gone)."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def find_bindir() -> Path:
    """PostgreSQL's server binaries: `$YUI_PG_BIN`, else the newest Debian install, else PATH."""
    explicit = os.environ.get("YUI_PG_BIN")
    candidates = [explicit] if explicit else []
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(str(Path(on_path).resolve().parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    raise PostgresMissing(
        "PostgreSQL's server binaries (initdb, pg_ctl) were not found",
        hint="install Debian's postgresql-15 package, or set YUI_PG_BIN to their folder",
    )


def _primary_group(user: str) -> int:
    return pwd.getpwnam(user).pw_gid


def log_tail(path: Path, lines: int = 15) -> str:
    """The last `lines` lines of a log file, or "" if it can't be read."""
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
