"""The HTTP side of the REST layer: the response value, and PostgREST's errors and their statuses.

Clients written for a hosted Supabase project read `code`, `message`, `details` and `hint` from
error bodies and branch on the HTTP status (a 409 on a resend is their idempotency signal), so both
follow PostgREST v12 exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import psycopg

JSON_TYPE = "application/json; charset=utf-8"
OBJECT_TYPE = "application/vnd.pgrst.object+json; charset=utf-8"
CSV_TYPE = "text/csv; charset=utf-8"


@dataclass
class RestResponse:
    status: int
    body: bytes | None
    headers: dict[str, str] = field(default_factory=dict)


def error_body(code: str, message: str, details: str | None, hint: str | None) -> bytes:
    """PostgREST's error object; always the four keys, nulls included."""
    shape = {"code": code, "details": details, "hint": hint, "message": message}
    return json.dumps(shape, ensure_ascii=False).encode()


class ApiError(Exception):
    """A request PostgREST itself would refuse, before or without asking the database."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.hint = hint

    def response(self) -> RestResponse:
        body = error_body(self.code, self.message, self.details, self.hint)
        return RestResponse(self.status, body, {"content-type": JSON_TYPE})


def grammar_error(what: str, text: str, problem: str) -> ApiError:
    """PGRST100: the query string doesn't parse; the message says where and what."""
    return ApiError(400, "PGRST100", f"failed to parse {what} ({text}): {problem}")


def body_error(message: str) -> ApiError:
    """PGRST102: the request body isn't the JSON this request needs."""
    return ApiError(400, "PGRST102", message)


# Exact SQLSTATEs first, then two-character classes; anything else is 400, as in PostgREST.
_STATUS_BY_CODE = {
    "23503": 409,
    "23505": 409,
    "25006": 405,
    "42P01": 404,
    "42883": 404,
    "42P17": 500,
    "53400": 500,
    "P0001": 400,
}
_STATUS_BY_CLASS = {
    "08": 503,
    "09": 500,
    "0L": 403,
    "0P": 403,
    "25": 500,
    "28": 403,
    "2D": 500,
    "38": 500,
    "39": 500,
    "3B": 500,
    "40": 500,
    "53": 503,
    "54": 413,
    "55": 500,
    "57": 500,
    "58": 500,
    "F0": 500,
    "HV": 500,
    "P0": 500,
    "XX": 500,
}


def status_for(sqlstate: str, role: str) -> int:
    """PostgREST's HTTP status for a SQLSTATE raised while serving `role`'s request."""
    if sqlstate == "42501":
        return 401 if role == "anon" else 403
    if sqlstate.startswith("PT"):
        digits = sqlstate[2:]
        return int(digits) if digits.isdigit() and 100 <= int(digits) <= 599 else 500
    if sqlstate in _STATUS_BY_CODE:
        return _STATUS_BY_CODE[sqlstate]
    return _STATUS_BY_CLASS.get(sqlstate[:2], 400)


def db_error_response(exc: psycopg.Error, role: str) -> RestResponse:
    """The response PostgREST gives for a database error; never the statement or its values."""
    if exc.sqlstate is None:
        # Raised by the driver, not the server (a lost connection, say): no diagnostic to show.
        status = 503 if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) else 500
        body = error_body("PGRST001", "Database client error", None, None)
        return RestResponse(status, body, {"content-type": JSON_TYPE})
    diag = exc.diag
    message = diag.message_primary or "database error"
    body = error_body(exc.sqlstate, message, diag.message_detail, diag.message_hint)
    return RestResponse(status_for(exc.sqlstate, role), body, {"content-type": JSON_TYPE})


@dataclass(frozen=True)
class Rows:
    """What a row-returning statement yields: the JSON array, its first element, and counts."""

    array: str
    first: str | None
    count: int
    total: int | None = None  # the unpaged total, when `Prefer: count=exact` asked for it


def content_range(offset: int, count: int, total: int | None) -> str:
    """`0-24/*`, `0-24/3573`, or `*/0` for an empty page, as PostgREST writes it."""
    known = "*" if total is None else str(total)
    return f"{offset}-{offset + count - 1}/{known}" if count else f"*/{known}"


def single_row(count: int) -> None:
    """PGRST116: `Accept: application/vnd.pgrst.object+json` needs exactly one row."""
    if count != 1:
        raise ApiError(
            406,
            "PGRST116",
            "JSON object requested, multiple (or no) rows returned",
            f"The result contains {count} rows",
        )


def rows_response(
    status: int,
    rows: Rows,
    *,
    single: bool,
    headers: dict[str, str],
    with_body: bool = True,
    csv: bool = False,
) -> RestResponse:
    """The array (or CSV), or its only element when one object was asked for."""
    if single:
        single_row(rows.count)
        body, media_type = rows.first, OBJECT_TYPE
    else:
        body, media_type = rows.array, CSV_TYPE if csv else JSON_TYPE
    headers = {"content-type": media_type, **headers}
    return RestResponse(status, body.encode() if with_body and body is not None else None, headers)


def page_response(
    rows: Rows, offset: int, *, single: bool, with_body: bool, csv: bool = False
) -> RestResponse:
    """A page of a read; with an exact total, 206 for part of the rows and 416 past the end."""
    if rows.total is not None and offset > rows.total:
        raise ApiError(
            416,
            "PGRST103",
            "Requested range not satisfiable",
            f"An offset of {offset} was requested, but there are only {rows.total} rows.",
        )
    partial = rows.total is not None and rows.count < rows.total
    headers = {"content-range": content_range(offset, rows.count, rows.total)}
    status = 206 if partial else 200
    return rows_response(status, rows, single=single, headers=headers, with_body=with_body, csv=csv)
