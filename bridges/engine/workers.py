"""A pool of daemon threads for the engine's work (turns, pushes): a thread is started only
when every one is busy, up to a limit, and then kept, so a busy bridge doesn't start a thread
per turn. Daemon threads, as the threads per turn were: an agent that never answers can't hold
the process at exit (its turn is left in flight, and the next run asks it again)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from bridges.engine.failures import log_failure

Job = tuple[Callable[..., Any], tuple[Any, ...]]


class Workers:
    """Up to `most` threads named `name`, running what `submit` hands them, oldest first."""

    def __init__(self, most: int, name: str) -> None:
        self.most = max(1, most)
        self.name = name
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._queued = 0  # submitted and not yet picked up

    def submit(self, job: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            self._queued += 1
            if self._queued > self._idle and len(self._threads) < self.most:
                thread = threading.Thread(
                    target=self._run, name=f"{self.name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        self._jobs.put((job, args))

    def close(self, timeout: float) -> bool:
        """Let every thread finish what was submitted, then end; False if some were still busy
        after `timeout` seconds (they are daemons: the process may exit without them)."""
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)

    def _run(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            found = self._jobs.get()
            with self._lock:
                self._idle -= 1
                if found is not None:
                    self._queued -= 1
            if found is None:
                return
            job, args = found
            try:
                job(*args)
            except Exception as exc:  # a bug in one job must not take the thread with it
                log_failure(f"{self.name} failed", exc)
