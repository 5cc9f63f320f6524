"""`/functions/v1/yui-delete`: a person deletes their account, with everything of theirs.

As the seed says, every object under the person goes before the person's row: first their
media (rows, then bytes), then, in one transaction, anything uploaded meanwhile, their rate
buckets and their row, whose foreign keys take the rest with it (agents and threads, hosts,
sessions, devices, passwords, notifications, groups). A host of theirs is refused at its next
call (its token names a row that is gone), so a bridge stops with exit 4. Called again after a
failure halfway, it finishes the job; once the person is gone it answers 401.
"""

from __future__ import annotations

from typing import Any

import psycopg
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from relay.gateway.db import Database
from relay.gateway.functions import answer, request_claims, uuid_or_none
from relay.gateway.storage_files import MediaFolder
from relay.keys import InvalidToken

BUCKET = "yui-media"
# The person's objects: under their folder, or uploaded by them anywhere.
_OBJECTS = (
    "delete from storage.objects where bucket_id = %(bucket)s"
    " and (starts_with(name, %(prefix)s) or owner_id = %(uid)s) returning id"
)
# What the answer counts, read just before the row goes.
_COUNTS = """
select (select count(*) from public.yui_messages where user_id = %(uid)s),
       (select count(*) from public.yui_agents where user_id = %(uid)s),
       (select count(*) from public.yui_connectors where user_id = %(uid)s),
       (select count(*) from public.yui_devices where user_id = %(uid)s),
       (select count(*) from public.yui_sessions where user_id = %(uid)s)
"""
# Rate buckets are keyed `<limit>:u:<person>` and `<limit>:c:<host>`.
_BUCKETS = (
    "delete from public.yui_rate_buckets where split_part(key, ':', 3) = any("
    " array[%(uid)s::text] || array(select id::text from public.yui_connectors"
    " where user_id = %(uid)s::uuid)) and split_part(key, ':', 2) in ('u', 'c')"
)


async def delete_person(db: Database, files: MediaFolder, user_id: str) -> dict[str, Any]:
    """Delete the person `user_id` and all of theirs; what went, counted."""
    params = {"bucket": BUCKET, "prefix": f"{user_id}/", "uid": user_id}
    async with db.service() as conn:
        cur = await conn.execute("select 1 from public.yui_users where id = %s", (user_id,))
        if await cur.fetchone() is None:
            return {"deleted": False}
        cur = await conn.execute(_OBJECTS, params)
        objects = [str(row[0]) for row in await cur.fetchall()]
    files.remove(objects)  # the bytes, once their rows are gone for good
    async with db.service() as conn:
        cur = await conn.execute(_OBJECTS, params)  # uploaded since: gone with the rest
        late = [str(row[0]) for row in await cur.fetchall()]
        cur = await conn.execute(_COUNTS, params)
        counts = await cur.fetchone()
        await conn.execute(_BUCKETS, params)
        await conn.execute("delete from public.yui_users where id = %(uid)s", params)
    files.remove(late)
    messages, agents, hosts, devices, sessions = counts or (0, 0, 0, 0, 0)
    return {
        "deleted": True,
        "user_id": user_id,
        "objects": len(objects) + len(late),
        "messages": messages,
        "agents": agents,
        "hosts": hosts,
        "devices": devices,
        "sessions": sessions,
    }


def routes(db: Database, settings: Any) -> list[BaseRoute]:
    files = MediaFolder(settings.folder / "media")

    async def endpoint(request: Request) -> Response:
        """POST with the person's app token; the body, if any, is not read."""
        if request.method != "POST":
            return answer(405, {"error": "method_not_allowed"})
        try:
            claims = request_claims(request, settings.jwt_secret)
        except InvalidToken:
            return answer(401, {"error": "unauthorized"})
        user_id = uuid_or_none((claims or {}).get("sub"))
        if not claims or claims.get("role") != "yui_user" or user_id is None:
            return answer(401, {"error": "unauthorized"})
        try:
            result = await delete_person(db, files, user_id)
        except psycopg.OperationalError:
            return answer(503, {"error": "unavailable"})
        if not result["deleted"]:
            return answer(401, {"error": "unauthorized"})
        return answer(200, result)

    return [
        Route(
            "/functions/v1/yui-delete",
            endpoint,
            methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        )
    ]
