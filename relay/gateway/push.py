"""`/functions/v1/yui-push`: the person's phones, and a push for every agent message.

The app registers its APNs device token, says which thread is open (presence), and
unregisters on sign-out, with the person's app token. A host, with its connector token, asks
for a push after writing an agent row; the relay checks the row is the host's to push, and
sends one alert to each of the person's phones, except one open on that thread right now.
Where the alerts go (Apple, or the local relay's sink) is `apns.PushService`'s business; each
one is recorded in `yui_notifications`, which `yui app notifications` reads.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from relay.gateway.apns import Outcome, PushService, PushUnavailable
from relay.gateway.connect import connector_for, host_bucket
from relay.gateway.db import Database
from relay.gateway.functions import Action, Call, Refusal, serve, take, uuid_or_none
from yuilines.preview import one_line, without_screens

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings

log = logging.getLogger("yui.push")

PATH = "/functions/v1/yui-push"
DEVICE_TOKEN = re.compile(r"^[0-9a-f]{64,200}$")
ENVIRONMENTS = ("production", "sandbox")
USER_AGENT = re.compile(r"^Yui/(\d{1,6})(?:\.\d+)?(?:\s|$)")  # "Yui/142 CFNetwork/…"
DIGITS = re.compile(r"^\d{1,6}$")
MAX_BUILD = 999_999
MAX_NAME = 60
NOTIFY_WINDOW = "10 minutes"  # a host pushes only what it wrote just now
PRESENCE_WINDOW = "90 seconds"  # the app repeats presence every 60 s; a killed app goes stale
PREVIEW_MAX = 160
MUTED = {"ok": True, "muted": True, "devices": 0, "delivered": 0, "skipped": 0, "results": []}


# --- the alert ----------------------------------------------------------------------------


def preview(body: str) -> str:
    """The text outside ```yui fences, on one line, at most PREVIEW_MAX characters."""
    return one_line(without_screens(body), PREVIEW_MAX)


def alert_body(agent_name: str, body: str, sender: str | None, handoff: bool) -> str:
    """The preview; for a handoff, a message from someone else, or nothing to preview, a line
    that names who has something for the person."""
    text = preview(body)
    if handoff or sender or not text:
        return f"{sender or agent_name} has something for you in Yui"
    return text


def payload(agent_id: str, message_id: str, title: str, body: str) -> dict[str, Any]:
    """What the phone gets: a banner grouped by thread, and the link a tap opens."""
    return {
        "aps": {
            "alert": {"title": title, "body": body},
            "sound": "default",
            "thread-id": agent_id,
            "mutable-content": 1,
        },
        "agent_id": agent_id,
        "message_id": message_id,
        "url": f"yui://agent/{agent_id}/thread",
    }


@functools.cache
def _service(folder: Path) -> PushService:
    """One service per relay folder, shared by the route and the lifespan that closes it."""
    return PushService(folder)


# --- who is calling -----------------------------------------------------------------------


async def _person(conn: psycopg.AsyncConnection, call: Call) -> str:
    """The person an app token names (a host's session is not a person)."""
    claims = call.claims() or {}
    user_id = uuid_or_none(claims.get("sub"))
    if claims.get("role") != "yui_user" or user_id is None:
        raise Refusal(401, "unauthorized")
    cur = await conn.execute("select 1 from public.yui_users where id = %s", (user_id,))
    if await cur.fetchone() is None:
        raise Refusal(401, "unauthorized")
    return user_id


# --- the app's actions --------------------------------------------------------------------


def _device_token(body: dict[str, Any]) -> str:
    token = body.get("token")
    token = token.lower() if isinstance(token, str) else ""
    if not DEVICE_TOKEN.match(token):
        raise Refusal(400, "invalid_token")
    return token


def _build(call: Call) -> int | None:
    """The app's build: `build` in the body, else the `Yui/<build>` user agent, else unknown."""
    build = call.body.get("build")
    if isinstance(build, str) and DIGITS.match(build):
        build = int(build)
    if isinstance(build, int) and not isinstance(build, bool) and 1 <= build <= MAX_BUILD:
        return build
    match = USER_AGENT.match(call.extra.get("user_agent", ""))
    return int(match.group(1)) if match and int(match.group(1)) >= 1 else None


def _short_text(body: dict[str, Any], key: str, error: str) -> str | None:
    """`body[key]` on one line and at most MAX_NAME long, None if absent or blank; a value
    that isn't a string is refused with `error`."""
    text = body.get(key)
    if text is None:
        return None
    if not isinstance(text, str):
        raise Refusal(400, error)
    return " ".join(text.split())[:MAX_NAME].rstrip() or None


async def register(call: Call) -> dict[str, Any]:
    """This phone pushes to this person: a token that was on another account moves here."""
    token = _device_token(call.body)
    environment = call.body.get("environment", "production")
    if environment not in ENVIRONMENTS:
        raise Refusal(400, "invalid_environment")
    values = {
        "token": token,
        "env": environment,
        "name": _short_text(call.body, "name", "invalid_name"),
        "build": _build(call),
    }
    async with call.db.service() as conn:
        values["user"] = await _person(conn, call)
        # In SET, `d` is the row as it was: what a phone told another account is not kept.
        await conn.execute(
            "insert into public.yui_devices as d"
            " (user_id, apns_token, environment, name, app_build, app_build_at)"
            " values (%(user)s, %(token)s, %(env)s, %(name)s, %(build)s::integer,"
            "  case when %(build)s::integer is not null then now() end)"
            " on conflict (apns_token) do update set"
            "  environment = excluded.environment,"
            "  name = case when d.user_id = excluded.user_id"
            "   then coalesce(excluded.name, d.name) else excluded.name end,"
            "  app_build = case when d.user_id = excluded.user_id"
            "   then coalesce(excluded.app_build, d.app_build) else excluded.app_build end,"
            "  app_build_at = case when excluded.app_build is not null then now()"
            "   when d.user_id = excluded.user_id then d.app_build_at end,"
            "  active_at = case when d.user_id = excluded.user_id then d.active_at end,"
            "  active_agent_id = case when d.user_id = excluded.user_id"
            "   then d.active_agent_id end,"
            "  last_push_at = case when d.user_id = excluded.user_id then d.last_push_at end,"
            "  last_error = null,"
            "  user_id = excluded.user_id",
            values,
        )
    return {"ok": True}


async def unregister(call: Call) -> dict[str, Any]:
    """Sign-out: this phone no longer pushes to this person."""
    token = _device_token(call.body)
    async with call.db.service() as conn:
        user_id = await _person(conn, call)
        await conn.execute(
            "delete from public.yui_devices where apns_token = %s and user_id = %s",
            (token, user_id),
        )
    return {"ok": True}


async def presence(call: Call) -> dict[str, Any]:
    """The app is open (on an agent's thread) or went to the background; `tracked` is false
    when this phone is not registered to the caller."""
    token = _device_token(call.body)
    active = call.body.get("active")
    if not isinstance(active, bool):
        raise Refusal(400, "invalid_active")
    agent_id = call.body.get("agent_id")
    if agent_id is not None and (agent_id := uuid_or_none(agent_id)) is None:
        raise Refusal(400, "invalid_agent_id")
    async with call.db.service() as conn:
        user_id = await _person(conn, call)
        # Another person's agent is not a thread this phone can be open on: left unset.
        cur = await conn.execute(
            "update public.yui_devices set"
            "  active_at = case when %(active)s then now() end,"
            "  active_agent_id = case when %(active)s then (select a.id from public.yui_agents a"
            "   where a.id = %(agent)s::uuid and a.user_id = %(user)s) end,"
            "  app_build = coalesce(%(build)s::integer, app_build),"
            "  app_build_at = case when %(build)s::integer is not null then now()"
            "   else app_build_at end"
            " where apns_token = %(token)s and user_id = %(user)s returning id",
            {
                "active": active,
                "agent": agent_id,
                "user": user_id,
                "token": token,
                "build": _build(call),
            },
        )
        tracked = await cur.fetchone() is not None
    return {"ok": True, "tracked": tracked}


# --- the host's action --------------------------------------------------------------------


async def _pushable(
    conn: psycopg.AsyncConnection, host: dict[str, Any], message_id: str
) -> dict[str, Any]:
    """The agent row `message_id` if this host may push it now, else the refusal."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select m.user_id, m.agent_id, m.sender, m.kind, m.body,"
            f" m.created_at < now() - interval '{NOTIFY_WINDOW}' as too_old,"
            " a.name as agent_name, a.connector_id, a.push_muted"
            " from public.yui_messages m join public.yui_agents a on a.id = m.agent_id"
            " where m.id = %s",
            (message_id,),
        )
        message = await cur.fetchone()
    # Not found and not yours answer alike, so a host learns nothing about others' rows.
    if (
        message is None
        or message["connector_id"] != host["id"]
        or message["user_id"] != host["user_id"]
    ):
        raise Refusal(404, "not_found")
    if message["sender"] != "agent":
        raise Refusal(400, "not_an_agent_message")
    if message["kind"] == "control":
        raise Refusal(400, "control_row")
    if message["too_old"]:
        raise Refusal(409, "too_old")
    return message


def _notify_request(call: Call) -> tuple[str, str | None]:
    """The row to push and who handed it off (`from`: another profile's name), if anyone."""
    message_id = uuid_or_none(call.body.get("message_id"))
    if message_id is None:
        raise Refusal(400, "invalid_message_id")
    return message_id, _short_text(call.body, "from", "invalid_from")


async def _devices(conn: psycopg.AsyncConnection, message: dict[str, Any]) -> list[dict[str, Any]]:
    """The person's phones, each with whether it is watching this agent's thread now."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "select id, apns_token, environment, coalesce(active_agent_id = %s and"
            f" active_at > now() - interval '{PRESENCE_WINDOW}', false) as watching"
            " from public.yui_devices where user_id = %s order by created_at, id",
            (message["agent_id"], message["user_id"]),
        )
        return await cur.fetchall()


async def notify(call: Call) -> dict[str, Any]:
    """Push agent row `message_id` to every phone of its person. One transaction when there is
    nothing to send (no phone, or the person is watching the thread), as for most agent rows;
    a second records what was sent."""
    refused: Refusal | None = None
    async with call.db.service() as conn:
        host = await connector_for(conn, call, limit=None)
        try:
            message_id, sender = _notify_request(call)
            message = await _pushable(conn, host, message_id)
            devices = [] if message["push_muted"] else await _devices(conn, message)
        except Refusal as refusal:
            refused = refusal  # the bucket's token is spent all the same
        # The host's bucket last, with the COMMIT: every push of a host waits for its row, so
        # it is locked for that one round trip, not the whole transaction's.
        await take(conn, host_bucket("push", host["id"]), "push", commit=True)
    if refused is not None:
        raise refused
    if message["push_muted"]:
        return {**MUTED}
    handoff = call.body.get("handoff") is True
    agent_id = str(message["agent_id"])
    title = message["agent_name"]
    body = alert_body(title, message["body"], sender, handoff)
    alert = payload(agent_id, message_id, title, body)
    targets = [d for d in devices if not d["watching"]]
    try:
        sunk, outcomes = await call.extra["push"].deliver(targets, alert)
    except PushUnavailable:
        raise Refusal(503, "push_unavailable") from None
    if targets:
        async with call.db.service() as conn:
            await _record(conn, message, message_id, alert, targets, outcomes, sunk)
    return {
        "ok": True,
        "devices": len(devices),
        "delivered": sum(o.ok for o in outcomes),
        "skipped": len(devices) - len(targets),
        "results": [
            {
                "device": d["id"],
                "environment": d["environment"],
                "ok": o.ok,
                "status": o.status,
                "reason": o.reason,
            }
            for d, o in zip(targets, outcomes, strict=True)
        ],
    }


async def _record(
    conn: psycopg.AsyncConnection,
    message: dict[str, Any],
    message_id: str,
    alert: dict[str, Any],
    devices: list[dict[str, Any]],
    outcomes: list[Outcome],
    sunk: bool,
) -> None:
    """Each push in yui_notifications, and on each device its last push or error; a device
    Apple no longer knows is deleted."""
    shown = alert["aps"]["alert"]
    async with conn.cursor() as cur:
        await cur.executemany(
            "insert into public.yui_notifications (user_id, agent_id, message_id, device_id,"
            " title, body, payload, environment, status, reason)"
            " values (%s, %s, %s, (select id from public.yui_devices where id = %s),"
            " %s, %s, %s, %s, %s, %s)",
            [
                (
                    message["user_id"],
                    message["agent_id"],
                    message_id,
                    d["id"],
                    shown["title"],
                    shown["body"],
                    Jsonb(alert),
                    d["environment"],
                    "sunk" if sunk else "sent" if o.ok else "failed",
                    None if o.ok else o.reason,
                )
                for d, o in zip(devices, outcomes, strict=True)
            ],
        )
    delivered = [d["id"] for d, o in zip(devices, outcomes, strict=True) if o.ok]
    gone = [d["id"] for d, o in zip(devices, outcomes, strict=True) if o.gone]
    failed = [
        (o.reason, d["id"])
        for d, o in zip(devices, outcomes, strict=True)
        if not o.ok and not o.gone
    ]
    await conn.execute(
        "update public.yui_devices set last_push_at = now(), last_error = null where id = any(%s)",
        (delivered,),
    )
    await conn.execute("delete from public.yui_devices where id = any(%s)", (gone,))
    async with conn.cursor() as cur:
        await cur.executemany("update public.yui_devices set last_error = %s where id = %s", failed)
    for reason, device in failed:
        log.warning("push to device %s failed: %s", device, reason)


ACTIONS: dict[str, Action] = {
    "register": register,
    "unregister": unregister,
    "presence": presence,
    "notify": notify,
}


# --- the gateway part ---------------------------------------------------------------------


def routes(db: Database, settings: GatewaySettings) -> list[BaseRoute]:
    service = _service(settings.folder)

    async def endpoint(request: Request) -> Response:
        extra = {"push": service, "user_agent": request.headers.get("user-agent", "")}
        return await serve(request, db, settings.jwt_secret, ACTIONS, extra=extra)

    return [Route(PATH, endpoint, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])]


@asynccontextmanager
async def lifespan(db: Database, settings: GatewaySettings) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await _service(settings.folder).aclose()
