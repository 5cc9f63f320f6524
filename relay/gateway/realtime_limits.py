"""What one client may cost Realtime: the bounds, and the census of who holds the sockets.

A socket is counted per client address from its handshake, and per token and per person (the
token's `sub`, hosts included) from the topics it joins, so minting more tokens buys no more
sockets. The anon key is public and shared by everyone, so it is counted only per address (a
topic joined with it reads nothing anyway). Delivery reads each change once per identity (the
IDENTITY claims, the only ones the database's policies read), never once per token. Broadcast
and presence stay inside one identity's sockets (`realtime_rooms`), so what one socket sends
reaches at most SOCKETS_PER_PERSON sockets, at MESSAGES_PER_SEC.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from relay.keys import sha256_hex

MAX_CHANGES = 10  # postgres_changes one join may ask for (every frame repeats all their ids)
MAX_TOPICS = 20  # topics one socket may join; each hears every row once
SOCKETS_PER_TOKEN = 5  # sockets with a topic joined with one token (a host's reconnects fit)
SOCKETS_PER_PERSON = 20  # sockets of one person, hosts and apps together, whatever the tokens
SOCKETS_PER_ADDRESS = 50  # sockets open from one client address, joined or not
JOIN_DEADLINE = 5.0  # seconds a socket may go without a joined topic before it is closed
CHECKS_BURST = 2 * MAX_TOPICS  # joins and access_token renewals one socket may send at once
CHECKS_PER_MIN = 60.0  # the same, sustained
MAX_CONDITIONS = 10  # conditions in one postgres_changes filter
MAX_IN_VALUES = 100  # values in one `in.(…)`
MESSAGES_BURST = 20  # broadcast and presence messages one socket may send at once
MESSAGES_PER_SEC = 10.0  # the same, sustained
MAX_BROADCAST_BYTES = 64 * 1024  # one broadcast's payload
MAX_PRESENCE_BYTES = 4 * 1024  # one presence entry (what `track` sends)
MAX_PRESENCES = 10  # presence entries tracked in one channel (one per joined topic)
IDENTITY = ("role", "sub", "cid")  # what policies read; a policy reading another claim adds it


class Refused(ValueError):
    """A join or renewal past a bound; its text is the reason the client is told."""


def identity(claims: dict[str, Any]) -> dict[str, Any]:
    """The claims delivery reads a change under: equal identities read the same rows."""
    return {name: claims[name] for name in IDENTITY if name in claims}


def identity_key(claims: dict[str, Any]) -> str:
    return json.dumps(identity(claims), sort_keys=True)


def scope(claims: dict[str, Any]) -> str | None:
    """The room a token's channels broadcast in: its identity, if it names someone. The anon
    key (and the service key) name nobody, so they get no room: everyone holds the anon key."""
    if claims.get("role") not in ("yui_user", "yui_connector") or not claims.get("sub"):
        return None
    return identity_key(claims)


def marks(token: str, claims: dict[str, Any]) -> frozenset[str]:
    """What a topic joined with `token` counts against: the token and the person it names."""
    if claims.get("role") == "anon":
        return frozenset()
    held = {"token:" + sha256_hex(token)}
    if claims.get("sub"):
        held.add(f"person:{claims['sub']}")
    return frozenset(held)


class Bucket:
    """A token bucket in memory: `burst` at once, then `per_min` a minute."""

    def __init__(self, burst: float, per_min: float) -> None:
        self.burst = burst
        self.rate = per_min / 60
        self.tokens = burst
        self.at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class Census:
    """The sockets open per address, and the sockets holding each token and person."""

    def __init__(self) -> None:
        self.addresses: Counter[str] = Counter()
        self.holders: dict[str, set[object]] = {}

    def enter(self, address: str) -> bool:
        """Count a socket from `address`; False (nothing counted) past the bound."""
        if self.addresses[address] >= SOCKETS_PER_ADDRESS:
            return False
        self.addresses[address] += 1
        return True

    def leave(self, address: str) -> None:
        self.addresses[address] -= 1
        if self.addresses[address] <= 0:
            del self.addresses[address]

    def check(self, held: frozenset[str], wanted: frozenset[str]) -> None:
        """Refused if a socket that holds `held` may not also hold `wanted`."""
        for mark in wanted - held:
            kind = mark.partition(":")[0]
            bound = SOCKETS_PER_TOKEN if kind == "token" else SOCKETS_PER_PERSON
            if len(self.holders.get(mark, ())) >= bound:
                raise Refused(f"at most {bound} sockets per {kind}")

    def hold(self, socket: object, before: frozenset[str], after: frozenset[str]) -> None:
        """`socket` now holds `after` instead of `before`."""
        for mark in before - after:
            holders = self.holders.get(mark)
            if holders is not None:
                holders.discard(socket)
                if not holders:
                    del self.holders[mark]
        for mark in after - before:
            self.holders.setdefault(mark, set()).add(socket)
