"""Storage: the hosted backend's `/storage/v1` API over one private bucket, yui-media, as the
official clients (supabase-py, supabase-js) call it.

Every call runs as the caller (`Database.as_role`), so the policies of migration 0008 decide who
reads, uploads, signs, lists and deletes what; this module only moves bytes and shapes answers as
Supabase Storage does, errors included (`storage_errors`). An object nobody may see answers 404,
like one that doesn't exist. Bytes live on disk (`storage_files`), metadata in Postgres; writes
are in `storage_upload`. Nothing is ever overwritten, and the one bucket can't be created,
changed or deleted: those calls are refused in Storage's shape, as is any route it doesn't serve.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jwt
import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Route

from relay.gateway.db import Database
from relay.gateway.functions import answer
from relay.gateway.storage_errors import (
    Handler,
    answering,
    bad_token,
    caller,
    denied,
    invalid,
    json_object,
    link_claims,
    names,
    no_bucket,
    not_found,
    route_not_found,
    whole_number,
)
from relay.gateway.storage_files import MediaFolder
from relay.gateway.storage_rows import (
    OBJECT_COLUMNS,
    bucket_json,
    buckets,
    describe,
    find,
    folder,
    info,
    max_age,
    visible,
)
from relay.gateway.storage_upload import Uploads
from relay.keys import ALGORITHM

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings

ROOT = "/storage/v1"
PREFIX = f"{ROOT}/object"
MAX_SIGN_SECONDS = 365 * 24 * 3600  # a signed link is a bearer link: a year at most
MAX_PREFIXES = 1000  # names per delete or batch sign call, as Supabase allows
NOT_SIGNED = "Either the object does not exist or you do not have access to it"
# What a list may be sorted by; the relay's objects never change, so every time is created_at.
_SORTS = {
    "name": 'entry collate "C"',
    "created_at": "created_at",
    "updated_at": "created_at",
    "last_accessed_at": "created_at",
}
_LISTING = """
with visible as (
  select {columns}, substr(name, char_length(%(prefix)s) + 1) as rest
  from storage.objects
  where bucket_id = %(bucket)s and starts_with(name, %(prefix)s)
)
select * from (
  select distinct split_part(rest, '/', 1) as entry, true as is_folder,
    null::text as id, null::text as bucket_id, null::text as name,
    null::uuid as owner_id, null::bigint as size, null::text as mime_type,
    null::text as sha256, null::integer as cache_seconds, null::timestamptz as created_at
  from visible where strpos(rest, '/') > 0
  union all
  select rest, false, id, bucket_id, rest, owner_id, size, mime_type, sha256, cache_seconds,
    created_at
  from visible where strpos(rest, '/') = 0
) entries
where starts_with(lower(entry), lower(%(search)s))
order by {order}
limit %(limit)s offset %(offset)s
"""


def sort_order(body: dict[str, Any]) -> sql.Composable:
    """A list's `sortBy` (`{"column": "name", "order": "asc"}` by default) as SQL."""
    sort = body.get("sortBy") or {}
    column = sort.get("column", "name") if isinstance(sort, dict) else None
    order = sort.get("order", "asc") if isinstance(sort, dict) else None
    if column not in _SORTS or order not in ("asc", "desc"):
        raise invalid(f"sortBy must name a column ({', '.join(_SORTS)}) and an order (asc, desc)")
    return sql.SQL(f'{_SORTS[column]} {order}, entry collate "C" {order}')


