"""`/functions/v1/yui-connect`: the host's registry API.

A host proves itself with its `yui_ct_…` connector token (never a JWT here): it pairs with a
code from the app, trades the token for a 60-minute session JWT, heartbeats, says bye, reads
the channel guide, and reports which sections of Controls it serves for an agent. Every token
action checks revocation and suspension live and takes one token from the host's own
`connect` bucket.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from relay.gateway import registry
from relay.gateway.db import one
from relay.gateway.functions import Action, Call, Refusal, iso, take
from relay.keys import SESSION_TTL, mint, opaque_token, sha256_hex
from relay.metrics import PAIRINGS

TOKEN_PREFIX = "yui_ct_"
MAX_SERVING = 1000  # agents one bridge may report serving: a connector may have many
DEFAULT_HOST_NAME = "My computer"
CONTROLS_VERSION = 1
# What a host may say it serves, section by section: a host can't grant itself more (the model
# is never written from the phone).
CONTROLS_MODES = {
    "soul": ("r", "rw"),
    "memory": ("r", "rw", "rwd"),
    "skills": ("r", "rw", "rwd"),
    "schedules": ("r", "rw", "rwd"),
    "model": ("r",),
    "channels": ("r",),
}


async def connector_for(
    conn: psycopg.AsyncConnection, call: Call, limit: str | None = "connect"
) -> dict[str, Any]:
    """The live connector the bearer token names, within its bucket for `limit` (its
    `connect` calls; None: the caller takes from a bucket itself); 401, 403 or 429 otherwise."""
    token = call.bearer or ""
    if not token.startswith(TOKEN_PREFIX):
        raise Refusal(401, "unauthorized")
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select c.id, c.user_id, c.name, c.kind,"
            " c.suspended_at is not null or u.suspended_at is not null as suspended"
            " from public.yui_connectors c join public.yui_users u on u.id = c.user_id"
            " where c.token_hash = %s and c.revoked_at is null",
            (sha256_hex(token),),
        )
        row = await cur.fetchone()
    if row is None:
        raise Refusal(401, "unauthorized")
    if row["suspended"]:
        raise Refusal(403, "suspended")
    if limit is not None:
        await take(conn, host_bucket(limit, row["id"]), limit)
    return row


def host_bucket(limit: str, connector_id: Any) -> str:
    """The key of a host's rate bucket for `limit`."""
    return f"{limit}:c:{connector_id}"


def _serving(body: dict[str, Any]) -> list[str] | None:
    """The refs a bridge says it serves; None when it doesn't report (per-computer presence)."""
    refs = body.get("serving")
    if not isinstance(refs, list):
        return None
    return [r for r in refs if isinstance(r, str) and registry.REMOTE_REF.match(r)][:MAX_SERVING]


async def _report_serving(
    conn: psycopg.AsyncConnection, connector_id: Any, refs: list[str] | None
) -> None:
    if refs is not None:
        await conn.execute("select public.yui_serving(%s, %s)", (connector_id, refs))


async def _seen(conn: psycopg.AsyncConnection, connector_id: Any) -> Any:
    cur = await conn.execute(
        "update public.yui_connectors set last_seen_at = now(), stopped_at = null"
        " where id = %s returning last_seen_at",
        (connector_id,),
    )
    # The connector was read in this transaction; only a concurrent delete leaves no row.
    return one(await cur.fetchone(), "the connector's last_seen update")[0]


async def _agents(conn: psycopg.AsyncConnection, connector_id: Any) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select id, name, handle, remote_ref from public.yui_agents"
            " where connector_id = %s order by sort, created_at",
            (connector_id,),
        )
        return await cur.fetchall()


async def _app_build(conn: psycopg.AsyncConnection, user_id: Any) -> int | None:
    """The oldest app build among the person's phones and web app seen in the last 14 days:
    what every one of them can draw. None when none has said (older than every gated preset)."""
    cur = await conn.execute(
        "select min(app_build) from ("
        " select app_build from public.yui_devices where user_id = %(u)s"
        "  and app_build_at > now() - interval '14 days'"
        " union all"
        " select app_build from public.yui_web_builds where user_id = %(u)s"
        "  and app_build_at > now() - interval '14 days') builds",
        {"u": user_id},
    )
    return one(await cur.fetchone(), "the app build aggregate")[0]


async def _guide(conn: psycopg.AsyncConnection) -> dict[str, str] | None:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select version, body from public.yui_channel_guides order by created_at desc limit 1"
        )
        return await cur.fetchone()


