"""The contract between the engine and an agent plug-in.

A plug-in turns a `Turn` into reply texts; everything else (the session, in-flight turns, the
outbox, acks, retries, Stop, gating, media, mentions, the checks of Controls) is the engine's,
so every guarantee holds the same for every kind of agent. What a plug-in needs (the host's
session, to read the thread; its options) is passed in when it is built. What it may offer
beyond `answer` is declared here with a default that offers nothing, so the engine never probes
a plug-in for a hook.

A new kind of agent is one module with an `AgentPlugin` subclass, and one thin command that
builds it and hands it to the bridge.
"""

from __future__ import annotations

import abc

from bridges.client.rows import AgentInfo
from bridges.controls.provider import ControlsProvider
from bridges.engine.turns import Turn


class AgentPlugin(abc.ABC):
    """An agent, as the engine asks it."""

    @abc.abstractmethod
    def answer(self, turn: Turn) -> list[str]:
        """The reply texts for `turn`, in order; none is a handled turn with no reply. Raise
        `RetryTurn` to be asked again later with the very same turn; watch `turn.cancelled`
        (the person's Stop, or the bridge stopping) in anything slow."""

    def controls(self) -> ControlsProvider | None:
        """What the agent serves of Controls; None serves nothing (the bridge tells the relay
        so once, and answers every request `bad_section`)."""
        return None

    def on_stop(self, agent: AgentInfo) -> str | None:
        """The person pressed Stop in `agent`'s thread, whether a turn ran or not (the running
        turn's `cancelled` is already set): end whatever the agent still does for them, e.g. a
        remote task left waiting for input. Called on a thread of its own, so it may take its
        time; a line it returns is said to the person, after "Stopped."."""
        return None
