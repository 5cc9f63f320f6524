"""The gateway's database access: one pool, and a transaction per request under its role.

Exactly as PostgREST does it: open a transaction, switch to the token's role and set
`request.jwt.claims` for that transaction only, so the database's policies, not the gateway,
decide what each request may see and do. PostgreSQL applies a role's own settings only at login
(as `authenticator`), never on a switch of role, so the gateway reads each role's
`statement_timeout` once (`alter role … set`, migration 0017) and sets it with the role.

Round trips are much of what a request costs (issue 21): BEGIN and the role's settings go to
PostgreSQL as one simple query, a request whose last statement is known sends COMMIT with it
(`run`), and a connection is checked on checkout only when its socket has something
to say (PostgreSQL closed it, say), not with a query every time.
"""

from __future__ import annotations

import contextlib
import json
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncClientCursor, sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

POOL_TIMEOUT = 10.0  # seconds to wait for a connection before answering 503
HEALTH_WAIT = 3.0  # seconds /health waits for a connection before saying the database is down
# A lost connection is retried with a backoff for this long, then dropped; the next request
# then opens a fresh one at once. Kept short so a restarted PostgreSQL is used within seconds
# of coming back, not after a backoff that has grown past POOL_TIMEOUT while it was down.
RECONNECT_WINDOW = 3.0

Row = TypeVar("Row")

# Each role's own `statement_timeout`, as `alter role … set` left it: for every database, or
# for this one, which wins (it sorts last).
_ROLE_TIMEOUTS = """
select r.rolname, split_part(c.setting, '=', 2)
from pg_catalog.pg_db_role_setting s
join pg_catalog.pg_roles r on r.oid = s.setrole
cross join lateral unnest(s.setconfig) as c(setting)
where s.setdatabase in (0, (select oid from pg_catalog.pg_database
                            where datname = current_database()))
  and starts_with(c.setting, 'statement_timeout=')
order by s.setdatabase
"""
# Sent as one simple query, its values bound as literals by psycopg: one round trip.
_AS_ROLE = sql.SQL("""begin;
select set_config('role', {}, true), set_config('request.jwt.claims', {}, true),
  set_config('statement_timeout', coalesce({}, current_setting('statement_timeout')), true)
""")


class MissingRow(RuntimeError):
    """A statement that always yields a row yielded none: a bug or a race, never the client's."""


async def run(
    conn: psycopg.AsyncConnection,
    cursor: psycopg.AsyncCursor[Any],
    query: Any,
    params: Any,
    *,
    commit: bool = False,
) -> None:
    """Run a statement, its answer then read from `cursor`. With `commit` it is the
    transaction's last, sent with COMMIT in one round trip (psycopg's pipeline): besides the
    round trip, the locks it took (a rate bucket's row, say, that every insert of the same
    person waits for) are let go without waiting for the gateway to come back for the COMMIT.
    A failed statement raises and the COMMIT is skipped, the transaction left for `as_role` to
    roll back."""
    if not commit:
        await cursor.execute(query, params)
        return
    async with conn.pipeline():
        await cursor.execute(query, params)
        await conn.execute("commit")


def one(row: Row | None, what: str) -> Row:
    """The row `fetchone()` gave for a statement that always yields one (an aggregate, an
    INSERT … RETURNING, an UPDATE of a row this transaction just read); MissingRow if not."""
    if row is None:
        raise MissingRow(f"{what} returned no row")
    return row


async def check_if_stirred(conn: psycopg.AsyncConnection) -> None:
    """The pool's check on checkout: an idle connection's socket is silent unless PostgreSQL
    closed it or said something (a restart's goodbye), so a query checks it only then.
    Raises, as the pool expects of a check, for a connection that isn't good."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    poll = select.poll()  # not select(): a gateway with many sockets has fds past 1024
    poll.register(conn.fileno(), select.POLLIN)
    if poll.poll(0):
        await AsyncConnectionPool.check_connection(conn)


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
            check=check_if_stirred,
        )
        self.timeouts: dict[str, str] | None = None  # role → its statement_timeout, once read

    async def open(self) -> None:
        await self.pool.open(wait=False)

    async def close(self) -> None:
        await self.pool.close()

    @asynccontextmanager
    async def as_role(
        self, role: str, claims: dict[str, Any]
    ) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection inside a transaction that runs as `role` with `claims`, and under the
        role's statement_timeout (a role without one keeps the login's)."""
        async with self.pool.connection() as conn:
            if self.timeouts is None:  # on first use, not at open: the database may be down then
                cur = await conn.execute(_ROLE_TIMEOUTS)
                self.timeouts = dict(await cur.fetchall())
            settings = (role, json.dumps(claims), self.timeouts.get(role))
            begin = _AS_ROLE.format(*map(sql.Literal, settings))
            try:
                async with AsyncClientCursor(conn) as cur:  # the simple protocol: 2 statements
                    await cur.execute(begin)
                yield conn  # a `conn.transaction()` in here is a savepoint
            except BaseException:
                with contextlib.suppress(psycopg.Error):  # a broken one: the pool drops it
                    await conn.rollback()
                raise
            await conn.commit()

    async def answers(self) -> bool:
        """Whether PostgreSQL takes a query now (within HEALTH_WAIT seconds)."""
        try:
            async with self.pool.connection(timeout=HEALTH_WAIT) as conn:
                await conn.execute("select 1")
        except (psycopg.Error, PoolTimeout, OSError):
            return False
        return True

    def service(self) -> Any:
        """A transaction as the service role, for the gateway's own functions."""
        return self.as_role("service_role", {"role": "service_role"})
