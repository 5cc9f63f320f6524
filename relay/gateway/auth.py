"""`/auth/v1`: the part of Supabase Auth (GoTrue) the official clients' `auth` calls, served
over the relay's own people, sessions and app tokens.

`signUp` (an e-mail address and a password), `signInWithPassword`, `signInAnonymously` (only
where the relay allows it: `yui relay up --allow-anonymous-signin`), `refreshSession` and the
SDKs' auto refresh, `getUser`, `updateUser` (password, e-mail address, name) and `signOut`
(scope global, local or others). A session is what `yui-auth` gives the phone: a 60-minute app
token for the role `yui_user` (so row-level security decides what it reads, as for the phone)
and a refresh token in yui_sessions, used up by each refresh and counted by the person's
`refresh` bucket. Everything else under /auth/v1 answers GoTrue's JSON error, so the clients
raise their AuthApiError with its status and code.

GoTrue's error body depends on the API version the client sends (`X-Supabase-Api-Version`,
both SDKs send 2024-01-01): `{"code": "<error_code>", "msg": …}` from that version on, else
`{"code": <status>, "error_code": …, "msg": …}`. The clients read the code from the first only
when the answer carries that header too, which every answer here does.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from relay.gateway import people
from relay.gateway.db import Database, one
from relay.gateway.functions import (
    BodyTooLarge,
    Refusal,
    bearer,
    client_ip,
    read_body,
    take,
    to_json,
    uuid_or_none,
)
from relay.gateway.people import PERSON
from relay.gateway.rest_http import JSON_TYPE
from relay.keys import InvalidToken, sha256_hex, verify

if TYPE_CHECKING:
    from relay.gateway.app import GatewaySettings

log = logging.getLogger("yui.auth")

PREFIX = "/auth/v1"
VERSION_HEADER = "x-supabase-api-version"
VERSION = "2024-01-01"
_VERSION = re.compile(r"^2\d{3}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")
AUDIENCE = "yui"  # the app tokens' `aud`, and so the user's
BODY_CAP = 64 * 1024  # an auth body is a few fields
ANONYMOUS_NAME = "Guest"
SCOPES = ("global", "local", "others")
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
INVALID_LOGIN = "Invalid login credentials"


class AuthError(Exception):
    """A GoTrue error: its status, the `error_code` the clients branch on, and its message."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


# The refusals of relay/gateway/people.py, as GoTrue says them.
REFUSALS: dict[str, tuple[int, str, str]] = {
    "invalid_grant": (400, "refresh_token_not_found", "Invalid Refresh Token: Not Found"),
    "account_suspended": (400, "user_banned", "User is banned"),
    "rate_limited": (429, "over_request_rate_limit", "Request rate limit reached"),
    "weak_password": (422, "weak_password", "Password should be at least 6 characters."),
    "password_too_long": (422, "validation_failed", "Password cannot be longer than 72 bytes"),
    "invalid_password": (400, "validation_failed", "The password must be text"),
    "invalid_email": (400, "validation_failed", "Unable to validate email address"),
    "email_exists": (422, "email_exists", "A user with this email address already exists"),
    "unauthorized": (403, "user_not_found", "User from sub claim in JWT does not exist"),
}


def refused(refusal: Refusal, status: int | None = None) -> AuthError:
    """A people.py refusal as GoTrue's error (`status` for an endpoint that answers it with
    another one: a banned person is 400 at /token, 403 where a token is presented)."""
    known, code, message = REFUSALS[refusal.code]
    extra = {"weak_password": {"reasons": ["length"]}} if code == "weak_password" else {}
    return AuthError(status or known, code, message, **extra)


def _modern(request: Request) -> bool:
    """Whether the client asked for GoTrue's API of 2024-01-01 or later."""
    asked = request.headers.get(VERSION_HEADER, "")
    return bool(_VERSION.match(asked)) and asked >= VERSION


def _json(status: int, data: Any) -> Response:
    return Response(to_json(data), status, {VERSION_HEADER: VERSION}, media_type=JSON_TYPE)


def error_response(request: Request, error: AuthError) -> Response:
    body: dict[str, Any]
    if _modern(request):
        body = {"code": error.code, "msg": error.message}
    else:
        body = {"code": error.status, "error_code": error.code, "msg": error.message}
    return _json(error.status, {**body, **error.extra})