class Storage:
    """The read, sign, list, delete and bucket endpoints, over one database and media folder."""

    def __init__(self, db: Database, secret: str, files: MediaFolder) -> None:
        self.db = db
        self.secret = secret
        self.files = files

    @asynccontextmanager
    async def as_caller(self, request: Request) -> AsyncIterator[psycopg.AsyncConnection]:
        role, claims = caller(request, self.secret)
        async with self.db.as_role(role, claims) as conn:
            yield conn

    def serve(self, request: Request, row: dict[str, Any]) -> Response:
        """The object's bytes (ranges too, which video players need); with `?download` (or
        `?download=<name>`), as an attachment named after the object (or that name)."""
        path = self.files.path(row["id"])
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise not_found() from None
        headers = {
            "etag": f'"{row["sha256"]}"',
            "cache-control": f"private, max-age={max_age(row)}",
            "x-content-type-options": "nosniff",
        }
        download = request.query_params.get("download")
        filename = None if download is None else download or row["name"].rsplit("/", 1)[-1]
        return FileResponse(
            path, media_type=row["mime_type"], headers=headers, stat_result=stat, filename=filename
        )

    async def read(self, request: Request) -> Response:
        async with self.as_caller(request) as conn:
            row = await find(conn, request.path_params["bucket"], request.path_params["path"])
        return self.serve(request, row)

    async def info(self, request: Request) -> Response:
        """`GET /object/info/<bucket>/<path>`, which `info()` and `exists()` read."""
        async with self.as_caller(request) as conn:
            row = await find(conn, request.path_params["bucket"], request.path_params["path"])
        return answer(200, info(row))

    def link(self, bucket: str, name: str, seconds: int) -> str:
        now = time.time()
        claims = {"url": f"{bucket}/{name}", "iat": int(now), "exp": math.ceil(now + seconds)}
        token = jwt.encode(claims, self.secret, algorithm=ALGORITHM)
        return f"/object/sign/{quote(bucket)}/{quote(name)}?token={token}"

    async def sign(self, request: Request) -> Response:
        """A link that serves the object to whoever holds it for at least `expiresIn` seconds.
        Only someone who may read the object now can sign it, so a revoked host can't sign."""
        bucket, name = request.path_params["bucket"], request.path_params["path"]
        seconds = whole_number(await json_object(request), "expiresIn", 0, 1, MAX_SIGN_SECONDS)
        async with self.as_caller(request) as conn:
            await find(conn, bucket, name)
        return answer(200, {"signedURL": self.link(bucket, name, seconds)})

    async def sign_many(self, request: Request) -> Response:
        """`createSignedUrls`: one link per name the caller may read now, an error for others."""
        bucket = request.path_params["bucket"]
        body = await json_object(request)
        seconds = whole_number(body, "expiresIn", 0, 1, MAX_SIGN_SECONDS)
        wanted = names(body, "paths", MAX_PREFIXES)
        async with self.as_caller(request) as conn:
            seen = await visible(conn, bucket, wanted)
        return answer(
            200,
            [
                {"error": None, "path": name, "signedURL": self.link(bucket, name, seconds)}
                if name in seen
                else {"error": NOT_SIGNED, "path": name, "signedURL": None}
                for name in wanted
            ],
        )

    async def signed(self, request: Request) -> Response:
        """Download through a signed link; no other credential is needed or looked at."""
        bucket, name = request.path_params["bucket"], request.path_params["path"]
        if "upload" in link_claims(request, self.secret, f"{bucket}/{name}"):
            raise bad_token("An upload token doesn't download")
        async with self.db.service() as conn:
            row = await find(conn, bucket, name)
        return self.serve(request, row)

    async def public(self, request: Request) -> Response:
        raise invalid("The bucket is private: use a signed URL")

    async def remove(self, request: Request) -> Response:
        """Delete the named objects the caller may delete; answers the ones deleted."""
        prefixes = names(await json_object(request), "prefixes", MAX_PREFIXES)
        async with self.as_caller(request) as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "delete from storage.objects where bucket_id = %s and name = any(%s)"
                f" returning {OBJECT_COLUMNS}",
                (request.path_params["bucket"], prefixes),
            )
            rows = await cur.fetchall()
        self.files.remove([row["id"] for row in rows])
        return answer(200, [describe(row) for row in rows])

    async def listing(self, request: Request) -> Response:
        """One folder level under `prefix`: sub-folders (id null) and objects, sorted as
        `sortBy` says, those starting with `search` (any case) only."""
        body = await json_object(request)
        prefix, search = body.get("prefix", ""), body.get("search", "")
        if not isinstance(prefix, str) or not isinstance(search, str):
            raise invalid("prefix and search must be strings")
        prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        query = sql.SQL(_LISTING).format(columns=sql.SQL(OBJECT_COLUMNS), order=sort_order(body))
        params = {
            "prefix": prefix,
            "search": search,
            "bucket": request.path_params["bucket"],
            "limit": whole_number(body, "limit", 100, 1, 1000),
            "offset": whole_number(body, "offset", 0, 0, 2**31 - 1),
        }
        async with self.as_caller(request) as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, params)
            rows = await cur.fetchall()
        entries = [folder(row["entry"]) if row["is_folder"] else describe(row) for row in rows]
        return answer(200, entries)

    async def list_buckets(self, request: Request) -> Response:
        """`listBuckets`: the buckets the caller sees (yui-media), with Storage's options."""
        options = dict(request.query_params)
        search = options.get("search", "").lower()
        column = options.get("sortColumn", "name")
        if column not in ("id", "name", "created_at", "updated_at"):
            raise invalid("sortColumn must be id, name, created_at or updated_at")
        offset = whole_number(options, "offset", 0, 0, 2**31 - 1)
        limit = whole_number(options, "limit", 1000, 1, 1000)
        async with self.as_caller(request) as conn:
            rows = [bucket_json(row) for row in await buckets(conn)]
        rows = [row for row in rows if search in row["name"].lower()]
        rows.sort(key=lambda row: row[column], reverse=options.get("sortOrder") == "desc")
        return answer(200, rows[offset : offset + limit])

    async def get_bucket(self, request: Request) -> Response:
        async with self.as_caller(request) as conn:
            found = await buckets(conn, request.path_params["bucket"])
        if not found:
            raise no_bucket()
        return answer(200, bucket_json(found[0]))

    async def fixed_bucket(self, request: Request) -> Response:
        """Creating, changing, emptying or deleting a bucket: the relay has one, for good."""
        caller(request, self.secret)
        raise denied("The relay has one bucket, yui-media: it can't be created, changed or deleted")

    async def unserved(self, request: Request) -> Response:
        raise route_not_found(request)


