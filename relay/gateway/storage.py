"""Storage: the hosted backend's `/storage/v1` object API over one private bucket, yui-media.

Every call runs as the caller (`Database.as_role`), so the policies of migration 0008 decide who
reads, uploads, signs, lists and deletes what; this module only moves bytes and shapes answers as
Supabase Storage does (`{"statusCode", "error", "message"}`). An object nobody may see answers 404,
like one that doesn't exist. Bytes live on disk (`storage_files`), metadata in Postgres.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jwt
import psycopg
from psycopg.rows import dict_row
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Route

from relay.gateway.db import Database
from relay.gateway.functions import MAX_BODY, BodyTooLarge, answer, read_body, request_claims
from relay.gateway.storage_files import MediaFolder, TooLarge
from relay.keys import ALGORITHM, InvalidToken

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings

log = logging.getLogger("yui.gateway")
PREFIX = "/storage/v1/object"
MAX_SIGN_SECONDS = 365 * 24 * 3600  # a signed link is a bearer link: a year at most
MAX_PREFIXES = 1000  # names per delete call, as Supabase allows
UNHASHED = "0" * 64  # the rehearsal row's stand-in digest
CACHE = "private, max-age=3600"
# The most an upload may be whatever its bucket says (or when it says nothing), as the hosted
# backend's global limit caps every bucket's; yui-media's own limit is this too.
MAX_OBJECT = 50 * 1024 * 1024

_OBJECT_COLUMNS = "id::text, bucket_id, name::text, owner_id, size, mime_type, sha256, created_at"


class StorageError(Exception):
    """A refusal, in Supabase Storage's error shape."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message

    def response(self) -> Response:
        body = {"statusCode": str(self.status), "error": self.error, "message": self.message}
        return answer(self.status, body)


def not_found() -> StorageError:
    return StorageError(404, "not_found", "Object not found")


def too_large() -> StorageError:
    return StorageError(413, "Payload too large", "The object exceeded the maximum allowed size")


def database_error(exc: psycopg.Error) -> StorageError:
    """What the caller sees when the database said no; never the statement or its values."""
    state = exc.sqlstate or ""
    message = exc.diag.message_primary or "refused"
    if state == "42501":  # a policy's with-check, or no grant at all for this role
        return StorageError(403, "Unauthorized", message)
    if state == "23505":
        return StorageError(409, "Duplicate", "The resource already exists")
    if state == "PT413":
        return StorageError(413, "Payload too large", message)
    if state == "PT415":
        return StorageError(415, "invalid_mime_type", message)
    if state[:2] in ("22", "23"):
        return StorageError(400, "InvalidRequest", message)
    if isinstance(exc, psycopg.OperationalError):
        log.warning("database unavailable: %s", exc)
        return StorageError(503, "DatabaseError", "The database is unavailable")
    log.error("storage failed in the database: %s", state or exc)
    return StorageError(500, "InternalError", "Internal server error")


Handler = Callable[[Request], Awaitable[Response]]


def answering(handler: Handler) -> Handler:
    """Turn refusals and database errors into Storage's error responses."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except StorageError as exc:
            return exc.response()
        except psycopg.Error as exc:
            return database_error(exc).response()
        except ClientDisconnect:
            return StorageError(400, "InvalidRequest", "The upload was cut short").response()

    return endpoint


def caller(request: Request, secret: str) -> tuple[str, dict[str, Any]]:
    """The role and claims the request runs with: a bearer token this relay signed is required."""
    try:
        claims = request_claims(request, secret)
    except InvalidToken as exc:
        raise StorageError(401, "InvalidJWT", exc.reason) from None
    if claims is None:
        raise StorageError(401, "Unauthorized", "A bearer token is required")
    return claims["role"], claims


async def json_object(request: Request) -> dict[str, Any]:
    """The body of a sign, list or delete call: a JSON object of at most MAX_BODY bytes."""
    try:
        body = json.loads(await read_body(request))
    except BodyTooLarge:
        raise StorageError(
            413, "Payload too large", f"The request body is larger than {MAX_BODY} bytes"
        ) from None
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser takes
        body = None
    if not isinstance(body, dict):
        raise StorageError(400, "InvalidRequest", "Expected a JSON object")
    return body


def whole_number(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise StorageError(400, "InvalidRequest", f"{key} must be a whole number {low}..{high}")
    return value


def media_type(header: str | None) -> str:
    """The content-type without parameters; the bucket's list then decides if it may be stored."""
    return (header or "application/octet-stream").split(";")[0].strip().lower()


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
            "cacheControl": CACHE,
            "lastModified": row["created_at"],
            "contentLength": row["size"],
            "httpStatusCode": 200,
        },
    }


