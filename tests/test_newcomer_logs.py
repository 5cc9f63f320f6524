"""A bridge waiting for the relay says so once per wait (issue 19, item 14): the live feed
retrying wakes the loop every few seconds, and each wake used to print the same
"retry relay in 60.2 s" again."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from bridges.engine.bridge import Bridge
from state.errors import Unreachable


class Said(SimpleNamespace):
    """The part of a Bridge `_relay_retry` uses: its memory of what it said, and `emit`."""

    def __init__(self) -> None:
        super().__init__(_retry_said={}, lines=[])

    def emit(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))


def retry(said: Said, reason: str, wait: float) -> None:
    Bridge._relay_retry(said, Unreachable(reason), wait)  # type: ignore[arg-type]


def test_a_wait_woken_early_says_nothing_new() -> None:
    said = Said()
    retry(said, "relay unreachable", 60.0)
    for _ in range(5):  # the feed wakes the loop: it tries again, fails the same way
        retry(said, "relay unreachable", 60.0)
    assert said.lines == [("retry", {"what": "relay", "reason": "relay unreachable", "wait": 60.0})]


def test_a_new_wait_or_a_new_reason_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    said = Said()
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    retry(said, "relay unreachable", 2.0)
    retry(said, "relay busy", 2.0)  # another reason: said
    clock[0] += 2.5  # that wait is over: the next one is news
    retry(said, "relay busy", 4.0)
    assert [fields["reason"] for _, fields in said.lines] == [
        "relay unreachable",
        "relay busy",
        "relay busy",
    ]


def test_each_loop_says_its_own_wait() -> None:
    said = Said()
    retry(said, "relay unreachable", 60.0)
    other = threading.Thread(target=retry, args=(said, "relay unreachable", 60.0), name="writer")
    other.start()
    other.join()
    assert len(said.lines) == 2
