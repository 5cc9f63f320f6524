"""`yui run-webhook --json` as a real process: its events, timed per row, and its memory."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.relay import YUI

POLL_INTERVAL = 2.0  # the reference design: read every 2 s


def _stamp(event: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(event["at"]).timestamp()


class BridgeProcess:
    """One bridge on one host's state file, live or `--poll-only --interval 2`.

    Its JSON events are read as they come; for every person row the time (epoch seconds, from
    the event's `at`) of its turn, answer, reply written and ack is kept.
    """

    def __init__(
        self,
        home: Path,
        state: Path,
        url: str,
        webhook: str,
        *,
        poll_only: bool,
        anon_key: str,
        command: list[str] | None = None,
    ) -> None:
        self.poll_only = poll_only
        # `command` runs another bridge (run-a2a) in place of run-webhook, its relay flag given
        agent = command or ["run-webhook", "--webhook", webhook, "--url", url]
        args = [*agent, "--json", "--state", str(state)]
        if poll_only:
            args += ["--poll-only", "--interval", str(POLL_INTERVAL)]
        env = {**os.environ, "YUI_HOME": str(home), "YUI_ANON_KEY": anon_key, "NO_COLOR": "1"}
        self.log = state.with_name(f"bridge-{'poll' if poll_only else 'live'}.log")
        self._stderr = self.log.open("w")
        self.process = subprocess.Popen(
            [*YUI, *args], env=env, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        self.turn_at: dict[str, float] = {}
        self.turn_by: dict[str, str] = {}
        self.answer_at: dict[str, float] = {}
        self.reply_at: dict[str, float] = {}
        self.ack_at: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.started = threading.Event()
        self.live_up = threading.Event()
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self._note(event)

    def _note(self, event: dict[str, Any]) -> None:
        name, at = event.get("event", ""), _stamp(event)
        with self._changed:
            self.counts[name] = self.counts.get(name, 0) + 1
            if name == "start":
                self.started.set()
            elif name == "live" and event.get("up"):
                self.live_up.set()
            elif name == "turn":
                for row_id in event["turn"]:
                    self.turn_at[row_id] = at
                    self.turn_by[row_id] = event.get("by", "")
            elif name == "answer":
                for row_id in event["turn"]:
                    self.answer_at[row_id] = at
            elif name == "reply":
                for row_id in event.get("turn") or []:
                    self.reply_at.setdefault(row_id, at)
            elif name == "ack":
                for row_id in event["ids"]:
                    self.ack_at[row_id] = at
            self._changed.notify_all()

    def ready(self, timeout: float = 60) -> None:
        """Wait for `start` (and, when live, for the subscription to be up)."""
        deadline = time.monotonic() + timeout
        for flag in (self.started, *(() if self.poll_only else (self.live_up,))):
            if not flag.wait(max(0.1, deadline - time.monotonic())):
                raise RuntimeError(f"the bridge did not get ready: {self.tail()}")

    def wait_acked(self, row_id: str, timeout: float = 10) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: row_id in self.ack_at, timeout)

    def peak_rss_kib(self) -> int:
        """VmHWM: the most resident memory the process has had."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise RuntimeError("no VmHWM in /proc status")

    def tail(self) -> str:
        self._stderr.flush()
        return self.log.read_text()[-1500:]

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM (a clean stop and a bye), SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._stderr.close()
