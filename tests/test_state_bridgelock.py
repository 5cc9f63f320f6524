"""BridgeLock: one bridge per state file, named when it refuses, gone when its holder dies."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from state.bridgelock import BridgeLock
from state.errors import ExitStatus, StateBusy
from state.host import HostState

REPO = Path(__file__).resolve().parents[1]
HOLD = """
import sys, time
from state.bridgelock import BridgeLock
lock = BridgeLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the bridge lock of `tmp_path/state.json`."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "state.json")],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    yield child
    child.kill()
    child.wait()
    child.stdout.close()


def test_second_bridge_is_refused_naming_the_pid(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    state = tmp_path / "state.json"
    with pytest.raises(StateBusy) as caught:
        BridgeLock(state).acquire()
    assert caught.value.message == f"another bridge (pid {holder.pid}) is running on {state}"
    assert caught.value.exit_status == ExitStatus.BUSY


def test_released_when_the_holder_is_killed(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with BridgeLock(tmp_path / "state.json") as lock:
        assert lock.path.read_text() == f"{os.getpid()}\n"


def test_other_commands_still_edit_the_state(tmp_path: Path, holder: subprocess.Popen[str]) -> None:
    state = HostState(tmp_path / "state.json")
    state.add_acks(["p1"])
    assert state.snapshot().acks == ("p1",)


def test_lock_file_is_private_and_reusable(tmp_path: Path) -> None:
    state = tmp_path / "new" / "state.json"
    lock = BridgeLock(state)
    with lock:
        assert stat.S_IMODE(lock.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(lock.path.parent.stat().st_mode) == 0o700
        with pytest.raises(StateBusy, match=f"pid {os.getpid()}"):
            BridgeLock(state).acquire()  # a second lock in the same process is refused too
        with pytest.raises(RuntimeError):
            lock.acquire()
    assert lock.path.read_text() == ""  # released: no pid left to mislead anyone
    with BridgeLock(state):
        pass
    lock.release()  # releasing what isn't held is harmless


def test_lock_is_not_inherited_by_children(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with BridgeLock(state):
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"],
            close_fds=False,
            stdout=subprocess.PIPE,
        )
        # Between fork and exec the child still shares the descriptor; once it runs Python,
        # it has exec'd and close-on-exec has done its work.
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    try:
        with BridgeLock(state):
            pass
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