async def pair(call: Call) -> dict[str, Any]:
    """Claim a 6-digit code: bind its agent to this computer, new or already paired. A code
    that took too many wrong guesses, or whose account did, answers as a wrong one."""
    body = call.body
    code = body.get("code")
    if not isinstance(code, str) or not (len(code) == 6 and code.isascii() and code.isdigit()):
        raise Refusal(400, "invalid_code")
    ref = body.get("remote_ref")
    if not isinstance(ref, str) or not registry.REMOTE_REF.match(ref):
        raise Refusal(400, "invalid_remote_ref")
    kind = body.get("kind", "hermes")
    if kind not in registry.KINDS:
        raise Refusal(400, "invalid_kind")
    # One step in the database: the address's throttle (429), then the claim, or the wrong
    # guess counted against the address and every live code (0016_pairing_guard.sql).
    async with call.db.service() as conn:
        cur = await conn.execute(
            "select pairing_id, owner_id, claimed_agent_id from public.yui_pair_claim(%s, %s)",
            (sha256_hex("pair:" + code), call.client_ip),
        )
        claimed = await cur.fetchone()
    if claimed is None:
        raise Refusal(401, "invalid_or_expired_code")
    pairing_id, user_id, agent_id = claimed
    async with call.db.service() as conn:
        connector, token = await _pairing_connector(conn, call, user_id, kind)
        try:
            async with conn.transaction():
                await conn.execute(
                    "update public.yui_agents set connector_id = %s, remote_ref = %s, kind = %s"
                    " where id = %s and user_id = %s",
                    (connector["id"], ref, connector["kind"], agent_id, user_id),
                )
        except psycopg.errors.UniqueViolation:
            # That ref is another agent on this computer: the code stays usable (say, with
            # another ref), and a computer made just now is kept, so its token is shown.
            await conn.execute(
                "update public.yui_pairings set used_at = null where id = %s", (pairing_id,)
            )
            clash: Refusal | None = Refusal(409, "profile_already_added", connector_token=token)
        else:
            clash = None
            await conn.execute(
                "update public.yui_pairings set connector_id = %s where id = %s",
                (connector["id"], pairing_id),
            )
            await _report_serving(conn, connector["id"], _serving(body))
            agent = await registry.agent_view(conn, agent_id)
    if clash:
        raise clash
    return {"connector": connector, "connector_token": token, "agent": agent}


async def _pairing_connector(
    conn: psycopg.AsyncConnection, call: Call, user_id: Any, kind: str
) -> tuple[dict[str, Any], str | None]:
    """The computer a pairing binds to: the presented one if it is this person's, else new."""
    bearer = call.bearer or ""
    if bearer.startswith(TOKEN_PREFIX):
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "update public.yui_connectors set last_seen_at = now()"
                " where token_hash = %s and user_id = %s and revoked_at is null"
                " returning id, name, kind",
                (sha256_hex(bearer), user_id),
            )
            existing = await cur.fetchone()
        if existing:
            return existing, None
    token = opaque_token(TOKEN_PREFIX)
    name = registry.clean_name(call.body.get("host_name")) or DEFAULT_HOST_NAME
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "insert into public.yui_connectors (user_id, name, kind, token_hash, last_seen_at)"
            " values (%s, %s, %s, %s, now()) returning id, name, kind",
            (user_id, name, kind, sha256_hex(token)),
        )
        return one(await cur.fetchone(), "the connector insert"), token


async def add(call: Call) -> dict[str, Any]:
    """Add an agent for `remote_ref` on an already paired computer (no code needed)."""
    body = call.body
    ref = body.get("remote_ref")
    if not isinstance(ref, str) or not registry.REMOTE_REF.match(ref):
        raise Refusal(400, "invalid_remote_ref")
    color = body.get("color")
    if color is not None and color not in registry.COLORS:
        raise Refusal(400, "invalid_color")
    name = registry.clean_name(body.get("name", registry.name_from_ref(ref)))
    if name is None:
        raise Refusal(400, "invalid_name")
    async with call.db.service() as conn:
        connector = await connector_for(conn, call)
        await _seen(conn, connector["id"])
        cur = await conn.execute(
            "select id from public.yui_agents where connector_id = %s and remote_ref = %s",
            (connector["id"], ref),
        )
        existing = await cur.fetchone()
        created = existing is None
        agent_id = (
            existing[0]
            if existing
            else await registry.insert_agent(
                conn,
                connector["user_id"],
                name,
                color=color,
                kind=connector["kind"],
                connector_id=connector["id"],
                remote_ref=ref,
            )
        )
        await _report_serving(conn, connector["id"], _serving(body))
        return {"created": created, "agent": await registry.agent_view(conn, agent_id)}


async def session(call: Call) -> dict[str, Any]:
    """Trade the connector token for a 60-minute session JWT; also counts as a heartbeat."""
    async with call.db.service() as conn:
        connector = await connector_for(conn, call)
        await _seen(conn, connector["id"])
        await _report_serving(conn, connector["id"], _serving(call.body))
        token = mint(
            call.jwt_secret,
            {
                "role": "yui_connector",
                "sub": str(connector["user_id"]),
                "cid": str(connector["id"]),
                "iss": "yui-connect",
                "aud": "yui",
            },
        )
        cur = await conn.execute("select now() + make_interval(secs => %s)", (SESSION_TTL,))
        (expires_at,) = await cur.fetchone()
        return {
            "access_token": token,
            "expires_at": iso(expires_at),
            "user_id": connector["user_id"],
            "connector": {"id": connector["id"], "name": connector["name"]},
            "agents": await _agents(conn, connector["id"]),
            "guide": await _guide(conn),
            "app_build": await _app_build(conn, connector["user_id"]),
        }


