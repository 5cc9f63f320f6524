"""The engine's side of a Hermes gateway: its agents, its serving report, and the plug-in that
hands each turn to Hermes.

A gateway serves the agents whose ref is its profile's name and reports serving that profile in
every session, heartbeat and bye, so two profiles on one computer each read only their own
threads and show presence of their own. The plug-in is the engine's usual `AgentPlugin`: it
gives the turn to Hermes as one inbound message and waits for the answer Hermes sends back,
so exactly-once, the outbox, Stop, gating, media and notes are the engine's, as for any bridge.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bridges.client.host import HostSession
from bridges.client.rows import AgentInfo
from bridges.controls.provider import ControlsProvider
from bridges.engine.bridge import Bridge
from bridges.engine.plugin import AgentPlugin
from bridges.engine.turns import RetryTurn, Turn
from bridges.media.replies import cache_dir
from state.host import HostState

WAIT_STEP = 0.2  # seconds between looks at the person's Stop while Hermes works
# A turn Hermes reports done without sending anything is replayed by Hermes itself (it does
# so with a message that arrived while it was still starting): wait this long for the replay
# before asking again.
SILENT_GRACE = 20.0
TURN_TIMEOUT = 30 * 60.0  # a turn Hermes never reports back stops holding the agent


@dataclass
class Ask:
    """One turn handed to Hermes, and what came back."""

    turn: Turn
    command: bool = False  # a `/command`, which may go in while a turn runs
    message_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    replies: list[str] = field(default_factory=list)
    outcome: str | None = None  # Hermes's ProcessingOutcome value once it reports
    cancelled: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def photos(self) -> list[str]:
        """The person's photos in this turn, as the local files the engine downloaded."""
        return [p for row in self.turn.rows for p in _local_files(row.get("meta") or {})]


class Gateway(Protocol):
    """What the plug-in needs of the Hermes adapter (see `adapter.YuiAdapter`)."""

    def ask(self, ask: Ask) -> None: ...

    def release(self, ask: Ask) -> None: ...

    def interrupt(self, agent_id: str) -> None: ...

    @property
    def serving(self) -> bool: ...


class ProfileSession(HostSession):
    """The host's session, seeing only the agents of one profile (their ref is its name)."""

    def __init__(self, state: HostState, url: str | None, profile: str) -> None:
        self.profile = profile
        super().__init__(state, url)

    def set_agents(self, agents: list[dict[str, Any]]) -> list[AgentInfo]:
        return super().set_agents([a for a in agents if a.get("remote_ref") == self.profile])


class ProfileBridge(Bridge):
    """The engine for one gateway: it reports serving its profile, with or without agents."""

    session: ProfileSession

    def _refs(self) -> list[str]:
        return [self.session.profile]


class HermesAgent(AgentPlugin):
    """Each turn goes to Hermes as one message (notes first, then the rows' lines, the
    person's photos as vision media); the answer Hermes sends back is the turn's reply."""

    def __init__(self, gateway: Gateway, controls: ControlsProvider | None = None) -> None:
        self.gateway = gateway
        self._controls = controls

    def controls(self) -> ControlsProvider | None:
        return self._controls

    def answer(self, turn: Turn) -> list[str]:
        if turn.cancelled.is_set():
            raise RetryTurn("stopped")
        command = len(turn.rows) == 1 and str(turn.rows[0].get("body", "")).startswith("/")
        ask = Ask(turn, command=command and turn.rows[0].get("kind") == "text")
        self.gateway.ask(ask)
        try:
            return self._wait(ask)
        finally:
            self.gateway.release(ask)

    def _wait(self, ask: Ask) -> list[str]:
        turn = ask.turn
        deadline = time.monotonic() + TURN_TIMEOUT
        silent_since: float | None = None
        while True:
            ask.done.wait(WAIT_STEP)
            if turn.cancelled.is_set():  # the person's Stop, or the gateway stopping
                self.gateway.interrupt(turn.agent.id)
                raise RetryTurn("stopped")
            if not self.gateway.serving:
                raise RetryTurn("the gateway is stopping")
            if time.monotonic() > deadline:
                raise RetryTurn(f"Hermes didn't finish the turn in {TURN_TIMEOUT:g} s")
            if not ask.done.is_set():
                continue
            if ask.outcome != "success":
                raise RetryTurn(f"Hermes ended the turn: {ask.outcome}")
            if ask.replies:
                return list(ask.replies)
            silent_since = silent_since or time.monotonic()
            if time.monotonic() - silent_since > SILENT_GRACE:
                raise RetryTurn("Hermes finished the turn without an answer")
            time.sleep(WAIT_STEP)

    def on_stop(self, agent: AgentInfo) -> str | None:
        self.gateway.interrupt(agent.id)
        return None


def _local_files(value: Any) -> list[str]:
    """The files in the engine's media cache that an event's value names (its photos)."""
    if isinstance(value, dict):
        return [p for v in value.values() for p in _local_files(v)]
    if isinstance(value, list):
        return [p for v in value for p in _local_files(v)]
    if isinstance(value, str) and value.startswith("/"):
        path = Path(value)
        if path.parent == cache_dir() and path.is_file():
            return [value]
    return []
