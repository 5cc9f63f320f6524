"""The person's side: `/functions/v1/yui-auth` (sessions) and `/functions/v1/yui-agents`.

On the hosted backend a person signs in with Apple; the local relay has no Apple, so signing up
is a service-role operation (`yui app signup` uses the relay's service key). From then on the
person holds a refresh token and trades it for 60-minute app tokens, as the phone does. A person
may also set an e-mail address and a password (`set_password`, with their app token) to sign in
with the official clients' `auth` (`/auth/v1`, relay/gateway/auth.py), which shares the sessions,
the passwords and the checks kept here.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import functools
import hmac
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from psycopg.rows import dict_row

from relay.gateway import registry
from relay.gateway.db import one
from relay.gateway.functions import Action, Call, Refusal, take, uuid_or_none
from relay.keys import SESSION_TTL, mint, opaque_token, sha256_hex

REFRESH_PREFIX = "yui_rt_"
REFRESH_TTL = dt.timedelta(days=60)
# What a session's answer says about its person, from yui_users as `u`.
PERSON = "u.id, u.name, u.email, u.is_anonymous, u.created_at, u.last_sign_in_at"
NAME_MAX = 60
EMAIL_MAX = 254
_EMAIL = re.compile(r"[^@\s\x00-\x1f\x7f]+@[^@\s\x00-\x1f\x7f]+")
PASSWORD_MIN = 6  # characters, GoTrue's default
PASSWORD_MAX = 72  # bytes of UTF-8, GoTrue's (bcrypt's) limit
# scrypt at 32 MiB and about 150 ms a hash on a 2-core machine (stronger than Django's
# default); the parameters are stored with each hash, so they can be raised later.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
SCRYPT_LEN = 32
# At most this many hashes at once, beside the event loop: each takes 32 MiB and a core.
_HASHERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="yui-scrypt")


# --- sessions -----------------------------------------------------------------------------


async def open_session(
    conn: psycopg.AsyncConnection, jwt_secret: str, user: dict[str, Any], chain: Any = None
) -> dict[str, Any]:
    """A refresh token (kept as its SHA-256) and a 60-minute app token for `user`. A refresh
    keeps its `chain` (the sign-in it descends from), which the app token names as
    `session_id`; a sign-in starts a new one."""
    refresh = opaque_token(REFRESH_PREFIX)
    cur = await conn.execute(
        "insert into public.yui_sessions (user_id, refresh_hash, expires_at, chain_id)"
        " values (%s, %s, now() + %s, coalesce(%s, gen_random_uuid())) returning chain_id",
        (user["id"], sha256_hex(refresh), REFRESH_TTL, chain),
    )
    (chain_id,) = one(await cur.fetchone(), "a session insert")
    claims = {
        "role": "yui_user",
        "sub": str(user["id"]),
        "iss": "yui-auth",
        "aud": "yui",
        "session_id": str(chain_id),
        "is_anonymous": bool(user.get("is_anonymous")),
    }
    return {
        "access_token": mint(jwt_secret, claims),
        "token_type": "bearer",
        "expires_in": SESSION_TTL,
        "refresh_token": refresh,
    }


async def rotate(
    conn: psycopg.AsyncConnection, jwt_secret: str, token: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A new session for a refresh token, which is used up (rotation), and its person. Each
    refresh revokes one session row and opens another, so a person may refresh only at the
    `refresh` rate (yui_limits); a refused refresh leaves its refresh token usable."""
    if not isinstance(token, str) or not token.startswith(REFRESH_PREFIX):
        raise Refusal(401, "invalid_grant")
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"select s.id as session, s.chain_id, u.suspended_at, {PERSON}"
            " from public.yui_sessions s join public.yui_users u on u.id = s.user_id"
            " where s.refresh_hash = %s and s.revoked_at is null and s.expires_at > now()"
            " for update of s",
            (sha256_hex(token),),
        )
        found = await cur.fetchone()
    if found is None:
        raise Refusal(401, "invalid_grant")
    if found.pop("suspended_at") is not None:
        raise Refusal(403, "account_suspended")
    await take(conn, f"refresh:u:{found['id']}", "refresh")
    await conn.execute(
        "update public.yui_sessions set revoked_at = now() where id = %s", (found.pop("session"),)
    )
    chain = found.pop("chain_id")
    return await open_session(conn, jwt_secret, found, chain), found


def _yui_auth_user(person: dict[str, Any]) -> dict[str, Any]:
    """The person as `yui-auth` has always answered them."""
    return {"id": person["id"], "name": person["name"], "created_at": person["created_at"]}


async def signup(call: Call) -> dict[str, Any]:
    """Create a person (service key only) and open their first session."""
    claims = call.claims()
    if not claims or claims.get("role") != "service_role":
        raise Refusal(401, "unauthorized")
    name = person_name(call.body.get("name"))
    if name is None:
        raise Refusal(400, "invalid_name")
    async with call.db.service() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            "insert into public.yui_users (name) values (%s) returning id, name, created_at",
            (name,),
        )
        user = one(await cur.fetchone(), "a person insert")
        return {**await open_session(conn, call.jwt_secret, user), "user": user}


async def refresh(call: Call) -> dict[str, Any]:
    """A new app token for a refresh token (see `rotate`)."""
    async with call.db.service() as conn:
        session, person = await rotate(conn, call.jwt_secret, call.body.get("refresh_token"))
    return {**session, "user": _yui_auth_user(person)}


# --- passwords and e-mail addresses -------------------------------------------------------