async def heartbeat(call: Call) -> dict[str, Any]:
    """I'm still here: keeps the host's agents online for two more minutes."""
    async with call.db.service() as conn:
        connector = await connector_for(conn, call)
        seen_at = await _seen(conn, connector["id"])
        await _report_serving(conn, connector["id"], _serving(call.body))
        return {
            "connector": {"id": connector["id"], "name": connector["name"]},
            "seen_at": seen_at,
            "agents": await _agents(conn, connector["id"]),
        }


async def bye(call: Call) -> dict[str, Any]:
    """A clean stop: the agents read offline at once instead of asleep."""
    async with call.db.service() as conn:
        connector = await connector_for(conn, call)
        refs = _serving(call.body)
        if refs is None:
            cur = await conn.execute(
                "update public.yui_connectors set last_seen_at = now(), stopped_at = now()"
                " where id = %s returning stopped_at",
                (connector["id"],),
            )
            return {"stopped_at": (await cur.fetchone())[0]}
        cur = await conn.execute(
            "select public.yui_serving_bye(%s, %s), now()", (connector["id"], refs)
        )
        last_one, now = await cur.fetchone()
        return {"stopped_at": now if last_one else None}


async def status(call: Call) -> dict[str, Any]:
    """The host and its agents with their presence, read without counting as a heartbeat (a
    `yui status` must not make a sleeping agent look online)."""
    async with call.db.service() as conn:
        connector = await connector_for(conn, call)
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "select id, name, kind, last_seen_at, stopped_at from public.yui_connectors"
                " where id = %s",
                (connector["id"],),
            )
            host = await cur.fetchone()
            await cur.execute(
                "select id, name, handle, remote_ref, presence from public.yui_agent_list"
                " where connector_id = %s order by sort, created_at",
                (connector["id"],),
            )
            agents = await cur.fetchall()
    return {"connector": host, "agents": agents}


def _clean_controls(report: Any) -> dict[str, Any] | None:
    """The capability report as stored: only known sections with a mode they allow; None
    clears it. A report this relay can't read (not an object, another `v`) is refused."""
    if report is None:
        return None
    if not isinstance(report, dict) or report.get("v") != CONTROLS_VERSION:
        raise Refusal(400, "invalid_controls")
    sections = report.get("sections")
    if not isinstance(sections, dict):
        raise Refusal(400, "invalid_controls")
    kept = {
        name: mode
        for name, mode in sections.items()
        if isinstance(mode, str) and mode in CONTROLS_MODES.get(name, ())
    }
    return {"v": CONTROLS_VERSION, "sections": kept}


async def controls(call: Call) -> dict[str, Any]:
    """The sections of Controls a host serves for one of its agents (its capability report),
    which the app reads with the agent list; `controls: null` clears it."""
    async with call.db.service() as conn:
        connector = await connector_for(conn, call)
        ref = call.body.get("remote_ref")
        if not isinstance(ref, str) or not registry.REMOTE_REF.match(ref):
            raise Refusal(400, "invalid_remote_ref")
        if "controls" not in call.body:
            raise Refusal(400, "invalid_controls")
        report = _clean_controls(call.body["controls"])
        cur = await conn.execute(
            "update public.yui_agents set controls = %s, controls_at = now()"
            " where connector_id = %s and remote_ref = %s returning 1",
            (None if report is None else Jsonb(report), connector["id"], ref),
        )
        count = len(await cur.fetchall())
        cur = await conn.execute("select now()")
        (now,) = await cur.fetchone()
    return {
        "agents": count,
        "sections": sorted(report["sections"]) if report else [],
        "at": iso(now),
    }


async def guide(call: Call) -> dict[str, Any]:
    """The current channel guide; public."""
    async with call.db.service() as conn:
        return {"guide": await _guide(conn)}


async def counted_pair(call: Call) -> dict[str, Any]:
    """`pair`, its outcome counted for /metrics: paired, or the refusal's code."""
    try:
        answer = await pair(call)
    except Refusal as refusal:
        PAIRINGS.labels(refusal.code).inc()
        raise
    except psycopg.Error as exc:
        PAIRINGS.labels("rate_limited" if exc.sqlstate == "PT429" else "error").inc()
        raise
    PAIRINGS.labels("paired").inc()
    return answer


ACTIONS: dict[str, Action] = {
    "pair": counted_pair,
    "add": add,
    "session": session,
    "heartbeat": heartbeat,
    "bye": bye,
    "guide": guide,
    "status": status,
    "controls": controls,
}
