"""The web app: the person's side of Yui in a browser, served at `/app/` on the relay's own
origin, and `/functions/v1/yui-web`, which trades a one-time sign-in link for a session.

The page is built from web/ (`make web`, part of `make setup`) into web/dist; a relay without
a built page answers `/app/` with the one line that says how to build it. Everything the page
reads and writes goes through the official supabase-js against this same origin, so the
database's policies decide what it sees, as for the phone.
"""

from __future__ import annotations

import gzip
import mimetypes
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from relay.gateway import people
from relay.gateway.db import Database
from relay.gateway.functions import Action, Call, Refusal, take, to_json
from relay.gateway.people import PERSON
from relay.keys import KEY_TTL, mint, sha256_hex

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings

WEB_DIST = Path(__file__).resolve().parents[2] / "web" / "dist"
NOT_BUILT = "the page isn't built: run make setup\n"
SECRET_PREFIX = "yui_web_"
SECRET_MAX = 128  # characters in a link's secret; anything longer is no secret of ours
BUILD_MAX = 1_000_000  # the largest build a page may say (the table holds the same bound)
GZIP_MIN = 1024  # bytes: smaller files go as they are
# The page loads only what its own origin serves, and talks only to this origin (its socket too).
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; "
        "connect-src 'self' ws: wss:; style-src 'self'; script-src 'self'; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


class Files:
    """web/dist as it is on disk now, each file read (and gzipped) once per change."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[str, tuple[float, bytes, bytes | None]] = {}

    def built(self) -> bool:
        return (self.root / "index.html").is_file()

    def find(self, name: str) -> Path | None:
        """The file `name` names inside the folder, or None (never one outside it)."""
        parts = PurePosixPath(name or "index.html").parts
        if not parts or any(p.startswith((".", "/")) or "\\" in p for p in parts):
            return None
        path = self.root.joinpath(*parts).resolve()
        inside = path.is_relative_to(self.root.resolve())
        return path if inside and path.is_file() else None

    def read(self, path: Path) -> tuple[bytes, bytes | None]:
        """The file's bytes, and their gzip when that is worth sending."""
        key, mtime = str(path), path.stat().st_mtime
        cached = self._cache.get(key)
        if cached is None or cached[0] != mtime:
            data = path.read_bytes()
            packed = gzip.compress(data, 9, mtime=0) if len(data) >= GZIP_MIN else None
            cached = (mtime, data, packed)
            self._cache[key] = cached
        return cached[1], cached[2]


def _serve(files: Files, name: str, request: Request) -> Response:
    path = files.find(name)
    if path is None:
        return PlainTextResponse("not found\n", 404)
    data, packed = files.read(path)
    headers = dict(SECURITY_HEADERS)
    headers["vary"] = "Accept-Encoding"
    if packed is not None and "gzip" in request.headers.get("accept-encoding", ""):
        data, headers["content-encoding"] = packed, "gzip"
    media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if media.startswith("text/") or media.endswith("javascript"):
        media += "; charset=utf-8"
    return Response(data, headers=headers, media_type=media)


def routes(db: Database, settings: GatewaySettings) -> list[BaseRoute]:
    files = Files(WEB_DIST)
    # The page's supabase-js needs the project's anon key; it is public, as on any project.
    config = {"anon_key": mint(settings.jwt_secret, {"role": "anon", "iss": "yui-relay"}, KEY_TTL)}

    async def page(request: Request) -> Response:
        if not files.built():
            return PlainTextResponse(NOT_BUILT, 503, headers={"cache-control": "no-store"})
        name = request.path_params.get("name", "")
        if name == "config.json":
            return Response(to_json(config), media_type="application/json")
        return _serve(files, name, request)

    async def bare(request: Request) -> Response:
        return RedirectResponse("/app/", 308)

    return [
        Route("/app", bare, methods=["GET", "HEAD"]),
        Route("/app/{name:path}", page, methods=["GET", "HEAD"]),
    ]


@asynccontextmanager
async def lifespan(db: Database, settings: GatewaySettings) -> AsyncIterator[None]:
    """Nothing to prepare: the page is read from disk as it is asked for."""
    yield


# --- the one-time sign-in link ----------------------------------------------------------------


async def redeem(call: Call) -> dict[str, Any]:
    """A link's secret, once and within its ten minutes, for a session of its person (as
    `yui-auth` answers a sign-in). Every try is counted per address, as password sign-ins are;
    a wrong, used or expired secret is 401 `invalid_link` alike."""
    secret = call.body.get("secret")
    async with call.db.service() as conn:
        await take(conn, f"signin:a:{call.client_ip}", "signin_address")
    if not (isinstance(secret, str) and secret.startswith(SECRET_PREFIX)):
        raise Refusal(401, "invalid_link")
    if len(secret) > SECRET_MAX:
        raise Refusal(401, "invalid_link")
    async with call.db.service() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "update public.yui_signin_links set used_at = now() where secret_hash = %s"
            " and used_at is null and expires_at > now() returning user_id",
            (sha256_hex(secret),),
        )
        link = await cur.fetchone()
        if link is None:
            raise Refusal(401, "invalid_link")
        await cur.execute(
            f"update public.yui_users u set last_sign_in_at = now() where u.id = %s"
            f" and u.suspended_at is null returning {PERSON}",
            (link["user_id"],),
        )
        person = await cur.fetchone()
        if person is None:
            raise Refusal(403, "account_suspended")
        session = await people.open_session(conn, call.jwt_secret, person)
    user = {"id": str(person["id"]), "name": person["name"]}
    return {**session, "user": user}


async def seen(call: Call) -> dict[str, Any]:
    """The page's build, said by a signed-in page when it opens: a bridge gates replies for
    the oldest build among the person's apps, and a person with only the web app has no phone
    to say one (0031_web_builds.sql)."""
    build = call.body.get("build")
    if not (isinstance(build, int) and not isinstance(build, bool) and 1 <= build <= BUILD_MAX):
        raise Refusal(400, "invalid_build")
    async with call.db.service() as conn:
        person = await people.app_person(conn, call.claims())
        await conn.execute(
            "insert into public.yui_web_builds (user_id, app_build) values (%s, %s)"
            " on conflict (user_id) do update"
            " set app_build = excluded.app_build, app_build_at = now()",
            (person["id"], build),
        )
    return {"build": build}


ACTIONS: dict[str, Action] = {"redeem": redeem, "seen": seen}