def routes(db: Database, settings: GatewaySettings) -> list[BaseRoute]:
    files = MediaFolder(settings.folder / "media")
    api = Storage(db, settings.jwt_secret, files)
    writes = Uploads(db, settings.jwt_secret, files)
    path = "{bucket}/{path:path}"
    table: list[tuple[str, Handler, list[str]]] = [
        (f"{PREFIX}/sign/{{bucket}}", api.sign_many, ["POST"]),
        (f"{PREFIX}/sign/{path}", api.sign, ["POST"]),
        (f"{PREFIX}/sign/{path}", api.signed, ["GET"]),
        (f"{PREFIX}/upload/sign/{path}", writes.sign_upload, ["POST"]),
        (f"{PREFIX}/upload/sign/{path}", writes.signed_upload, ["PUT"]),
        (f"{PREFIX}/list/{{bucket}}", api.listing, ["POST"]),
        (f"{PREFIX}/list-v2/{{bucket}}", api.unserved, ["POST"]),
        (f"{PREFIX}/info/public/{path}", api.public, ["GET"]),
        (f"{PREFIX}/info/authenticated/{path}", api.info, ["GET"]),
        (f"{PREFIX}/info/{path}", api.info, ["GET"]),
        (f"{PREFIX}/move", writes.move, ["POST"]),
        (f"{PREFIX}/copy", writes.copy, ["POST"]),
        (f"{PREFIX}/public/{path}", api.public, ["GET"]),
        (f"{PREFIX}/authenticated/{path}", api.read, ["GET"]),
        (f"{PREFIX}/{{bucket}}", api.remove, ["DELETE"]),
        (f"{PREFIX}/{path}", writes.upload, ["POST", "PUT"]),
        (f"{PREFIX}/{path}", api.read, ["GET"]),
        (f"{ROOT}/bucket", api.list_buckets, ["GET"]),
        (f"{ROOT}/bucket", api.fixed_bucket, ["POST"]),
        (f"{ROOT}/bucket/{{bucket}}", api.get_bucket, ["GET"]),
        (f"{ROOT}/bucket/{{bucket}}", api.fixed_bucket, ["PUT", "DELETE"]),
        (f"{ROOT}/bucket/{{bucket}}/empty", api.fixed_bucket, ["POST"]),
        # Last: any other route or method under /storage/v1, in Storage's shape (a browser's
        # preflight never gets here: the gateway's BrowserGuard answers it).
        (
            f"{ROOT}/{{rest:path}}",
            api.unserved,
            ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
        ),
    ]
    return [Route(route, answering(handler), methods=methods) for route, handler, methods in table]


@asynccontextmanager
async def lifespan(db: Database, settings: GatewaySettings) -> AsyncIterator[None]:
    """The media folder exists (0700) before the first upload; stale partial uploads go."""
    MediaFolder(settings.folder / "media").prepare()
    yield
