"""The gateway's database access: one pool, and a transaction per request under its role.

Exactly as PostgREST does it: open a transaction, switch to the token's role and set
`request.jwt.claims` for that transaction only, so the database's policies, not the gateway,
decide what each request may see and do.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

POOL_TIMEOUT = 10.0  # seconds to wait for a connection before answering 503
# A lost connection is retried with a backoff for this long, then dropped; the next request
# then opens a fresh one at once. Kept short so a restarted PostgreSQL is used within seconds
# of coming back, not after a backoff that has grown past POOL_TIMEOUT while it was down.
RECONNECT_WINDOW = 3.0

Row = TypeVar("Row")


class MissingRow(RuntimeError):
    """A statement that always yields a row yielded none: a bug or a race, never the client's."""


def one(row: Row | None, what: str) -> Row:
    """The row `fetchone()` gave for a statement that always yields one (an aggregate, an
    INSERT … RETURNING, an UPDATE of a row this transaction just read); MissingRow if not."""
    if row is None:
        raise MissingRow(f"{what} returned no row")
    return row


class Database:
    """A connection pool logged in as `authenticator`, which may become any of the roles."""

    def __init__(self, conninfo: str, *, max_size: int = 20) -> None:
        self.pool = AsyncConnectionPool(
            conninfo,
            min_size=2,
            max_size=max_size,
            open=False,
            timeout=POOL_TIMEOUT,
            reconnect_timeout=RECONNECT_WINDOW,
            kwargs={"autocommit": True},
            check=AsyncConnectionPool.check_connection,
        )

    async def open(self) -> None:
        await self.pool.open(wait=False)

    async def close(self) -> None:
        await self.pool.close()

    @asynccontextmanager
    async def as_role(
        self, role: str, claims: dict[str, Any]
    ) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection inside a transaction that runs as `role` with `claims`."""
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(
                "select set_config('role', %s, true), set_config('request.jwt.claims', %s, true)",
                (role, json.dumps(claims)),
            )
            yield conn

    def service(self) -> Any:
        """A transaction as the service role, for the gateway's own functions."""
        return self.as_role("service_role", {"role": "service_role"})
