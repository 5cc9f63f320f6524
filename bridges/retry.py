"""Trying again: one backoff and one retry loop for everything a host keeps doing.

The engine's read loop, the outbox writer, the live feed and the Controls reporter all run
through `retry_loop`: a pass that fails in a way that may pass later waits a doubling, jittered
backoff (or the `Retry-After` the other side gave), a pass that works waits what it asks for,
and a stop ends any wait at once. A refusal (revoked, suspended) is not retried: it propagates
for the caller to end on.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from state.errors import Unreachable

BACKOFF_MAX = 60.0  # seconds: the longest wait between tries of anything
MAX_RETRY_AFTER = 3600.0  # seconds: a larger Retry-After is capped


class Backoff:
    """Doubling waits from `first` up to a minute, each with up to a second of jitter (so a
    fleet of hosts doesn't come back in step); `reset()` after a success."""

    def __init__(self, first: float = 1.0, *, jitter: float = 1.0) -> None:
        self.first = first
        self.jitter = jitter
        self.current = 0.0

    def next(self, after: float | None = None) -> float:
        """The next wait; `after` (a Retry-After) wins when given."""
        self.current = min(max(self.current * 2, self.first), BACKOFF_MAX)
        return after if after is not None else self.current + random.random() * self.jitter

    def reset(self) -> None:
        self.current = 0.0


def retry_loop(
    attempt: Callable[[], float | None],
    *,
    stop: threading.Event,
    wake: threading.Event | None = None,
    backoff: Backoff | None = None,
    retry_on: tuple[type[Exception], ...] = (Unreachable,),
    on_retry: Callable[[Exception, float], None] | None = None,
    last_pass: bool = False,
) -> None:
    """Call `attempt` until `stop` is set or it returns None. After a success, wait the seconds
    it returned; after an error in `retry_on`, wait the backoff (an error's `after` wins) and
    tell `on_retry`. Every wait is on `wake` (which `stop` must set too, so a stop ends it),
    or on `stop` itself. With `last_pass`, one more attempt is made once stopped (a writer's
    last flush); its failure just ends the loop. Other errors propagate."""
    backoff = backoff or Backoff()
    while True:
        stopping = stop.is_set()
        if stopping and not last_pass:
            return
        try:
            wait = attempt()
        except retry_on as exc:
            if stopping:
                return
            wait = backoff.next(exc.after if isinstance(exc, Unreachable) else None)
            if on_retry is not None:
                on_retry(exc, wait)
        else:
            backoff.reset()
            if stopping or wait is None:
                return
        if wake is None:
            stop.wait(wait)
        else:
            wake.wait(wait)
            wake.clear()


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), capped; None when
    there is none or it can't be read."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)
