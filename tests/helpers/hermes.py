"""The real Hermes (hermes-agent 0.19.0) for the plug-in's tests, fully offline.

Hermes pins its dependencies exactly, so it lives in a venv of its own (`make hermes`:
`.venv/hermes`, with this package installed editable into it). A `HermesMachine` is one
computer's Hermes root (its own HOME) with profiles made by `hermes profile create`, a
model on loopback (the fake OpenAI-compatible server), and every switch that would reach the
network off: no tirith download, no lazy installs, a fixed context length (no model metadata
fetch). Gateways run as `hermes -p P gateway run` processes and are always killed at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.cli import ROOT
from tests.helpers.model import Call, Hold, Reply, Script, plain, says
from tests.helpers.relay import LocalRelay

VENV = ROOT / ".venv" / "hermes"
HERMES = VENV / "bin" / "hermes"
YUI = VENV / "bin" / "yui"


def hermes_missing() -> str | None:
    """Why the Hermes tests can't run here, or None."""
    if not HERMES.exists() or not YUI.exists():
        return "no Hermes venv (.venv/hermes): run `make hermes`"
    return None


def config(model_url: str) -> str:
    """A profile's config.yaml: the fake model, and nothing that reaches the network."""
    return f"""# written by the tests
model:
  provider: custom
  default: fake-model
  base_url: {model_url}
  api_key: dummy
  context_length: 65536
  supports_vision: true
agent:
  image_input_mode: native
security:
  tirith_enabled: false
  allow_lazy_installs: false
"""


@dataclass
class Gateway:
    """`hermes -p PROFILE gateway run`, its output in a log file."""

    profile: str
    process: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class HermesMachine:
    """One computer's Hermes: its root, its profiles, its gateways, on one relay."""

    home: Path
    relay: LocalRelay
    gateways: list[Gateway] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return self.home / ".hermes"

    def profile_home(self, profile: str) -> Path:
        return self.root / "profiles" / profile

    def env(self, **extra: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("YUI_", "HERMES_"))}
        return {
            **keep,
            "HOME": str(self.home),
            "PATH": f"{VENV / 'bin'}:{keep.get('PATH', '')}",
            "YUI_URL": self.relay.url,
            "NO_COLOR": "1",
            "NO_PROXY": "127.0.0.1,localhost",
            **extra,
        }

    def run(
        self, program: Path, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(program), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check:
            assert result.returncode == 0, (
                f"{program.name} {args} → {result.returncode}\n{result.stdout}\n{result.stderr}"
            )
        return result

    def hermes(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(HERMES, *args, **kw)

    def yui(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(YUI, *args, **kw)

    def make_profile(self, profile: str, model_url: str) -> Path:
        """A fresh profile on the fake model, with the Yui platform installed."""
        self.hermes("profile", "create", profile, "--no-alias", "--no-skills")
        home = self.profile_home(profile)
        (home / "config.yaml").write_text(config(model_url))
        self.yui("hermes", "install", profile)
        return home

    def gateway(self, profile: str) -> Gateway:
        """`hermes -p PROFILE gateway run` in the background (killed at the end of the test)."""
        log = self.home / f"gateway-{profile}-{len(self.gateways)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(HERMES), "-p", profile, "gateway", "run"],
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        gateway = Gateway(profile, process, log)
        self.gateways.append(gateway)
        return gateway

    def stop_all(self) -> None:
        for gateway in self.gateways:
            gateway.kill()


def wait_for(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    """`check()`'s first truthy value, asked every 0.1 s until `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what or check}")


class Brain:
    """What the fake model answers Hermes: each agent turn (a request offering tools) takes the
    next planned script, else echoes; Hermes's side requests (a session title) get a title."""

    def __init__(self) -> None:
        self.plans: list[Script] = []
        self.turns: list[Call] = []
        self._lock = threading.Lock()

    def plan(self, *scripts: Script) -> None:
        with self._lock:
            self.plans.extend(scripts)

    def script(self, call: Call) -> Reply:
        if not call.body.get("tools"):
            return plain("A short title")
        with self._lock:
            self.turns.append(call)
            script = self.plans.pop(0) if self.plans else None
        if script is None:
            return says(f"Answer {len(self.turns)}")(call)
        return script(call)


def user_text(call: Call) -> str:
    """What the person said in an agent turn: the last user message, without the notes
    Hermes appends to it."""
    return call.last.split("\n\n[System note")[0]


def gated(gate: threading.Event, text: str) -> Script:
    """An answer that waits for `gate` first: a slow turn the test ends when it chooses."""

    def answer(call: Call) -> Reply:
        gate.wait(60)
        return says(text)(call)

    return answer


def held(call: Call) -> Reply:
    """No answer until Hermes hangs up (a turn only a Stop or a kill ends)."""
    return Hold()
