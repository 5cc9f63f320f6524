"""Apply the relay's migrations in order, each once, each in its own transaction.

Applied files are recorded with their SHA-256 in `yui_meta.migrations`; re-running is a no-op,
an edited file that was already applied is reported rather than silently skipped, and a
database that knows migrations this checkout doesn't (a newer schema) is refused.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

from state.errors import YuiError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
GUIDE_PATH = Path(__file__).parent / "channel_guide.md"
GUIDE_SPEC_VERSION = 1
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_RENAMED = {
    "0013_groups_route.sql": "0014_groups_route.sql",
    "0014_controls.sql": "0015_controls.sql",
}


class SchemaError(YuiError):
    """The database's schema doesn't match this checkout's migrations."""


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def migrations() -> list[Migration]:
    """This checkout's migrations, in order."""
    files = sorted(p for p in MIGRATIONS_DIR.iterdir() if _NAME.match(p.name))
    return [Migration(p.name, p.read_text(encoding="utf-8")) for p in files]


def migrate(conninfo: str) -> list[str]:
    """Apply what is missing; return the names applied now. Connects as a superuser."""
    applied_now: list[str] = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("create schema if not exists yui_meta")
        conn.execute("revoke all on schema yui_meta from public")
        conn.execute(
            "create table if not exists yui_meta.migrations ("
            " name text primary key, sha256 text not null,"
            " applied_at timestamptz not null default now())"
        )
        _rename_records(conn)
        done: dict[str, str] = dict(
            conn.execute("select name, sha256 from yui_meta.migrations").fetchall()
        )
        known = {m.name for m in migrations()}
        newer = sorted(set(done) - known)
        if newer:
            raise SchemaError(
                f"the database has migrations this checkout doesn't know: {', '.join(newer)}",
                hint="update this checkout (git pull) before running the relay",
            )
        for migration in migrations():
            if migration.name in done:
                if done[migration.name] != migration.digest:
                    raise SchemaError(
                        f"{migration.name} changed after it was applied",
                        hint="add a new migration instead of editing an old one",
                    )
                continue
            try:
                with conn.transaction():
                    conn.execute(migration.sql)
                    conn.execute(
                        "insert into yui_meta.migrations (name, sha256) values (%s, %s)",
                        (migration.name, migration.digest),
                    )
            except psycopg.Error as exc:
                reason = exc.diag.message_primary or str(exc).strip().splitlines()[0]
                raise SchemaError(
                    f"{migration.name} could not be applied: {reason}",
                    hint='nothing of it was kept; the README\'s "Running a relay" says what '
                    "the database user needs",
                ) from None
            applied_now.append(migration.name)
        publish_guide(conn)
    return applied_now


def _rename_records(conn: psycopg.Connection) -> None:
    """0013 was used twice, so later files were renumbered: old relays' records follow them."""
    with conn.transaction():
        for old, new in _RENAMED.items():
            conn.execute("update yui_meta.migrations set name = %s where name = %s", (new, old))


def guide_version(body: str) -> str:
    """`v<N>+<first 8 hex of SHA-256>`: any edit of the text is a new version."""
    return f"v{GUIDE_SPEC_VERSION}+{hashlib.sha256(body.encode()).hexdigest()[:8]}"


def publish_guide(conn: psycopg.Connection) -> str:
    """Store this checkout's channel guide as the newest version, once."""
    body = GUIDE_PATH.read_text(encoding="utf-8")
    version = guide_version(body)
    conn.execute(
        "insert into public.yui_channel_guides (version, body) values (%s, %s)"
        " on conflict (version) do update set created_at = now()"
        " where yui_channel_guides.created_at < (select max(created_at)"
        " from public.yui_channel_guides)",
        (version, body),
    )
    return version


def applied(conninfo: str) -> list[str]:
    """Names of the migrations the database has, or [] if it has none yet."""
    with psycopg.connect(conninfo) as conn:
        exists = conn.execute("select to_regclass('yui_meta.migrations')").fetchone()
        if not exists or exists[0] is None:
            return []
        return [r[0] for r in conn.execute("select name from yui_meta.migrations order by name")]
