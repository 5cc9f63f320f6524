"""Storage's rows: reading and writing `storage.objects` and `storage.buckets` as the caller,
and the JSON shapes Supabase Storage gives them (list, info, buckets)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from relay.gateway.storage_errors import no_bucket, not_found

UNHASHED = "0" * 64  # the rehearsal row's stand-in digest
DEFAULT_CACHE = 3600  # seconds, as Storage's own default `cacheControl`
MAX_CACHE = 365 * 24 * 3600
# The most an upload may be whatever its bucket says (or when it says nothing), as the hosted
# backend's global limit caps every bucket's; yui-media's own limit is this too.
MAX_OBJECT = 50 * 1024 * 1024

OBJECT_COLUMNS = (
    "id::text, bucket_id, name::text, owner_id, size, mime_type, sha256, cache_seconds, created_at"
)
_BUCKET_COLUMNS = "id, name, public, file_size_limit, allowed_mime_types, created_at"
_MAX_AGE = re.compile(r"(?:^|[\s,])max-age=([0-9]{1,15})(?:$|[\s,])")


def cache_seconds(asked: str | None) -> int | None:
    """What an upload's `cacheControl` asks for, in seconds: `3600` (a form field) or a header
    like `max-age=3600`; `no-cache`/`no-store` is 0; anything else is the default (None)."""
    if asked is None:
        return None
    asked = asked.strip().lower()
    found = asked if asked.isascii() and asked.isdigit() else None
    if found is None and (match := _MAX_AGE.search(asked)):
        found = match.group(1)
    if found is not None:
        return min(int(found), MAX_CACHE)
    return 0 if "no-cache" in asked or "no-store" in asked else None


def max_age(row: dict[str, Any]) -> int:
    seconds = row["cache_seconds"]
    return DEFAULT_CACHE if seconds is None else int(seconds)


def describe(row: dict[str, Any]) -> dict[str, Any]:
    """An object as Supabase's list and delete answers show it."""
    return {
        "name": row["name"],
        "id": row["id"],
        "bucket_id": row["bucket_id"],
        "owner": row["owner_id"],
        "created_at": row["created_at"],
        "updated_at": row["created_at"],
        "last_accessed_at": row["created_at"],
        "metadata": {
            "eTag": f'"{row["sha256"]}"',
            "size": row["size"],
            "mimetype": row["mime_type"],
            "cacheControl": f"max-age={max_age(row)}",
            "lastModified": row["created_at"],
            "contentLength": row["size"],
            "httpStatusCode": 200,
        },
    }


def folder(name: str) -> dict[str, Any]:
    keys = ("id", "updated_at", "created_at", "last_accessed_at", "metadata")
    return {"name": name, **dict.fromkeys(keys)}


def info(row: dict[str, Any]) -> dict[str, Any]:
    """An object as Storage's `/object/info` shows it. Objects never change, so an object has
    one version, named by its id; the relay keeps no user metadata, so `metadata` is empty."""
    return {
        "id": row["id"],
        "version": row["id"],
        "name": row["name"],
        "bucket_id": row["bucket_id"],
        "size": row["size"],
        "content_type": row["mime_type"],
        "cache_control": f"max-age={max_age(row)}",
        "etag": f'"{row["sha256"]}"',
        "metadata": {},
        "last_modified": row["created_at"],
        "created_at": row["created_at"],
    }


def bucket_json(row: dict[str, Any]) -> dict[str, Any]:
    """A bucket as Storage shows it (supabase-py requires every one of these keys)."""
    return {
        "id": row["id"],
        "name": row["name"],
        "owner": "",
        "public": row["public"],
        "type": "STANDARD",
        "file_size_limit": row["file_size_limit"],
        "allowed_mime_types": row["allowed_mime_types"],
        "created_at": row["created_at"],
        "updated_at": row["created_at"],
    }


async def find(conn: psycopg.AsyncConnection, bucket: str, name: str) -> dict[str, Any]:
    """The object at `name`, as the connection's role sees it; else 404."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"select {OBJECT_COLUMNS} from storage.objects where bucket_id = %s and name = %s",
            (bucket, name),
        )
        row = await cur.fetchone()
    if row is None:
        raise not_found()
    return row


async def visible(conn: psycopg.AsyncConnection, bucket: str, wanted: list[str]) -> set[str]:
    """Which of these names the connection's role can see."""
    cur = await conn.execute(
        "select name::text from storage.objects where bucket_id = %s and name = any(%s)",
        (bucket, wanted),
    )
    return {name for (name,) in await cur.fetchall()}


async def buckets(conn: psycopg.AsyncConnection, bucket: str | None = None) -> list[dict[str, Any]]:
    """The buckets the connection's role can see (one, or all), by name."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"select {_BUCKET_COLUMNS} from storage.buckets"
            " where %(id)s::text is null or id = %(id)s order by name",
            {"id": bucket},
        )
        return await cur.fetchall()


async def bucket_rules(conn: psycopg.AsyncConnection, bucket: str) -> tuple[int, list[str] | None]:
    """A bucket's size limit (never past MAX_OBJECT) and its allowed types; 404 if unseen."""
    found = await buckets(conn, bucket)
    if not found:
        raise no_bucket()
    limit = found[0]["file_size_limit"]
    return min(limit or MAX_OBJECT, MAX_OBJECT), found[0]["allowed_mime_types"]


async def insert(
    conn: psycopg.AsyncConnection,
    bucket: str,
    name: str,
    *,
    object_id: str | None = None,
    size: int = 0,
    mime: str,
    sha256: str = UNHASHED,
    cache: int | None = None,
) -> str:
    """Insert an object's row as the connection's role (its policies decide); its id."""
    object_id = object_id or str(uuid.uuid4())
    await conn.execute(
        "insert into storage.objects (id, bucket_id, name, size, mime_type, sha256, cache_seconds)"
        " values (%s, %s, %s, %s, %s, %s, %s)",
        (object_id, bucket, name, size, mime, sha256, cache),
    )
    return object_id


async def may_write(
    conn: psycopg.AsyncConnection, bucket: str, name: str, allowed: list[str] | None
) -> None:
    """Ask the database, as the caller, whether `name` may be written now: a row inserted and
    rolled back, so the path rules (403) and no-overwrite (409) answer before any byte is read.
    It is tried with a type the bucket takes, so the path is judged first, as Storage does; the
    upload's own type is checked once it is known (415), and for real by the final insert."""
    mime = allowed[0] if allowed else "application/octet-stream"
    async with conn.transaction(force_rollback=True):
        await insert(conn, bucket, name, mime=mime)
