"""Storage's refusals and request parsing: every answer that isn't bytes or a success is
`{"statusCode": "<status>", "error": "...", "message": "...", "code": "..."}`, as Supabase
Storage answers, so supabase-py reads `error` and supabase-js reads `code` (`NoSuchKey` is how
its `exists()` tells a missing object from any other failure).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import jwt
import psycopg
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from relay.gateway.functions import MAX_BODY, BodyTooLarge, answer, read_body, request_claims
from relay.keys import ALGORITHM, InvalidToken

log = logging.getLogger("yui.gateway")
_WHOLE = re.compile(r"[0-9]{1,15}")


class StorageError(Exception):
    """A refusal, in Supabase Storage's error shape."""

    def __init__(self, status: int, error: str, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.code = code

    def response(self) -> Response:
        body = {"statusCode": str(self.status), "error": self.error, "message": self.message}
        if self.code:
            body["code"] = self.code
        return answer(self.status, body)


def not_found() -> StorageError:
    return StorageError(404, "not_found", "Object not found", "NoSuchKey")


def no_bucket() -> StorageError:
    return StorageError(404, "Bucket not found", "Bucket not found", "NoSuchBucket")


def too_large() -> StorageError:
    return StorageError(
        413, "Payload too large", "The object exceeded the maximum allowed size", "EntityTooLarge"
    )


def invalid(message: str) -> StorageError:
    return StorageError(400, "InvalidRequest", message, "InvalidRequest")


def denied(message: str) -> StorageError:
    return StorageError(403, "Unauthorized", message, "AccessDenied")


def bad_token(message: str) -> StorageError:
    return StorageError(400, "InvalidJWT", message, "InvalidJWT")


def never_overwritten() -> StorageError:
    return denied("Objects are never overwritten: upload a new path")


def route_not_found(request: Request) -> StorageError:
    """Anything the relay's Storage doesn't serve, as the hosted one answers an unknown route."""
    return StorageError(404, "Not Found", f"Route {request.method}:{request.url.path} not found")


def database_error(exc: psycopg.Error) -> StorageError:
    """What the caller sees when the database said no; never the statement or its values."""
    state = exc.sqlstate or ""
    message = exc.diag.message_primary or "refused"
    if state == "42501":  # a policy's with-check, or no grant at all for this role
        return denied(message)
    if state == "23505":
        return StorageError(409, "Duplicate", "The resource already exists", "KeyAlreadyExists")
    if state == "PT413":
        return StorageError(413, "Payload too large", message, "EntityTooLarge")
    if state == "PT415":
        return StorageError(415, "invalid_mime_type", message, "InvalidMimeType")
    if state[:2] in ("22", "23"):
        return invalid(message)
    if isinstance(exc, psycopg.OperationalError):
        log.warning("database unavailable: %s", exc)
        return StorageError(503, "DatabaseError", "The database is unavailable", "DatabaseError")
    log.error("storage failed in the database: %s", state or exc)
    return StorageError(500, "InternalError", "Internal server error", "InternalError")


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
            return invalid("The upload was cut short").response()

    return endpoint


def caller(request: Request, secret: str) -> tuple[str, dict[str, Any]]:
    """The role and claims the request runs with: a bearer token this relay signed is required."""
    try:
        claims = request_claims(request, secret)
    except InvalidToken as exc:
        raise StorageError(401, "InvalidJWT", exc.reason, "InvalidJWT") from None
    if claims is None:
        raise StorageError(401, "Unauthorized", "A bearer token is required", "InvalidJWT")
    return claims["role"], claims


def upsert_asked(request: Request) -> bool:
    """Both SDKs send `x-upsert: false` on every upload; `true` asks to overwrite."""
    return request.headers.get("x-upsert", "").strip().lower() == "true"


async def json_object(request: Request) -> dict[str, Any]:
    """The body of a sign, list, move or delete call: a JSON object of at most MAX_BODY bytes."""
    try:
        body = json.loads(await read_body(request))
    except BodyTooLarge:
        raise StorageError(
            413,
            "Payload too large",
            f"The request body is larger than {MAX_BODY} bytes",
            "EntityTooLarge",
        ) from None
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser takes
        body = None
    if not isinstance(body, dict):
        raise invalid("Expected a JSON object")
    return body


def whole_number(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    """A whole number from a JSON body: a number, or a string of digits as supabase-py sends
    `expiresIn` (Storage coerces it the same way); never a boolean."""
    value = body.get(key, default)
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        value = int(value.strip())
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid(f"{key} must be a whole number {low}..{high}")
    return value


def text(body: dict[str, Any], key: str) -> str:
    """A required non-empty string of a JSON body."""
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise invalid(f"{key} must be a non-empty string")
    return value


def names(body: dict[str, Any], key: str, most: int) -> list[str]:
    """A list of 1..`most` object names from a JSON body."""
    value = body.get(key)
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= most
        or not all(isinstance(name, str) for name in value)
    ):
        raise invalid(f"{key} must be a list of 1..{most} object names")
    return value


def media_type(header: str | None) -> str:
    """The content-type without parameters; the bucket's list then decides if it may be stored."""
    return (header or "application/octet-stream").split(";")[0].strip().lower()


def link_claims(request: Request, secret: str, url: str) -> dict[str, Any]:
    """The claims of a signed link's `token` (download or upload), which must be for `url`."""
    token = request.query_params.get("token")
    if not token:
        raise bad_token("A token query parameter is required")
    try:
        claims = jwt.decode(
            token, secret, algorithms=[ALGORITHM], options={"require": ["exp", "url"]}
        )
    except jwt.ExpiredSignatureError:
        raise bad_token("jwt expired") from None
    except jwt.InvalidTokenError:
        raise bad_token("invalid signature") from None
    if claims["url"] != url:
        raise StorageError(
            400, "InvalidSignature", "The url does not match the signature", "InvalidSignature"
        )
    return claims
