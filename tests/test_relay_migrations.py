"""The relay's migration files: one number each, and relays migrated before the renumbering
upgrade silently."""

from __future__ import annotations

import re
from collections import Counter

import psycopg
import pytest

from relay.schema import MIGRATIONS_DIR, SchemaError, applied, migrate, migrations

# The names these files had when 0013 was used twice, as an old relay recorded them.
OLD_NAMES = {
    "0014_groups_route.sql": "0013_groups_route.sql",
    "0015_controls.sql": "0014_controls.sql",
}


def records(conninfo: str) -> dict[str, str]:
    with psycopg.connect(conninfo) as conn:
        return dict(conn.execute("select name, sha256 from yui_meta.migrations").fetchall())


def test_every_file_has_its_own_number() -> None:
    names = sorted(p.name for p in MIGRATIONS_DIR.iterdir())
    assert names, "no migrations found"
    assert [n for n in names if not re.fullmatch(r"\d{4}_[a-z0-9_]+\.sql", n)] == []
    counts = Counter(n[:4] for n in names)
    assert [number for number, count in counts.items() if count > 1] == []


def test_second_run_applies_nothing(scratch_db: str) -> None:
    assert migrate(scratch_db) == [m.name for m in migrations()]
    assert migrate(scratch_db) == []


def test_relay_migrated_under_old_names_upgrades(scratch_db: str) -> None:
    migrate(scratch_db)
    with psycopg.connect(scratch_db) as conn:
        for new, old in OLD_NAMES.items():
            conn.execute("update yui_meta.migrations set name = %s where name = %s", (old, new))
    assert set(OLD_NAMES.values()) <= set(applied(scratch_db))

    assert migrate(scratch_db) == []
    assert records(scratch_db) == {m.name: m.digest for m in migrations()}


def test_unknown_migration_is_still_refused(scratch_db: str) -> None:
    migrate(scratch_db)
    with psycopg.connect(scratch_db) as conn:
        conn.execute("insert into yui_meta.migrations (name, sha256) values ('9999_later.sql', '')")
    with pytest.raises(SchemaError, match=r"9999_later\.sql"):
        migrate(scratch_db)
