"""Storage's writes: uploads (a plain body or a form), signed upload URLs, copies and moves.

Whatever the way in, an object is written the same way, as whoever may write it: the path rules
and no-overwrite are asked of the database before a byte is read (a rolled-back insert), the
bytes stream to a temporary file under the bucket's size limit, and the row is inserted for real
(the policies judge again) before the file takes the object's name. A signed upload URL carries
its signer's claims, so the upload runs as the signer, with the policies of that moment, once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import jwt
import psycopg
from starlette.requests import Request
from starlette.responses import Response

from relay.gateway.db import Database
from relay.gateway.functions import answer
from relay.gateway.storage_errors import (
    StorageError,
    bad_token,
    caller,
    denied,
    json_object,
    link_claims,
    media_type,
    never_overwritten,
    no_bucket,
    not_found,
    text,
    too_large,
    upsert_asked,
)
from relay.gateway.storage_files import MediaFolder, Missing, TooLarge
from relay.gateway.storage_form import FORM_EXTRA, FormReader, is_form
from relay.gateway.storage_rows import bucket_rules, cache_seconds, find, insert, may_write
from relay.keys import ALGORITHM
from relay.metrics import STORAGE_BYTES

UPLOAD_TTL = 2 * 3600  # a signed upload URL works for two hours, as Storage's do


def used() -> StorageError:
    return bad_token("This upload URL was already used")


def unsupported(mime: str) -> StorageError:
    return StorageError(
        415, "invalid_mime_type", f"mime type {mime} is not supported", "InvalidMimeType"
    )


async def spend(conn: psycopg.AsyncConnection, token_id: str, expires: int) -> None:
    """Mark an upload token used, in the upload's own transaction: a failed upload leaves it
    unspent, and of two uploads racing with one token only the first commits."""
    try:
        await conn.execute(
            "insert into storage.spent_upload_tokens (id, expires_at)"
            " values (%s, to_timestamp(%s))",
            (token_id, expires),
        )
    except psycopg.errors.UniqueViolation:
        raise used() from None


class Uploads:
    """The write endpoints, over one database and one media folder."""

    def __init__(self, db: Database, secret: str, files: MediaFolder) -> None:
        self.db = db
        self.secret = secret
        self.files = files

    async def store(
        self,
        request: Request,
        who: tuple[str, dict[str, Any]],
        bucket: str,
        name: str,
        token: tuple[str, int] | None = None,
    ) -> Response:
        """Store the request's body as a new object at `name`, as `who` (role, claims); with
        `token` (a signed upload URL's id and expiry), spend it in the same transaction."""
        async with self.db.as_role(*who) as conn:
            limit, allowed = await bucket_rules(conn, bucket)
            await may_write(conn, bucket, name, allowed)
        content_type = request.headers.get("content-type")
        form = is_form(content_type)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit + (FORM_EXTRA if form else 0):
            raise too_large()
        chunks: AsyncIterator[bytes]
        if form:
            reader = FormReader(request.stream(), content_type or "")
            await reader.file()
            mime, asked = media_type(reader.mime), reader.fields.get("cacheControl")
            chunks = reader.data()
        else:
            mime, asked = media_type(content_type), request.headers.get("cache-control")
            chunks = request.stream()
        if allowed is not None and mime not in allowed:
            raise unsupported(mime)
        try:
            upload = await self.files.receive(chunks, limit)
        except TooLarge:
            raise too_large() from None
        placed = None
        try:
            async with self.db.as_role(*who) as conn:
                object_id = await insert(
                    conn,
                    bucket,
                    name,
                    size=upload.size,
                    mime=mime,
                    sha256=upload.sha256,
                    cache=cache_seconds(asked),
                )
                if token is not None:
                    await spend(conn, *token)
                placed = self.files.place(upload, object_id)
        except BaseException:
            upload.temp.unlink(missing_ok=True)
            if placed is not None:
                placed.unlink(missing_ok=True)
            raise
        STORAGE_BYTES.inc(upload.size)
        return answer(200, {"Key": f"{bucket}/{name}", "Id": object_id})

    async def upload(self, request: Request) -> Response:
        """`POST /object/<bucket>/<path>`: a new object. `PUT` (update) and `x-upsert: true`
        would overwrite, and nothing is ever overwritten."""
        if request.method == "PUT" or upsert_asked(request):
            raise never_overwritten()
        who = caller(request, self.secret)
        return await self.store(request, who, *self.where(request))

    async def sign_upload(self, request: Request) -> Response:
        """`POST /object/upload/sign/<bucket>/<path>`: a URL that uploads this one path once,
        within two hours, as the caller; refused now if the caller couldn't upload it now."""
        if upsert_asked(request):
            raise never_overwritten()
        bucket, name = self.where(request)
        role, claims = caller(request, self.secret)
        async with self.db.as_role(role, claims) as conn:
            _, allowed = await bucket_rules(conn, bucket)
            await may_write(conn, bucket, name, allowed)
        now = int(time.time())
        token = jwt.encode(
            {
                "url": f"{bucket}/{name}",
                "upload": {"role": role, "claims": claims},  # nested: never a bearer token
                "jti": str(uuid.uuid4()),
                "iat": now,
                "exp": now + UPLOAD_TTL,
            },
            self.secret,
            algorithm=ALGORITHM,
        )
        url = f"/object/upload/sign/{quote(bucket)}/{quote(name)}?token={token}"
        return answer(200, {"url": url, "token": token})

    async def signed_upload(self, request: Request) -> Response:
        """`PUT /object/upload/sign/<bucket>/<path>?token=…`: the upload a signed URL allows;
        no other credential is looked at."""
        bucket, name = self.where(request)
        claims = link_claims(request, self.secret, f"{bucket}/{name}")
        signer, token_id = claims.get("upload"), claims.get("jti")
        if not (
            isinstance(signer, dict)
            and isinstance(signer.get("role"), str)
            and isinstance(signer.get("claims"), dict)
            and isinstance(token_id, str)
        ):
            raise bad_token("This is not an upload token")
        if upsert_asked(request):
            raise never_overwritten()
        if await self.spent(token_id):
            raise used()
        who = (signer["role"], signer["claims"])
        return await self.store(request, who, bucket, name, (token_id, int(claims["exp"])))

    async def spent(self, token_id: str) -> bool:
        """Whether an upload token was used (asked before its upload is read); the ids of
        tokens expired anyway are dropped on the way."""
        async with self.db.service() as conn:
            await conn.execute("delete from storage.spent_upload_tokens where expires_at < now()")
            cur = await conn.execute(
                "select 1 from storage.spent_upload_tokens where id = %s", (token_id,)
            )
            return await cur.fetchone() is not None

    async def copy(self, request: Request) -> Response:
        return await self.relocate(request, move=False)

    async def move(self, request: Request) -> Response:
        return await self.relocate(request, move=True)

    async def relocate(self, request: Request, *, move: bool) -> Response:
        """`POST /object/copy` and `/object/move`: a read and an upload (and, for a move, a
        delete) in one transaction as the caller, so each is allowed only as it would be alone:
        the destination must be a path the caller may upload to and must not exist yet."""
        body = await json_object(request)
        bucket = text(body, "bucketId")
        source, destination = text(body, "sourceKey"), text(body, "destinationKey")
        if body.get("destinationBucket") not in (None, bucket):
            raise no_bucket()
        who = caller(request, self.secret)
        linked = None
        try:
            async with self.db.as_role(*who) as conn:
                await bucket_rules(conn, bucket)
                row = await find(conn, bucket, source)
                object_id = await insert(
                    conn,
                    bucket,
                    destination,
                    size=row["size"],
                    mime=row["mime_type"],
                    sha256=row["sha256"],
                    cache=row["cache_seconds"],
                )
                if move:
                    cur = await conn.execute(
                        "delete from storage.objects where id = %s", (row["id"],)
                    )
                    if cur.rowcount != 1:
                        raise denied("Only who may delete an object may move it")
                linked = self.files.link(row["id"], object_id)
        except Missing:
            raise not_found() from None
        except BaseException:
            if linked is not None:
                linked.unlink(missing_ok=True)
            raise
        if move:
            self.files.remove([row["id"]])
            return answer(200, {"message": "Successfully moved"})
        return answer(200, {"Key": f"{bucket}/{destination}", "Id": object_id})

    @staticmethod
    def where(request: Request) -> tuple[str, str]:
        return request.path_params["bucket"], request.path_params["path"]
