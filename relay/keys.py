"""The relay's secret and the HS256 tokens signed with it.

One secret signs everything the gateway trusts: the long-lived anon and service keys, the
person's 60-minute app tokens, and the hosts' 60-minute connector sessions. Opaque secrets
(connector tokens, refresh tokens, pairing codes) are never stored, only their SHA-256.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

import jwt

ALGORITHM = "HS256"
SESSION_TTL = 3600  # app tokens and connector sessions
KEY_TTL = 10 * 365 * 24 * 3600  # anon and service keys, as a Supabase project's
ROLES = ("anon", "yui_user", "yui_connector", "service_role")


class InvalidToken(Exception):
    """A bearer token that doesn't verify; `reason` says why, without echoing the token."""

    def __init__(self, reason: str, *, expired: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.expired = expired


@dataclass(frozen=True)
class RelayKeys:
    """The relay's signing secret and the two keys derived from it."""

    jwt_secret: str
    anon_key: str
    service_key: str

    def __repr__(self) -> str:
        return "RelayKeys(<redacted>)"

    @classmethod
    def generate(cls) -> RelayKeys:
        secret = secrets.token_urlsafe(48)
        return cls(
            jwt_secret=secret,
            anon_key=mint(secret, {"role": "anon", "iss": "yui-relay"}, KEY_TTL),
            service_key=mint(secret, {"role": "service_role", "iss": "yui-relay"}, KEY_TTL),
        )

    def as_dict(self) -> dict[str, str]:
        return {
            "jwt_secret": self.jwt_secret,
            "anon_key": self.anon_key,
            "service_key": self.service_key,
        }


def mint(secret: str, claims: dict[str, Any], ttl: int = SESSION_TTL) -> str:
    """Sign `claims` with `iat` and `exp` added."""
    now = int(time.time())
    return jwt.encode({**claims, "iat": now, "exp": now + ttl}, secret, algorithm=ALGORITHM)


def verify(secret: str, token: str) -> dict[str, Any]:
    """The claims of a token this relay signed, with a role it knows; else InvalidToken."""
    try:
        claims = jwt.decode(
            token, secret, algorithms=[ALGORITHM], options={"verify_aud": False, "require": ["exp"]}
        )
    except jwt.ExpiredSignatureError as exc:
        raise InvalidToken("JWT expired", expired=True) from exc
    except jwt.InvalidTokenError as exc:
        raise InvalidToken("JWT could not be verified") from exc
    if claims.get("role") not in ROLES:
        raise InvalidToken("JWT names a role this relay doesn't have")
    return claims


def opaque_token(prefix: str) -> str:
    """A fresh bearer secret: the prefix, then 32 random bytes as base64url."""
    return prefix + secrets.token_urlsafe(32)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
