"""The one retry helper (`bridges/retry.py`) every relay loop runs through: doubling waits with
jitter up to a minute, the other side's Retry-After first, a stop that ends any wait, one last
pass for a writer, and refusals that are never retried."""

from __future__ import annotations

import threading
import time

import pytest

from bridges.retry import Backoff, retry_loop
from state.errors import Refused, Unreachable


def test_waits_double_up_to_a_minute_and_start_again_after_a_success() -> None:
    backoff = Backoff(first=1.0, jitter=0.0)
    assert [backoff.next() for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    backoff.reset()
    assert backoff.next() == 1


def test_jitter_adds_up_to_a_second_and_retry_after_wins() -> None:
    waits = [Backoff(first=2.0).next() for _ in range(50)]
    assert all(2.0 <= w < 3.0 for w in waits) and len(set(waits)) > 1
    assert Backoff().next(after=7.5) == 7.5


def test_a_pass_is_repeated_until_stopped_waiting_what_it_asks() -> None:
    stop, calls = threading.Event(), []

    def attempt() -> float:
        calls.append(time.monotonic())
        if len(calls) == 3:
            stop.set()
        return 0.0

    retry_loop(attempt, stop=stop)
    assert len(calls) == 3


def test_a_failure_waits_the_backoff_and_tells_on_retry() -> None:
    stop, seen = threading.Event(), []
    failures = iter([Unreachable("down", after=0.01), Unreachable("down")])

    def attempt() -> float:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        stop.set()
        return 0.0

    retry_loop(
        attempt,
        stop=stop,
        backoff=Backoff(first=0.02, jitter=0.0),
        on_retry=lambda exc, wait: seen.append((str(exc), wait)),
    )
    # The relay's Retry-After first; the backoff still grew meanwhile (0.02, then 0.04).
    assert seen == [("down", 0.01), ("down", 0.04)]


def test_a_stop_ends_a_long_wait_at_once() -> None:
    stop, wake = threading.Event(), threading.Event()
    started = threading.Event()

    def attempt() -> float:
        started.set()
        return 3600.0

    loop = threading.Thread(target=retry_loop, args=(attempt,), kwargs={"stop": stop, "wake": wake})
    loop.start()
    assert started.wait(5)
    stop.set()
    wake.set()  # what every owner's stop() does
    loop.join(timeout=5)
    assert not loop.is_alive()


def test_a_wake_cuts_a_wait_short_and_the_loop_goes_on() -> None:
    stop, wake, calls = threading.Event(), threading.Event(), []

    def attempt() -> float:
        calls.append(1)
        if len(calls) == 2:
            stop.set()
            wake.set()
        return 3600.0

    loop = threading.Thread(target=retry_loop, args=(attempt,), kwargs={"stop": stop, "wake": wake})
    loop.start()
    wake.set()
    loop.join(timeout=5)
    assert not loop.is_alive() and len(calls) == 2


def test_a_writer_makes_one_last_pass_once_stopped() -> None:
    stop, calls = threading.Event(), []

    def flush() -> float:
        calls.append(1)
        return 5.0

    stop.set()
    retry_loop(flush, stop=stop, last_pass=True)
    assert calls == [1]
    retry_loop(flush, stop=stop)
    assert calls == [1]  # without it, a stopped loop does nothing


def test_returning_none_ends_the_loop() -> None:
    calls: list[int] = []

    def once() -> None:
        calls.append(1)

    retry_loop(once, stop=threading.Event())
    assert calls == [1]


def test_a_refusal_is_never_retried() -> None:
    def attempt() -> float:
        raise Refused("revoked", status=401)

    with pytest.raises(Refused):
        retry_loop(attempt, stop=threading.Event())
