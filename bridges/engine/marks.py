"""The person's ✓ (delivered): rows handed to an agent, their mark not yet written.

A turn doesn't wait for its mark (a restart knows a turn was asked from its in-flight record,
saved before the ask). Each mark waits up to MARK_AFTER seconds to ride with its turn's ack,
one PATCH setting both, so a quick turn costs the relay one PATCH, not two; a longer turn's
rows are marked on their own once that time has passed, all of them in one PATCH.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

MARK_AFTER = 0.25  # seconds a delivered mark waits for its turn's ack


class DeliveredMarks:
    """Shared by the threads that ask agents (`handed`) and the writer (the rest)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[str, float] = {}  # row id → when it was handed (monotonic)
        self._written: set[str] = set()  # marked by this bridge, not yet acked

    def handed(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """A turn's rows went to its agent: those without a mark are to be marked (a retried
        turn's rows, or a row marked by an earlier run, only once: the first pickup counts)."""
        now = time.monotonic()
        with self._lock:
            for row in rows:
                row_id = str(row["id"])
                if row.get("delivered_at") is None and row_id not in self._written:
                    self._since.setdefault(row_id, now)

    def among(self, ids: Iterable[str]) -> list[str]:
        """Which of `ids` (rows about to be acked) still want their mark."""
        with self._lock:
            return [row_id for row_id in ids if row_id in self._since]

    def ripe(self, everything: bool = False) -> list[str]:
        """The rows whose mark has waited MARK_AFTER (`everything`: all of them)."""
        since = time.monotonic() - MARK_AFTER
        with self._lock:
            return sorted(i for i, at in self._since.items() if everything or at <= since)

    def due_in(self) -> float | None:
        """Seconds until the next mark has waited MARK_AFTER (None: none is waiting)."""
        with self._lock:
            first = min(self._since.values(), default=None)
        return None if first is None else max(0.0, first + MARK_AFTER - time.monotonic())

    def written(self, ids: Iterable[str]) -> None:
        with self._lock:
            for row_id in ids:
                if self._since.pop(row_id, None) is not None:
                    self._written.add(row_id)

    def acked(self, ids: Iterable[str]) -> None:
        """Rows acked (their marks written with the ack, or before): nothing left to track."""
        with self._lock:
            for row_id in ids:
                self._since.pop(row_id, None)
                self._written.discard(row_id)