def user_json(person: dict[str, Any]) -> dict[str, Any]:
    """A person as a GoTrue user, with what both clients need to build their User."""
    email = person["email"]
    provider = "anonymous" if person["is_anonymous"] else "email" if email else "yui"
    return {
        "id": str(person["id"]),
        "aud": AUDIENCE,
        "role": "yui_user",
        "email": email or "",
        "phone": "",
        "app_metadata": {"provider": provider, "providers": [provider]},
        "user_metadata": {"name": person["name"]},
        "identities": [],
        "created_at": person["created_at"],
        "last_sign_in_at": person["last_sign_in_at"],
        "is_anonymous": person["is_anonymous"],
    }


Handler = Callable[[Request], Awaitable[Response]]


class Auth:
    """The endpoints, over one database and the relay's secret."""

    def __init__(self, db: Database, settings: GatewaySettings) -> None:
        self.db = db
        self.secret = settings.jwt_secret
        self.anonymous = settings.anonymous_signin
        self.endpoints: dict[str, dict[str, Handler]] = {
            "signup": {"POST": self.signup},
            "token": {"POST": self.token},
            "user": {"GET": self.get_user, "PUT": self.update_user},
            "logout": {"POST": self.logout},
            "settings": {"GET": self.offered},
        }

    async def serve(self, request: Request) -> Response:
        """Any request under /auth/v1: the endpoint it names, every failure in GoTrue's shape."""
        methods = self.endpoints.get(request.path_params.get("path", ""))
        try:
            if methods is None:
                raise AuthError(404, "not_found", "This relay's Auth doesn't serve that path")
            handler = methods.get(request.method)
            if handler is None:
                raise AuthError(405, "method_not_allowed", f"{request.method} is not served here")
            return await handler(request)
        except AuthError as error:
            return error_response(request, error)
        except psycopg.OperationalError as exc:
            log.warning("database unavailable: %s", exc)
            return error_response(request, AuthError(503, "unexpected_failure", "Try again"))
        except psycopg.Error:
            log.exception("auth failed in the database")
            return error_response(request, AuthError(500, "unexpected_failure", "Server error"))

    # --- what every endpoint shares --------------------------------------------------------

    async def body(self, request: Request) -> dict[str, Any]:
        try:
            data = json.loads(await read_body(request, BODY_CAP) or b"null")
        except BodyTooLarge:
            raise AuthError(413, "validation_failed", "The request body is too large") from None
        except (ValueError, RecursionError, ClientDisconnect):
            data = None
        if not isinstance(data, dict):
            raise AuthError(400, "bad_json", "Could not parse request body as JSON")
        return data

    async def throttle(self, *buckets: tuple[str, str]) -> None:
        """One token from each bucket (key, limit), in a transaction of its own: what it takes
        stays taken whatever follows, so a wrong password costs. A refusal takes nothing."""
        try:
            async with self.db.service() as conn:
                for key, limit in buckets:
                    await take(conn, key, limit)
        except Refusal as refusal:
            raise refused(refusal) from None

    def session_json(self, tokens: dict[str, Any], person: dict[str, Any]) -> Response:
        """A session as GoTrue answers a sign-in or a refresh."""
        expires_at = verify(self.secret, tokens["access_token"])["exp"]
        return _json(200, {**tokens, "expires_at": expires_at, "user": user_json(person)})

    def claims(self, request: Request) -> dict[str, Any]:
        """The claims of a person's app token in the Authorization header."""
        token = bearer(request)
        if token is None:
            raise AuthError(401, "no_authorization", "This endpoint requires a Bearer token")
        try:
            claims = verify(self.secret, token)
        except InvalidToken as exc:
            raise AuthError(403, "bad_jwt", f"invalid JWT: {exc.reason}") from None
        if claims.get("role") != "yui_user" or not uuid_or_none(claims.get("sub")):
            raise AuthError(403, "bad_jwt", "invalid claim: the token names no person")
        return claims

    async def signed_in(
        self, conn: psycopg.AsyncConnection, claims: dict[str, Any]
    ) -> dict[str, Any]:
        """The person a token names: there, not suspended, and its sign-in not ended."""
        try:
            person: dict[str, Any] = await people.app_person(conn, claims)
        except Refusal as refusal:
            raise refused(refusal, 403) from None
        chain = claims.get("session_id")
        if chain is not None:
            cur = await conn.execute(
                "select exists (select 1 from public.yui_sessions where chain_id = %s"
                " and user_id = %s and revoked_at is null and expires_at > now())",
                (uuid_or_none(chain), person["id"]),
            )
            if not one(await cur.fetchone(), "exists")[0]:
                raise AuthError(
                    403, "session_not_found", "Session from session_id claim in JWT does not exist"
                )
        return person

    async def new_person(self, name: str, email: str | None, hashed: str | None) -> Response:
        """Sign up: a person (anonymous without an address), their password, a session."""
        async with self.db.service() as conn, conn.cursor(row_factory=dict_row) as cur:
            try:
                await cur.execute(
                    "insert into public.yui_users as u (name, email, is_anonymous)"
                    f" values (%s, %s, %s) returning {PERSON}",
                    (name, email, email is None),
                )
            except psycopg.errors.UniqueViolation:
                raise AuthError(422, "user_already_exists", "User already registered") from None
            person = one(await cur.fetchone(), "a person insert")
            await people.set_credentials(conn, person["id"], None, hashed)
            return self.session_json(await people.open_session(conn, self.secret, person), person)

    # --- the endpoints ---------------------------------------------------------------------

    async def signup(self, request: Request) -> Response:
        """signUp with an e-mail address and a password, or signInAnonymously (no address,
        no password). The name is `options.data.name`, else the address's local part."""
        body = await self.body(request)
        data = body.get("data")
        data = data if isinstance(data, dict) else {}
        if body.get("phone") is not None:
            raise AuthError(400, "phone_provider_disabled", "Phone signups are disabled")
        if body.get("email") is None and body.get("password") is None:
            if not self.anonymous:
                raise AuthError(
                    422, "anonymous_provider_disabled", "Anonymous sign-ins are disabled"
                )
            await self.throttle((f"signup:a:{client_ip(request)}", "signup_address"))
            name = people.person_name(data.get("name")) or ANONYMOUS_NAME
            return await self.new_person(name, None, None)
        try:
            email = people.clean_email(body.get("email"))
            password = people.clean_password(body.get("password"))
        except Refusal as refusal:
            raise refused(refusal) from None
        name = people.person_name(data.get("name")) or email.split("@")[0][: people.NAME_MAX]
        await self.throttle((f"signup:a:{client_ip(request)}", "signup_address"))
        return await self.new_person(name, email, await people.hash_password(password))

    async def token(self, request: Request) -> Response:
        grant = request.query_params.get("grant_type")
        if grant == "password":
            return await self.password_grant(request, await self.body(request))
        if grant == "refresh_token":
            body = await self.body(request)
            try:
                async with self.db.service() as conn:
                    tokens, person = await people.rotate(
                        conn, self.secret, body.get("refresh_token")
                    )
            except Refusal as refusal:
                raise refused(refusal) from None
            return self.session_json(tokens, person)
        raise AuthError(400, "validation_failed", "unsupported_grant_type")

    async def password_grant(self, request: Request, body: dict[str, Any]) -> Response:
        """signInWithPassword: counted per address and per e-mail address before anything is
        checked; a wrong address and a wrong password answer alike, after a hash alike."""
        if body.get("phone") is not None:
            raise AuthError(400, "phone_provider_disabled", "Phone logins are disabled")
        email, password = body.get("email"), body.get("password")
        if not isinstance(email, str) or not isinstance(password, str):
            raise AuthError(400, "validation_failed", "missing email or password")
        buckets = [(f"signin:a:{client_ip(request)}", "signin_address")]
        try:
            email = people.clean_email(email)
            buckets.append((f"signin:e:{sha256_hex(email)}", "signin_account"))
            password = people.clean_password(password)
        except Refusal:
            await self.throttle(*buckets)
            raise AuthError(400, "invalid_credentials", INVALID_LOGIN) from None
        await self.throttle(*buckets)
        async with self.db.service() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                f"select {PERSON}, u.suspended_at, p.hash from public.yui_users u"
                " left join public.yui_passwords p on p.user_id = u.id where u.email = %s",
                (email,),
            )
            found = await cur.fetchone()
        matches = await people.password_matches(password, found.pop("hash") if found else None)
        if found is None or not matches:
            raise AuthError(400, "invalid_credentials", INVALID_LOGIN)
        if found.pop("suspended_at") is not None:
            raise AuthError(400, "user_banned", "User is banned")
        async with self.db.service() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "update public.yui_users u set last_sign_in_at = now() where id = %s"
                f" returning {PERSON}",
                (found["id"],),
            )
            person = one(await cur.fetchone(), "a sign-in")
            return self.session_json(await people.open_session(conn, self.secret, person), person)

    async def get_user(self, request: Request) -> Response:
        claims = self.claims(request)
        async with self.db.service() as conn:
            return _json(200, user_json(await self.signed_in(conn, claims)))

    async def update_user(self, request: Request) -> Response:
        """updateUser: a password, an e-mail address (set at once: the relay sends no mail),
        and `data.name`; a password change takes from the person's sign-in bucket."""
        claims = self.claims(request)
        body = await self.body(request)
        if body.get("phone") is not None:
            raise AuthError(400, "phone_provider_disabled", "Phone logins are disabled")
        data = body.get("data") or {}
        if not isinstance(data, dict) or set(data) - {"name"}:
            raise AuthError(
                422, "validation_failed", "This relay keeps only `name` in user_metadata"
            )
        name = people.person_name(data["name"]) if "name" in data else None
        if "name" in data and name is None:
            raise AuthError(422, "validation_failed", "A name is 1 to 60 characters")
        try:
            email = None if body.get("email") is None else people.clean_email(body["email"])
            password = (
                None if body.get("password") is None else people.clean_password(body["password"])
            )
        except Refusal as refusal:
            raise refused(refusal) from None
        async with self.db.service() as conn:
            person = await self.signed_in(conn, claims)
        if password is not None:
            await self.throttle((f"password:u:{person['id']}", "signin_account"))
        hashed = None if password is None else await people.hash_password(password)
        async with self.db.service() as conn, conn.cursor(row_factory=dict_row) as cur:
            if name is not None:
                await cur.execute(
                    "update public.yui_users set name = %s where id = %s", (name, person["id"])
                )
            try:
                await people.set_credentials(conn, person["id"], email, hashed)
            except Refusal as refusal:
                raise refused(refusal) from None
            await cur.execute(
                f"select {PERSON} from public.yui_users u where u.id = %s", (person["id"],)
            )
            return _json(200, user_json(one(await cur.fetchone(), "the person")))

    async def logout(self, request: Request) -> Response:
        """signOut: revoke the refresh tokens of this sign-in (`local`), of every other one
        (`others`) or of them all (`global`, the default). An app token already out stays good
        until it expires (at most 60 minutes), as on the hosted backend."""
        scope = request.query_params.get("scope", "global")
        if scope not in SCOPES:
            raise AuthError(400, "validation_failed", f"Unsupported logout scope {scope!r}")
        claims = self.claims(request)
        chain = uuid_or_none(claims.get("session_id"))
        if scope != "global" and chain is None:
            raise AuthError(403, "session_not_found", "The token names no session")
        which = {"global": "", "local": " and chain_id = %s", "others": " and chain_id <> %s"}
        async with self.db.service() as conn:
            await conn.execute(
                "update public.yui_sessions set revoked_at = now()"
                f" where user_id = %s and revoked_at is null{which[scope]}",
                (claims["sub"], *([chain] if scope != "global" else [])),
            )
        return Response(status_code=204, headers={VERSION_HEADER: VERSION})

    async def offered(self, request: Request) -> Response:
        """What sign-ins this relay offers, as GoTrue's /settings says it."""
        return _json(
            200,
            {
                "external": {"email": True, "phone": False, "anonymous_users": self.anonymous},
                "disable_signup": False,
                "mailer_autoconfirm": True,
                "phone_autoconfirm": False,
                "sms_provider": "",
                "saml_enabled": False,
            },
        )


def routes(db: Database, settings: GatewaySettings) -> list[BaseRoute]:
    serve = Auth(db, settings).serve
    return [
        Route(PREFIX, serve, methods=METHODS),
        Route(f"{PREFIX}/{{path:anything}}", serve, methods=METHODS),
    ]


@asynccontextmanager
async def lifespan(db: Database, settings: GatewaySettings) -> AsyncIterator[None]:
    """Nothing to prepare: the schema holds everything."""
    yield
