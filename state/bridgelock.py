"""One bridge per state file.

Two bridges on one state file would take the same rows and flush the same outbox. The guard is an
flock on `<state>.bridge.lock`, not a pid file: the kernel drops it when its holder dies, even by
SIGKILL, so a crashed bridge never leaves a stale lock behind. The holder writes its pid into the
file only so that the refusal can name it. Short commands (`send`, `status`) never take this lock.
"""

from __future__ import annotations

import fcntl
import os
import time
from types import TracebackType

from state.errors import BadInput, StateBusy
from state.paths import ensure_private_dir, real_path

PID_WAIT = 0.2  # seconds to wait for a holder that has the lock but hasn't written its pid yet


class BridgeLock:
    """Held for a bridge's lifetime: `with BridgeLock(state_path): run()`."""

    def __init__(self, state_path: str | os.PathLike[str]) -> None:
        self.state_path = real_path(state_path)
        self.path = self.state_path.with_name(self.state_path.name + ".bridge.lock")
        self._fd: int | None = None

    def __repr__(self) -> str:
        return f"BridgeLock({str(self.state_path)!r}, held={self._fd is not None})"

    def acquire(self) -> None:
        """Take the lock at once, or raise StateBusy naming the pid that has it.

        The descriptor is close-on-exec, so a child the bridge starts (a webhook, a model server)
        doesn't keep the lock alive after the bridge has gone.
        """
        if self._fd is not None:
            raise RuntimeError(f"{self!r} is already held")
        try:
            ensure_private_dir(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise BadInput(f"cannot lock {self.state_path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            who = f"another bridge (pid {pid})" if pid else "another bridge"
            raise StateBusy(
                f"{who} is running on {self.state_path}",
                hint="stop it first, or give this bridge its own state file with --state",
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Let the next bridge in; a no-op if not held. The file stays: deleting a lock file
        lets two processes lock two different files of the same name."""
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> BridgeLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _holder(fd: int) -> int | None:
    """The pid written in the lock file, waiting briefly for a holder that has just locked it."""
    deadline = time.monotonic() + PID_WAIT
    while True:
        text = os.pread(fd, 32, 0).strip()
        if text.isdigit():
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
