"""The person's side: `/functions/v1/yui-auth` (sessions) and `/functions/v1/yui-agents`.

On the hosted backend a person signs in with Apple; the local relay has no Apple, so signing up
is a service-role operation (`yui app signup` uses the relay's service key). From then on the
person holds a refresh token and trades it for 60-minute app tokens, as the phone does.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from psycopg.rows import dict_row

from relay.gateway import registry
from relay.gateway.functions import Action, Call, Refusal, take, uuid_or_none
from relay.keys import SESSION_TTL, mint, opaque_token, sha256_hex

REFRESH_PREFIX = "yui_rt_"
REFRESH_TTL = dt.timedelta(days=60)


async def _open_session(
    conn: psycopg.AsyncConnection, call: Call, user: dict[str, Any]
) -> dict[str, Any]:
    refresh = opaque_token(REFRESH_PREFIX)
    await conn.execute(
        "insert into public.yui_sessions (user_id, refresh_hash, expires_at)"
        " values (%s, %s, now() + %s)",
        (user["id"], sha256_hex(refresh), REFRESH_TTL),
    )
    access = mint(
        call.jwt_secret,
        {"role": "yui_user", "sub": str(user["id"]), "iss": "yui-auth", "aud": "yui"},
    )
    return {
        "access_token": access,
        "token_type": "bearer",
        "expires_in": SESSION_TTL,
        "refresh_token": refresh,
        "user": user,
    }


async def signup(call: Call) -> dict[str, Any]:
    """Create a person (service key only) and open their first session."""
    claims = call.claims()
    if not claims or claims.get("role") != "service_role":
        raise Refusal(401, "unauthorized")
    name = call.body.get("name")
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 60:
        raise Refusal(400, "invalid_name")
    async with call.db.service() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "insert into public.yui_users (name) values (%s) returning id, name, created_at",
            (name.strip(),),
        )
        user = await cur.fetchone()
        return await _open_session(conn, call, user)


async def refresh(call: Call) -> dict[str, Any]:
    """A new app token for a refresh token, which is used up (rotation). Each refresh revokes
    one session row and opens another, so a person may refresh only at the `refresh` rate
    (yui_limits); a refused refresh leaves its refresh token usable."""
    token = call.body.get("refresh_token")
    if not isinstance(token, str) or not token.startswith(REFRESH_PREFIX):
        raise Refusal(401, "invalid_grant")
    async with call.db.service() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select s.id, u.id as user_id, u.name, u.created_at, u.suspended_at"
            " from public.yui_sessions s join public.yui_users u on u.id = s.user_id"
            " where s.refresh_hash = %s and s.revoked_at is null and s.expires_at > now()"
            " for update of s",
            (sha256_hex(token),),
        )
        found = await cur.fetchone()
        if found is None:
            raise Refusal(401, "invalid_grant")
        if found["suspended_at"] is not None:
            raise Refusal(403, "account_suspended")
        await take(conn, f"refresh:u:{found['user_id']}", "refresh")
        await cur.execute(
            "update public.yui_sessions set revoked_at = now() where id = %s", (found["id"],)
        )
        user = {"id": found["user_id"], "name": found["name"], "created_at": found["created_at"]}
        return await _open_session(conn, call, user)


AUTH_GRANTS: dict[str, Action] = {"signup": signup, "refresh": refresh}


async def _person(conn: psycopg.AsyncConnection, call: Call) -> Any:
    """The person an app token names: active, and within their `agents_api` bucket."""
    claims = call.claims()
    if not claims or claims.get("role") != "yui_user" or not claims.get("sub"):
        raise Refusal(401, "unauthorized")
    cur = await conn.execute(
        "select suspended_at is not null from public.yui_users where id = %s", (claims["sub"],)
    )
    row = await cur.fetchone()
    if row is None:
        raise Refusal(401, "unauthorized")
    if row[0]:
        raise Refusal(403, "account_suspended")
    await take(conn, f"agents:u:{claims['sub']}", "agents_api")
    return claims["sub"]


async def _own_agent(conn: psycopg.AsyncConnection, user_id: Any, agent_id: Any) -> None:
    cur = await conn.execute(
        "select 1 from public.yui_agents where id = %s and user_id = %s",
        (uuid_or_none(str(agent_id)), user_id),
    )
    if await cur.fetchone() is None:
        raise Refusal(404, "not_found")


async def list_agents(call: Call) -> dict[str, Any]:
    async with call.db.service() as conn:
        user_id = await _person(conn, call)
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                f"select {registry.AGENT_COLUMNS} from public.yui_agent_list"
                " where user_id = %s order by sort, created_at",
                (user_id,),
            )
            agents = await cur.fetchall()
            await cur.execute(
                "select id, name, kind, created_at, last_seen_at from public.yui_connectors"
                " where user_id = %s and revoked_at is null order by created_at",
                (user_id,),
            )
            connectors = await cur.fetchall()
    return {"agents": agents, "connectors": connectors}


async def create_agent(call: Call) -> dict[str, Any]:
    """A new agent, with a pairing code for it when `pair` is true."""
    body = call.body
    name = registry.clean_name(body.get("name"))
    if name is None:
        raise Refusal(400, "invalid_name")
    handle = body.get("handle")
    if handle is not None and (not isinstance(handle, str) or not registry.HANDLE.match(handle)):
        raise Refusal(400, "invalid_handle")
    color = body.get("color")
    if color is not None and color not in registry.COLORS:
        raise Refusal(400, "invalid_color")
    async with call.db.service() as conn:
        user_id = await _person(conn, call)
        agent_id = await registry.insert_agent(conn, user_id, name, handle=handle, color=color)
        answer: dict[str, Any] = {"agent": await registry.agent_view(conn, agent_id)}
        if body.get("pair"):
            answer["pairing"] = await registry.mint_pairing_code(conn, user_id, agent_id)
    return answer


async def pair_code(call: Call) -> dict[str, Any]:
    async with call.db.service() as conn:
        user_id = await _person(conn, call)
        await _own_agent(conn, user_id, call.body.get("agent_id"))
        return await registry.mint_pairing_code(conn, user_id, call.body["agent_id"])


async def delete_agent(call: Call) -> dict[str, Any]:
    """Delete an agent and, with it, its thread."""
    async with call.db.service() as conn:
        user_id = await _person(conn, call)
        await _own_agent(conn, user_id, call.body.get("id"))
        await conn.execute("delete from public.yui_agents where id = %s", (call.body["id"],))
    return {"deleted": True, "id": call.body["id"]}


async def connector_revoke(call: Call) -> dict[str, Any]:
    """Remove a computer: its token and any session minted from it stop working at once."""
    async with call.db.service() as conn:
        user_id = await _person(conn, call)
        cur = await conn.execute(
            "update public.yui_connectors set revoked_at = coalesce(revoked_at, now())"
            " where id = %s and user_id = %s returning id",
            (uuid_or_none(str(call.body.get("id"))), user_id),
        )
        if await cur.fetchone() is None:
            raise Refusal(404, "not_found")
    return {"revoked": True}


AGENT_ACTIONS: dict[str, Action] = {
    "list": list_agents,
    "create": create_agent,
    "pair_code": pair_code,
    "delete": delete_agent,
    "connector_revoke": connector_revoke,
}
