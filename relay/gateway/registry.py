"""Agents and pairing codes, as both the person's side (yui-agents) and hosts (yui-connect) use
them: names, handles, the agent as callers see it, and minting a code."""

from __future__ import annotations

import re
import secrets
import unicodedata
from typing import Any

import psycopg
from psycopg.rows import dict_row

from relay.gateway.db import one
from relay.gateway.functions import Refusal
from relay.keys import sha256_hex

AGENT_COLUMNS = (
    "id, name, handle, color, kind, connector_id, connector_name, remote_ref, status, "
    "last_seen_at, is_default, sort, created_at, updated_at, push_muted, presence, controls"
)
COLORS = ("lavender", "mint", "butter", "brand")
KINDS = ("hermes", "openclaw", "http", "mcp", "hosted")
REMOTE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
HANDLE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
CODE_ATTEMPTS = 5


def clean_name(value: Any) -> str | None:
    """Trimmed, whitespace collapsed, 1 to 40 characters; else None."""
    if not isinstance(value, str):
        return None
    name = " ".join(value.split())
    return name if 1 <= len(name) <= 40 else None


def name_from_ref(ref: str) -> str:
    """`sean-rush` → `Sean Rush`."""
    words = [w for w in re.split(r"[-_.]+", ref) if w]
    return (" ".join(w[:1].upper() + w[1:] for w in words)[:40]).strip() or "Agent"


def slug(name: str) -> str:
    """A handle from a name: lowercase ASCII, runs of anything else as one dash, ≤ 28."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", ascii_name).strip("-")[:28].strip("-") or "agent"


def default_color(name: str) -> str:
    return ("mint", "lavender", "butter")[sum(map(ord, name.lower())) % 3]


async def agent_view(conn: psycopg.AsyncConnection, agent_id: Any) -> dict[str, Any]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"select {AGENT_COLUMNS} from public.yui_agent_list where id = %s", (agent_id,)
        )
        row = await cur.fetchone()
    if row is None:
        raise Refusal(404, "not_found")
    return row


async def insert_agent(
    conn: psycopg.AsyncConnection,
    user_id: Any,
    name: str,
    *,
    handle: str | None = None,
    color: str | None = None,
    kind: str = "hermes",
    connector_id: Any = None,
    remote_ref: str | None = None,
) -> Any:
    """Create an agent with a handle unique for its person; return its id."""
    async with conn.cursor() as cur:
        await cur.execute(
            "select coalesce(max(sort) + 1, 0), count(*) = 0,"
            " coalesce(array_agg(handle), '{}') from public.yui_agents where user_id = %s",
            (user_id,),
        )
        sort, first, taken = one(await cur.fetchone(), "the agents aggregate")
    if handle is None:
        base = slug(name)
        handle, n = base, 2
        while handle in taken:
            handle, n = f"{base}-{n}", n + 1
    elif handle in taken:
        raise Refusal(409, "handle_taken")
    async with conn.cursor() as cur:
        await cur.execute(
            "insert into public.yui_agents (user_id, name, handle, color, kind, connector_id,"
            " remote_ref, sort, is_default) values (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " returning id",
            (
                user_id,
                name,
                handle,
                color or default_color(name),
                kind,
                connector_id,
                remote_ref,
                sort,
                first,
            ),
        )
        row = one(await cur.fetchone(), "the agent insert")
    return row[0]


async def mint_pairing_code(
    conn: psycopg.AsyncConnection, user_id: Any, agent_id: Any
) -> dict[str, Any]:
    """A fresh 6-digit code for this agent; its older unused codes stop working."""
    await conn.execute(
        "delete from public.yui_pairings where used_at is null"
        " and (agent_id = %s or expires_at < now())",
        (agent_id,),
    )
    for attempt in range(CODE_ATTEMPTS):
        code = f"{secrets.randbelow(1_000_000):06d}"
        try:
            async with conn.transaction(), conn.cursor() as cur:
                await cur.execute(
                    "insert into public.yui_pairings (user_id, agent_id, code_hash)"
                    " values (%s, %s, %s) returning expires_at",
                    (user_id, agent_id, sha256_hex("pair:" + code)),
                )
                (expires_at,) = one(await cur.fetchone(), "the pairing insert")
            return {"code": code, "expires_at": expires_at}
        except psycopg.errors.UniqueViolation:
            if attempt == CODE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
