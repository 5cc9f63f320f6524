"""A database made outside `yui relay`: a managed PostgreSQL, or a Supabase project's.

The relay then runs no PostgreSQL of its own: `yui relay up --database URL` migrates the
database and serves it, and every gateway logs in with that URL's user, switching to the
request's role as it does on its own cluster. So the user must be able to create the roles
(or find them made), own what the migrations create, and be a member of the four request roles,
which is granted here when it isn't yet.
"""

from __future__ import annotations

import re

import psycopg

from state.errors import BadUsage, Unreachable

REQUEST_ROLES = ("anon", "yui_user", "yui_connector", "service_role")
CONNECT_TIMEOUT = 10  # seconds
_PASSWORD_IN_URL = re.compile(r"(?<=://)([^:/@]*):[^@/]*@")
_PASSWORD_IN_CONNINFO = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def redacted(database: str) -> str:
    """The URL or conninfo with its password (if any) replaced, fit to print or log."""
    text = _PASSWORD_IN_URL.sub(r"\1:***@", database)
    return _PASSWORD_IN_CONNINFO.sub(r"\1***", text)


def checked(database: str) -> str:
    """`database` if libpq can parse it as a URL or conninfo; else a usage error (exit 2)."""
    try:
        psycopg.conninfo.conninfo_to_dict(database)
    except psycopg.ProgrammingError:
        raise BadUsage(
            f"{redacted(database)!r} is not a database URL",
            hint="give postgresql://USER@HOST:PORT/DBNAME (the password in $PGPASSWORD or "
            "~/.pgpass, not on the command line)",
        ) from None
    return database


def connect(database: str, **kwargs: object) -> psycopg.Connection:
    """A connection, or Unreachable naming the database (never its password)."""
    try:
        return psycopg.connect(checked(database), connect_timeout=CONNECT_TIMEOUT, **kwargs)  # type: ignore[arg-type]
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "no answer"
        raise Unreachable(
            f"the database {redacted(database)} can't be reached: {first}",
            hint="check the URL, that the server runs, and the user's password and grants",
        ) from None


def answers(database: str) -> bool:
    """Whether the database takes a connection and a query now."""
    try:
        with connect(database) as conn:
            conn.execute("select 1")
    except (Unreachable, psycopg.Error):
        return False
    return True


def join_request_roles(database: str) -> list[str]:
    """Make the URL's user a member of the request roles it isn't in yet (what lets a gateway
    logged in as it switch to them); the roles granted now."""
    granted = []
    with connect(database, autocommit=True) as conn:
        row = conn.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()
        if row and row[0]:
            return []  # a superuser may become any role
        for role in REQUEST_ROLES:
            member = conn.execute(
                "select pg_has_role(current_user, %s, 'member')", (role,)
            ).fetchone()
            if not (member and member[0]):
                conn.execute(
                    psycopg.sql.SQL("grant {} to current_user").format(psycopg.sql.Identifier(role))
                )
                granted.append(role)
    return granted