def folder(name: str) -> dict[str, Any]:
    keys = ("id", "updated_at", "created_at", "last_accessed_at", "metadata")
    return {"name": name, **dict.fromkeys(keys)}


async def find(conn: psycopg.AsyncConnection, bucket: str, name: str) -> dict[str, Any]:
    """The object at `name`, as the connection's role sees it; else 404."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"select {_OBJECT_COLUMNS} from storage.objects where bucket_id = %s and name = %s",
            (bucket, name),
        )
        row = await cur.fetchone()
    if row is None:
        raise not_found()
    return row


async def insert(
    conn: psycopg.AsyncConnection,
    object_id: str,
    bucket: str,
    name: str,
    size: int,
    mime: str,
    sha256: str,
) -> None:
    await conn.execute(
        "insert into storage.objects (id, bucket_id, name, size, mime_type, sha256)"
        " values (%s, %s, %s, %s, %s, %s)",
        (object_id, bucket, name, size, mime, sha256),
    )


class Storage:
    """The endpoints, over one database and one media folder."""

    def __init__(self, db: Database, secret: str, files: MediaFolder) -> None:
        self.db = db
        self.secret = secret
        self.files = files

    @asynccontextmanager
    async def as_caller(self, request: Request) -> AsyncIterator[psycopg.AsyncConnection]:
        role, claims = caller(request, self.secret)
        async with self.db.as_role(role, claims) as conn:
            yield conn

    def serve(self, row: dict[str, Any]) -> Response:
        """The object's bytes (ranges too, which video players need)."""
        path = self.files.path(row["id"])
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise not_found() from None
        headers = {
            "etag": f'"{row["sha256"]}"',
            "cache-control": CACHE,
            "x-content-type-options": "nosniff",
        }
        return FileResponse(path, media_type=row["mime_type"], headers=headers, stat_result=stat)

    async def upload(self, request: Request) -> Response:
        """Store a new object. The database is asked twice, as the caller: once before the body
        is read (so a refusal costs no upload), and for real once the bytes are on disk."""
        bucket, name = request.path_params["bucket"], request.path_params["path"]
        if request.method == "PUT" or request.headers.get("x-upsert", "").lower() == "true":
            raise StorageError(
                403, "Unauthorized", "Objects are never overwritten: upload a new path"
            )
        mime = media_type(request.headers.get("content-type"))
        object_id = str(uuid.uuid4())
        async with self.as_caller(request) as conn:
            cur = await conn.execute(
                "select file_size_limit from storage.buckets where id = %s", (bucket,)
            )
            found = await cur.fetchone()
            if found is None:
                raise StorageError(404, "Bucket not found", "Bucket not found")
            limit = min(found[0] or MAX_OBJECT, MAX_OBJECT)
            async with conn.transaction(force_rollback=True):
                await insert(conn, object_id, bucket, name, 0, mime, UNHASHED)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large()
        try:
            upload = await self.files.receive(request.stream(), limit)
        except TooLarge:
            raise too_large() from None
        placed = None
        try:
            async with self.as_caller(request) as conn:
                await insert(conn, object_id, bucket, name, upload.size, mime, upload.sha256)
                placed = self.files.place(upload, object_id)
        except BaseException:
            upload.temp.unlink(missing_ok=True)
            if placed is not None:
                placed.unlink(missing_ok=True)
            raise
        return answer(200, {"Key": f"{bucket}/{name}", "Id": object_id})

    async def read(self, request: Request) -> Response:
        async with self.as_caller(request) as conn:
            row = await find(conn, request.path_params["bucket"], request.path_params["path"])
        return self.serve(row)

    async def sign(self, request: Request) -> Response:
        """A link that serves the object to whoever holds it for at least `expiresIn` seconds.
        Only someone who may read the object now can sign it, so a revoked host can't sign."""
        bucket, name = request.path_params["bucket"], request.path_params["path"]
        seconds = whole_number(await json_object(request), "expiresIn", 0, 1, MAX_SIGN_SECONDS)
        async with self.as_caller(request) as conn:
            await find(conn, bucket, name)
        now = time.time()
        claims = {"url": f"{bucket}/{name}", "iat": int(now), "exp": math.ceil(now + seconds)}
        token = jwt.encode(claims, self.secret, algorithm=ALGORITHM)
        link = f"/object/sign/{quote(bucket)}/{quote(name)}?token={token}"
        return answer(200, {"signedURL": link})

    async def signed(self, request: Request) -> Response:
        """Download through a signed link; no other credential is needed or looked at."""
        bucket, name = request.path_params["bucket"], request.path_params["path"]
        token = request.query_params.get("token")
        if not token:
            raise StorageError(400, "InvalidJWT", "A token query parameter is required")
        try:
            claims = jwt.decode(
                token, self.secret, algorithms=[ALGORITHM], options={"require": ["exp", "url"]}
            )
        except jwt.ExpiredSignatureError:
            raise StorageError(400, "InvalidJWT", "jwt expired") from None
        except jwt.InvalidTokenError:
            raise StorageError(400, "InvalidJWT", "invalid signature") from None
        if claims["url"] != f"{bucket}/{name}":
            raise StorageError(400, "InvalidSignature", "The url does not match the signature")
        async with self.db.service() as conn:
            row = await find(conn, bucket, name)
        return self.serve(row)

    async def public(self, request: Request) -> Response:
        raise StorageError(400, "InvalidRequest", "The bucket is private: use a signed URL")

    async def remove(self, request: Request) -> Response:
        """Delete the named objects the caller may delete; answers the ones deleted."""
        prefixes = (await json_object(request)).get("prefixes")
        if (
            not isinstance(prefixes, list)
            or not 1 <= len(prefixes) <= MAX_PREFIXES
            or not all(isinstance(p, str) for p in prefixes)
        ):
            raise StorageError(400, "InvalidRequest", "prefixes must be a list of object names")
        async with self.as_caller(request) as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "delete from storage.objects where bucket_id = %s and name = any(%s)"
                f" returning {_OBJECT_COLUMNS}",
                (request.path_params["bucket"], prefixes),
            )
            rows = await cur.fetchall()
        self.files.remove([row["id"] for row in rows])
        return answer(200, [describe(row) for row in rows])

    async def listing(self, request: Request) -> Response:
        """One folder level under `prefix`: sub-folders (id null) and objects, by name."""
        body = await json_object(request)
        prefix = body.get("prefix", "")
        if not isinstance(prefix, str):
            raise StorageError(400, "InvalidRequest", "prefix must be a string")
        prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        limit = whole_number(body, "limit", 100, 1, 1000)
        offset = whole_number(body, "offset", 0, 0, 2**31 - 1)
        async with self.as_caller(request) as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                f"""
                with visible as (
                  select {_OBJECT_COLUMNS}, substr(name, char_length(%(prefix)s) + 1) as rest
                  from storage.objects
                  where bucket_id = %(bucket)s and starts_with(name, %(prefix)s)
                )
                select * from (
                  select distinct split_part(rest, '/', 1) as entry, true as is_folder,
                    null::text as id, null::text as bucket_id, null::text as name,
                    null::uuid as owner_id, null::bigint as size, null::text as mime_type,
                    null::text as sha256, null::timestamptz as created_at
                  from visible where strpos(rest, '/') > 0
                  union all
                  select rest, false, id, bucket_id, rest, owner_id, size, mime_type, sha256,
                    created_at
                  from visible where strpos(rest, '/') = 0
                ) entries
                order by entry collate "C"
                limit %(limit)s offset %(offset)s
                """,
                {
                    "prefix": prefix,
                    "bucket": request.path_params["bucket"],
                    "limit": limit,
                    "offset": offset,
                },
            )
            rows = await cur.fetchall()
        entries = [folder(row["entry"]) if row["is_folder"] else describe(row) for row in rows]
        return answer(200, entries)


