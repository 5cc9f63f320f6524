"""Bearer tokens verified once each: a bounded memory of the claims of tokens that verified.

A bridge or a phone sends the same session token with every request for up to an hour, and
checking its signature and decoding it is a good part of what a small request costs the
gateway (issue 21). Only that is remembered: whatever the database decides about the caller
(a removed host, a suspended person, an ended sign-in) it still decides on every request,
under the claims. A remembered token still expires on time, and one that didn't verify is
never remembered, so a flood of bad tokens can't push the good ones out.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from relay.keys import InvalidToken, verify

KEPT = 4096  # tokens remembered: far more than a gateway's callers within an hour


class VerifiedTokens:
    """The claims of the last KEPT tokens that verified, keyed by a hash of the secret and
    the token (the memory holds neither)."""

    def __init__(self, kept: int = KEPT, clock: Callable[[], float] = time.time) -> None:
        self.kept = kept
        self.clock = clock
        self.claims: OrderedDict[bytes, dict[str, Any]] = OrderedDict()
        self.lock = threading.Lock()  # gateways served in threads of one process share it

    def verify(self, secret: str, token: str) -> dict[str, Any]:
        """What `relay.keys.verify` says of the token, from memory when it verified before."""
        key = hashlib.sha256(f"{secret}\0{token}".encode()).digest()
        with self.lock:
            known = self.claims.get(key)
            if known is not None:
                self.claims.move_to_end(key)
        if known is None:
            known = verify(secret, token)
            with self.lock:
                self.claims[key] = known
                if len(self.claims) > self.kept:
                    self.claims.popitem(last=False)
        elif known["exp"] <= self.clock():  # as PyJWT judges it: expired at `exp`
            with self.lock:
                self.claims.pop(key, None)
            raise InvalidToken("JWT expired", expired=True)
        return dict(known)  # a caller's changes stay its own


VERIFIED = VerifiedTokens()
