"""Following a thread as the app does: every row, then each new one as it lands, and a row
again whenever what it wears changes (✓ delivered, ✓✓ handled, a reaction). A relay that
restarts is waited for, with growing pauses, never a reason to stop following."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from typing import Any

from bridges.retry import Backoff
from people.person import FOLLOW_OVERLAP, THREAD_COLUMNS, PersonApp
from state.errors import Unreachable

WATCHED = 50  # rows shown whose marks may still change, looked at again on every read
Row = dict[str, Any]


def _marks(row: Row) -> tuple[bool, bool, Any]:
    return bool(row.get("delivered_at")), bool(row.get("handled_at")), row.get("reaction")


def _settled(row: Row) -> bool:
    """A person's row once handled: nothing it shows changes any more."""
    return row["sender"] == "user" and bool(row.get("handled_at"))


def follow(
    app: PersonApp,
    agent: str | None = None,
    interval: float = 1.5,
    on_wait: Callable[[Unreachable, float], None] | None = None,
) -> Iterator[tuple[Row, Row]]:
    """The agent and each row of its thread: all of them, then each new one and each one
    whose marks changed, forever. `on_wait` hears of a relay that can't be reached, and
    how long until the next try."""
    shown: dict[str, tuple[bool, bool, Any]] = {}
    watched: list[str] = []  # oldest first
    after: str | None = None
    backoff = Backoff(first=interval)
    while True:
        try:
            chosen, rows = app.thread(agent, after)
            rows = _with(rows, _again(app, watched, {r["id"] for r in rows}))
        except Unreachable as exc:
            wait = backoff.next(exc.after)
            if on_wait is not None:
                on_wait(exc, wait)
            time.sleep(wait)
            continue
        backoff.reset()
        for row in rows:
            if shown.get(row["id"]) != _marks(row):
                shown[row["id"]] = _marks(row)
                yield chosen, row
            if row["id"] in watched:
                watched.remove(row["id"])
            if not _settled(row):
                watched.append(row["id"])
        del watched[:-WATCHED]
        if rows:
            newest = max(dt.datetime.fromisoformat(r["created_at"]) for r in rows)
            after = max(after or "", (newest - FOLLOW_OVERLAP).isoformat())
        time.sleep(interval)


def _again(app: PersonApp, ids: list[str], read: set[str]) -> list[Row]:
    """The watched rows the last read didn't bring back, as they are now."""
    wanted = [i for i in ids if i not in read]
    if not wanted:
        return []
    params = [("select", THREAD_COLUMNS), ("id", f"in.({','.join(wanted)})")]
    return app.client.rows("yui_messages", auth=app.token(), params=params)


def _with(rows: list[Row], more: list[Row]) -> list[Row]:
    """Both lists as one, oldest first."""
    return sorted([*rows, *more], key=lambda r: (r["created_at"], r["id"]))