def routes(db: Database, settings: GatewaySettings) -> list[BaseRoute]:
    api = Storage(db, settings.jwt_secret, MediaFolder(settings.folder / "media"))
    path = "{bucket}/{path:path}"
    return [
        Route(f"{PREFIX}/sign/{path}", answering(api.sign), methods=["POST"]),
        Route(f"{PREFIX}/sign/{path}", answering(api.signed), methods=["GET"]),
        Route(f"{PREFIX}/list/{{bucket}}", answering(api.listing), methods=["POST"]),
        Route(f"{PREFIX}/public/{path}", answering(api.public), methods=["GET"]),
        Route(f"{PREFIX}/authenticated/{path}", answering(api.read), methods=["GET"]),
        Route(f"{PREFIX}/{{bucket}}", answering(api.remove), methods=["DELETE"]),
        Route(f"{PREFIX}/{path}", answering(api.upload), methods=["POST", "PUT"]),
        Route(f"{PREFIX}/{path}", answering(api.read), methods=["GET"]),
    ]


@asynccontextmanager
async def lifespan(db: Database, settings: GatewaySettings) -> AsyncIterator[None]:
    """The media folder exists (0700) before the first upload; stale partial uploads go."""
    MediaFolder(settings.folder / "media").prepare()
    yield
