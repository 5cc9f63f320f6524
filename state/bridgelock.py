"""Bridges on one state file: one for every agent, or one per agent with `--agent`.

Two bridges serving the same agent would take the same rows. The guard is flock, not a pid
file: the kernel drops a lock when its holder dies, even by SIGKILL, so a crashed bridge never
leaves a stale one behind. A bridge for every agent holds `<state>.bridge.lock` alone; a bridge
given `--agent` shares that one and holds `<state>.bridge.<agent>.lock` alone for each agent
it serves, so two bridges of different kinds (a webhook, a model) can serve two agents of one
host side by side, and a bridge for every agent can't start beside either. Each holder writes
its pid, its kind and what it serves into the file it holds alone, only so that a refusal can
name it and say what to do. Short commands (`send`, `status`) never take these locks.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path
from types import TracebackType

from state.errors import BadInput, StateBusy
from state.paths import ensure_private_dir, real_path

PID_WAIT = 0.2  # seconds to wait for a holder that has the lock but hasn't written its pid yet
EVERY = "every agent"


class BridgeLock:
    """Held for a bridge's lifetime: `with BridgeLock(state_path): run()`.

    `agents` maps the key of each agent this bridge alone serves (its id) to how it is named
    in a message (`@handle`); None serves every agent. `kind` names the bridge (`run-model`).
    """

    def __init__(
        self,
        state_path: str | os.PathLike[str],
        *,
        kind: str = "",
        agents: dict[str, str] | None = None,
    ) -> None:
        self.state_path = real_path(state_path)
        self.path = self.state_path.with_name(self.state_path.name + ".bridge.lock")
        self.kind = kind
        self.agents = agents
        self._fds: list[int] = []

    def __repr__(self) -> str:
        return f"BridgeLock({str(self.state_path)!r}, held={bool(self._fds)})"

    def agent_path(self, key: str) -> Path:
        """The lock file of one agent's bridge."""
        safe = re.sub(r"[^a-z0-9._-]", "_", key.lower())
        return self.state_path.with_name(f"{self.state_path.name}.bridge.{safe}.lock")

    def acquire(self) -> None:
        """Take the locks at once, or raise StateBusy naming the bridge that has one.

        The descriptors are close-on-exec, so a child the bridge starts (a webhook, a model
        server) doesn't keep a lock alive after the bridge has gone.
        """
        if self._fds:
            raise RuntimeError(f"{self!r} is already held")
        ensure = self._open(self.path)
        if not _lock(ensure, shared=self.agents is not None):
            holder = _holder(ensure) or (None, "", "")
            os.close(ensure)
            raise self._busy(holder, every=self.agents is not None)
        self._fds.append(ensure)
        if self.agents is None:
            _write(ensure, self.kind, EVERY)
            return
        for key, label in self.agents.items():
            fd = self._open(self.agent_path(key))
            if not _lock(fd, shared=False):
                holder = _holder(fd) or (None, "", label)
                os.close(fd)
                self.release()
                raise self._busy(holder, every=False)
            self._fds.append(fd)
            _write(fd, self.kind, label)

    def _open(self, path: Path) -> int:
        try:
            ensure_private_dir(path.parent)
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            self.release()
            raise BadInput(f"cannot lock {self.state_path}: {exc.strerror}") from None

    def _busy(self, holder: tuple[int | None, str, str], *, every: bool) -> StateBusy:
        """The refusal: who holds what, and what to do about it."""
        pid, kind, serves = holder
        state = self.state_path
        if every:  # a bridge for every agent holds the file; this one wants some of them
            who = f"{kind or 'another bridge'} (pid {pid})" if pid else kind or "another bridge"
            mine = " ".join(
                f"--agent {label.lstrip('@')}" for label in (self.agents or {}).values()
            )
            return StateBusy(
                f"{who} serves every agent of {state}",
                hint=f"stop it and start it again with --agent for its own agents, then start "
                f"this bridge with {mine}; or give this agent a state file of its own "
                f"(yui pair CODE --state PATH)",
            )
        if self.agents is None:  # bridges for single agents run; this one wants them all
            held = _agent_holders(self)
            if held:
                who = ", ".join(f"{k or 'a bridge'} (pid {p}) serves {s}" for p, k, s in held)
                return StateBusy(
                    f"{who} from {state}",
                    hint="name the agents this bridge serves with --agent, or stop those first",
                )
            if not pid:
                return StateBusy(
                    f"another bridge is running on {state}",
                    hint="stop it first, or give this bridge its own state file with --state",
                )
            return StateBusy(
                f"another bridge (pid {pid}) is running on {state}"
                if not kind
                else f"{kind} (pid {pid}) serves {serves} of {state}",
                hint="stop it first, or run each bridge with --agent for its own agents",
            )
        who = f"{kind or 'another bridge'} (pid {pid})" if pid else "another bridge"
        return StateBusy(f"{who} already serves {serves} from {state}", hint="stop it first")

    def release(self) -> None:
        """Let the next bridge in; a no-op if not held. The files stay: deleting a lock file
        lets two processes lock two different files of the same name."""
        for fd in reversed(self._fds):
            try:
                if fd != self._fds[0] or self.agents is None:
                    os.ftruncate(fd, 0)
            finally:
                os.close(fd)
        self._fds = []

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


def _lock(fd: int, *, shared: bool) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except BaseException:
        os.close(fd)
        raise
    return True


def _write(fd: int, kind: str, serves: str) -> None:
    """`pid`, or `pid<TAB>kind<TAB>serves` when the bridge has a kind, for a refusal to
    quote."""
    os.ftruncate(fd, 0)
    text = f"{os.getpid()}\t{kind}\t{serves}" if kind else str(os.getpid())
    os.pwrite(fd, f"{text}\n".encode(), 0)


def _holder(fd: int) -> tuple[int | None, str, str] | None:
    """The pid, kind and agents written in a lock file, waiting briefly for a holder that
    has just locked it; None when nothing is written (a bridge with --agent holds it shared)."""
    deadline = time.monotonic() + PID_WAIT
    while True:
        words = os.pread(fd, 512, 0).decode(errors="replace").strip().split("\t")
        if words[0].isdigit():
            words += ["", EVERY][len(words) - 1 :]
            return int(words[0]), words[1], words[2]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def _agent_holders(lock: BridgeLock) -> list[tuple[int | None, str, str]]:
    """The bridges for single agents holding their lock files now."""
    held = []
    prefix = lock.state_path.name + ".bridge."
    for path in sorted(lock.state_path.parent.glob(f"{prefix}*.lock")):
        if path == lock.path:
            continue
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if _lock(fd, shared=True):
                continue
            held.append(_holder(fd) or (None, "", "an agent"))
        finally:
            os.close(fd)
    return held