def _utf8(value: str) -> bytes | None:
    """The text's UTF-8, or None for a string JSON can carry but UTF-8 can't (a lone
    surrogate), which the database would refuse."""
    try:
        return value.encode()
    except UnicodeEncodeError:
        return None


def person_name(value: Any) -> str | None:
    """A person's name as yui_users keeps it (trimmed, 1 to 60 characters), or None."""
    if not isinstance(value, str) or _utf8(value) is None:
        return None
    name = value.strip()
    return name if 1 <= len(name) <= NAME_MAX else None


def clean_email(value: Any) -> str:
    """An e-mail address as the relay keeps it (trimmed, lower case), or 400 `invalid_email`."""
    email = value.strip().lower() if isinstance(value, str) else ""
    if len(email) > EMAIL_MAX or not _EMAIL.fullmatch(email) or _utf8(email) is None:
        raise Refusal(400, "invalid_email")
    return email


def clean_password(value: Any) -> str:
    """A password within GoTrue's bounds: 422 `weak_password` below 6 characters,
    `password_too_long` past 72 bytes, 400 `invalid_password` if it isn't text."""
    encoded = _utf8(value) if isinstance(value, str) else None
    if encoded is None:
        raise Refusal(400, "invalid_password")
    if len(value) < PASSWORD_MIN:
        raise Refusal(422, "weak_password")
    if len(encoded) > PASSWORD_MAX:
        raise Refusal(422, "password_too_long")
    return value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return Scrypt(salt=salt, length=SCRYPT_LEN, n=n, r=r, p=p).derive(password.encode())


def _hash_now(password: str) -> str:
    salt = os.urandom(16)
    key = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(key)}"


def _matches_now(password: str, stored: str) -> bool:
    _, n, r, p, salt, key = stored.split("$")
    found = _scrypt(password, base64.b64decode(salt), int(n), int(r), int(p))
    return hmac.compare_digest(found, base64.b64decode(key))


@functools.cache
def _nobody() -> str:
    """Checked when nobody has the address, so that costs what a wrong password does."""
    return _hash_now(os.urandom(12).hex())


async def hash_password(password: str) -> str:
    """A salted scrypt hash of `password`, computed off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_HASHERS, _hash_now, password)


async def password_matches(password: str, stored: str | None) -> bool:
    """Whether `password` is the one `stored` was made from (constant-time); with nothing
    stored, a hash is still computed and the answer is no."""
    loop = asyncio.get_running_loop()
    same = await loop.run_in_executor(_HASHERS, _matches_now, password, stored or _nobody())
    return same and stored is not None


async def set_credentials(
    conn: psycopg.AsyncConnection, user_id: Any, email: str | None, hashed: str | None
) -> None:
    """Give a person an e-mail address and/or a password hash (None: left as they are); 422
    `email_exists` when another person has that address. An anonymous person with both is
    anonymous no more."""
    if email is not None:
        try:
            async with conn.transaction():
                await conn.execute(
                    "update public.yui_users set email = %s where id = %s", (email, user_id)
                )
        except psycopg.errors.UniqueViolation:
            raise Refusal(422, "email_exists") from None
    if hashed is not None:
        await conn.execute(
            "insert into public.yui_passwords (user_id, hash) values (%s, %s)"
            " on conflict (user_id) do update set hash = excluded.hash, updated_at = now()",
            (user_id, hashed),
        )
    await conn.execute(
        "update public.yui_users u set is_anonymous = false where id = %s and is_anonymous"
        " and email is not null and exists"
        " (select 1 from public.yui_passwords p where p.user_id = u.id)",
        (user_id,),
    )


async def app_person(conn: psycopg.AsyncConnection, claims: dict[str, Any] | None) -> Any:
    """The active person an app token names, as a row of PERSON (401 `unauthorized` for
    anything else, 403 `account_suspended` under the kill switch)."""
    if not claims or claims.get("role") != "yui_user" or not uuid_or_none(claims.get("sub")):
        raise Refusal(401, "unauthorized")
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            f"select {PERSON}, u.suspended_at from public.yui_users u where u.id = %s",
            (claims["sub"],),
        )
        person = await cur.fetchone()
    if person is None:
        raise Refusal(401, "unauthorized")
    if person.pop("suspended_at") is not None:
        raise Refusal(403, "account_suspended")
    return person


async def set_password(call: Call) -> dict[str, Any]:
    """A password, and the e-mail address to sign in with it (required unless the person has
    one), for the person the app token names: `yui app set-password`. A change takes from the
    person's `signin_account` bucket before its hash is computed."""
    password = clean_password(call.body.get("password"))
    email = call.body.get("email")
    email = None if email is None else clean_email(email)
    async with call.db.service() as conn:
        person = await app_person(conn, call.claims())
        if email is None and person["email"] is None:
            raise Refusal(400, "email_required")
        await take(conn, f"password:u:{person['id']}", "signin_account")
    hashed = await hash_password(password)
    async with call.db.service() as conn:
        await set_credentials(conn, person["id"], email, hashed)
    return {"user": {**_yui_auth_user(person), "email": email or person["email"]}}


AUTH_GRANTS: dict[str, Action] = {
    "signup": signup,
    "refresh": refresh,
    "set_password": set_password,
}


async def _person(conn: psycopg.AsyncConnection, call: Call) -> Any:
    """The id of the person an app token names: active, and within their `agents_api`
    bucket."""
    user_id = str((await app_person(conn, call.claims()))["id"])
    await take(conn, f"agents:u:{user_id}", "agents_api")
    return user_id


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
