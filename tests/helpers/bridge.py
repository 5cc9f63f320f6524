"""Helpers for end-to-end bridge tests: a scriptable fake webhook, and the bridges
(`run-webhook`, `run-model`) as real processes whose JSON events the test reads."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.helpers.cli import ROOT
from tests.helpers.http import LoopbackServer
from tests.helpers.relay import LocalRelay, Person

# --- a fake webhook --------------------------------------------------------------------------


@dataclass
class Call:
    """One POST the webhook received."""

    headers: dict[str, str]
    raw: bytes

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.raw)

    @property
    def ids(self) -> list[str]:
        return self.payload["turn"]


Answer = tuple[int, dict[str, str], bytes]
Script = Callable[[Call], Answer]


def reply(text: str) -> Answer:
    return 200, {"content-type": "application/json"}, json.dumps({"reply": text}).encode()


def echo(call: Call) -> Answer:
    """Answer every turn with one line naming its text."""
    return reply("echo: " + call.payload["text"])


def echo_when(gate: threading.Event) -> Script:
    """`echo`, once `gate` is set (30 s at most): a webhook holding its turns until told."""

    def held(call: Call) -> Answer:
        gate.wait(30)
        return echo(call)

    return held


class FakeWebhook(LoopbackServer):
    """An HTTP server on a free port that records every POST and answers with `script`."""

    def __init__(self, script: Script = echo) -> None:
        self.script = script
        self.calls: list[Call] = []
        self.arrived = threading.Condition()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                call = Call({k.lower(): v for k, v in self.headers.items()}, raw)
                with hook.arrived:
                    hook.calls.append(call)
                    hook.arrived.notify_all()
                try:
                    status, headers, body = hook.script(call)
                except ConnectionAbortedError:
                    return
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler, daemon_threads=True)

    def wait_calls(self, n: int, timeout: float = 20) -> list[Call]:
        """The first `n` calls, waiting for them to arrive."""
        with self.arrived:
            ok = self.arrived.wait_for(lambda: len(self.calls) >= n, timeout)
        assert ok, f"the webhook got {len(self.calls)} calls, expected {n}"
        return self.calls[:n]


# --- a host machine and its bridge ---------------------------------------------------------


@dataclass
class Machine:
    """A host's home folder, and `yui` run as real processes in it."""

    home: Path
    relay: LocalRelay
    url: str = ""
    bridges: list[Bridge] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "YUI_HOME": str(self.home),
            "YUI_URL": self.url or self.relay.url,
            "YUI_ANON_KEY": self.relay.anon_key,
            "YUI_SERVICE_KEY": self.relay.service_key,
            "NO_COLOR": "1",
            **extra,
        }

    def yui(
        self, *args: str, check: bool = True, input: str | None = None, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, str(ROOT / "bin" / "yui"), *args],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            input=input,
            timeout=120,
        )
        if check:
            assert result.returncode == 0, f"yui {args} → {result.returncode}\n{result.stderr}"
        return result

    def pair(self, person: Person, name: str, ref: str) -> dict[str, Any]:
        agent, code = person.add_agent(name)
        result = self.yui("pair", code, "--ref", ref, "--json", "--url", self.url or self.relay.url)
        return json.loads(result.stdout)["agent"] | {"code": code, "agent": agent}

    def bridge(self, webhook: str, *args: str, **extra: str) -> Bridge:
        """`yui run-webhook` as a real process, its JSON events read as they come."""
        return self.run(
            "run-webhook", "--webhook", webhook, "--interval", "0.3", "--json", *args, **extra
        )

    def run(self, *args: str, stdin: str | None = None, **extra: str) -> Bridge:
        """A long-running `yui` command on this machine (a bridge), with `stdin` given at once
        and then closed; it is killed by `stop_all`."""
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "bin" / "yui"), *args],
            env=self.env(**extra),
            stdin=subprocess.PIPE if stdin is not None else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if process.stdin is not None:
            process.stdin.write(stdin or "")
            process.stdin.close()
        bridge = Bridge(process)
        self.bridges.append(bridge)
        return bridge

    def state(self) -> dict[str, Any]:
        return json.loads((self.home / "state.json").read_text())

    def stop_all(self) -> None:
        for bridge in self.bridges:
            bridge.kill()


class Bridge:
    """A running `yui run-webhook`: its events, read as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        # stderr is drained as it comes: a bridge blocked on a full pipe would look hung.
        self._err_reader = threading.Thread(target=self._drain, daemon=True)
        self._err_reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:  # closed at EOF: an open pipe left to the GC is a warning
            for line in self.process.stdout:
                if line.strip():
                    self.events.put(json.loads(line))

    def _drain(self) -> None:
        assert self.process.stderr is not None
        with self.process.stderr:
            for line in self.process.stderr:
                self._err.append(line)

    def wait(self, event: str, timeout: float = 30, **match: Any) -> dict[str, Any]:
        """The next event named `event` whose fields include `match`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no {event} {match} within {timeout} s; saw {self.seen[-8:]}"
            try:
                got = self.events.get(timeout=min(left, 0.5))
            except queue.Empty:
                assert self.process.poll() is None or not self.events.empty(), (
                    f"the bridge exited {self.process.returncode}: {self._stderr()}"
                )
                continue
            self.seen.append(got)
            if got["event"] == event and all(got.get(k) == v for k, v in match.items()):
                return got

    def acked(self, ids: list[str], timeout: float = 30) -> None:
        """Wait until every id in `ids` has been acked (acks of several turns may come as one)."""
        wanted = set(ids)
        done = {i for e in self.seen if e["event"] == "ack" for i in e["ids"]}
        deadline = time.monotonic() + timeout
        while not wanted <= done:
            left = deadline - time.monotonic()
            assert left > 0, f"{sorted(wanted - done)} not acked within {timeout} s"
            done.update(self.wait("ack", timeout=left)["ids"])

    @property
    def stderr(self) -> str:
        """What it has written to stderr so far."""
        return "".join(self._err)

    def _stderr(self) -> str:
        """Everything it wrote to stderr, once it has exited (all of it read by then)."""
        if self.process.poll() is not None:
            self._err_reader.join(timeout=10)
        return self.stderr

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self._stderr()

    def terminate(self, timeout: float = 30) -> int:
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(timeout=timeout)
        self._stderr()
        return status

    def output(self) -> tuple[str, str]:
        """Everything it printed (after it has exited)."""
        self.process.wait(timeout=30)
        rest = [json.dumps(e) for e in self.seen]
        while not self.events.empty():
            rest.append(json.dumps(self.events.get()))
        return "\n".join(rest), self._stderr()


# --- the model bridge ----------------------------------------------------------------------

MODEL_INTERVAL = ("--interval", "0.3")  # with --poll-only; the live feed wakes the rest at once


def run_model(machine: Machine, model_url: str, *args: str, stdin: str = "", **env: str) -> Bridge:
    """`yui run-model` as a real process on `machine`, its JSON events read as they come."""
    return machine.run(
        "run-model",
        "--url",
        model_url,
        "--model",
        "tiny",
        "--json",
        *MODEL_INTERVAL,
        *args,
        stdin=stdin,
        **env,
    )
