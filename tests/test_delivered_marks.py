"""Which delivered marks wait for an ack and which go alone (`DeliveredMarks`): a row is marked
once, by the ack that finishes its turn when that comes soon, else on its own."""

from __future__ import annotations

import pytest

from bridges.engine import marks
from bridges.engine.marks import MARK_AFTER, DeliveredMarks


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(marks.time, "monotonic", lambda: now[0])
    return now


def rows(*ids: str, delivered: str | None = None) -> list[dict[str, str | None]]:
    return [{"id": row_id, "delivered_at": delivered} for row_id in ids]


def test_a_quick_turns_rows_ride_with_its_ack(clock: list[float]) -> None:
    held = DeliveredMarks()
    held.handed(rows("a", "b"))
    assert (held.ripe(), held.due_in()) == ([], MARK_AFTER)
    clock[0] += MARK_AFTER / 2
    assert held.among(["b", "x"]) == ["b"]
    held.written(["b"])
    held.acked(["b"])
    assert (held.ripe(), held.due_in()) == ([], MARK_AFTER / 2)  # "a" still waits for its ack
    clock[0] += MARK_AFTER / 2
    assert held.ripe() == ["a"]
    held.written(["a"])
    assert held.due_in() is None


def test_a_long_turns_rows_are_marked_alone_then_never_again(clock: list[float]) -> None:
    held = DeliveredMarks()
    held.handed(rows("a"))
    clock[0] += MARK_AFTER
    assert held.ripe() == ["a"]
    held.written(["a"])
    held.handed(rows("a"))  # the turn asked again (a retry): its row is marked already
    assert held.among(["a"]) == [] and held.ripe(everything=True) == []
    held.acked(["a"])
    assert held.due_in() is None


def test_rows_marked_by_an_earlier_run_are_left_as_they_are(clock: list[float]) -> None:
    held = DeliveredMarks()
    held.handed(rows("a", delivered="2026-12-02T10:00:00Z"))
    assert held.among(["a"]) == [] and held.ripe(everything=True) == []


def test_on_stop_every_waiting_mark_is_due(clock: list[float]) -> None:
    held = DeliveredMarks()
    held.handed(rows("b", "a"))
    assert held.ripe(everything=True) == ["a", "b"]
