"""A bridge's life as a program: built on its session, stopped by a signal, and alone with
the agents it serves.

A bridge serves every agent of its state file, or only those `--agent` names; a second bridge
that would serve an agent already served from the same file is refused at once, naming the
bridge that has it and what to do (`state.bridgelock`). The plug-in is built once the session
exists, so what it needs is passed in, never set later; SIGTERM and SIGINT both end in the
same clean stop, whose last step says bye to the relay.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Sequence

from bridges.client.host import HostSession
from bridges.client.rows import AgentInfo
from bridges.engine.bridge import Bridge, BridgeOptions, Events
from bridges.engine.plugin import AgentPlugin
from state.bridgelock import BridgeLock
from state.errors import BadInput, Unreachable
from state.host import HostState

PluginFactory = Callable[[HostSession], AgentPlugin]


def serve(
    state: HostState,
    url: str | None,
    make_plugin: PluginFactory,
    events: Events,
    options: BridgeOptions,
    *,
    kind: str = "",
    only: Sequence[str] = (),
) -> None:
    """Run one bridge (of `kind`, for the agents `only` names, or every one) until SIGTERM
    or SIGINT; a refusal (revoked, suspended) is raised."""
    session = HostSession(state, url)
    session.only = tuple(only)
    agents = served_agents(session) if only else None
    stopped_by: list[int] = []
    with BridgeLock(state.path, kind=kind, agents=agents):
        bridge = Bridge(session, state, make_plugin(session), events, options)

        def stop(signum: int, frame: object) -> None:
            stopped_by.append(signum)
            bridge.stop()

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, stop)
        bridge.run()
    if signal.SIGINT in stopped_by:  # stopped cleanly, but by Ctrl-C: exit 130 says so
        raise KeyboardInterrupt


def served_agents(session: HostSession) -> dict[str, str]:
    """What `--agent` names, as lock keys (the agent's id) and labels (`@handle`): from the
    saved session, else from the relay; a name neither knows is refused when the relay
    answered, and locked by its spelling when it can't be reached (the bridge waits for it)."""
    session.offline()
    if not all(_find(session, name) for name in session.only):
        with contextlib.suppress(Unreachable):
            session.refresh_agents()
            missing = [name for name in session.only if not _find(session, name)]
            if missing:
                listed = ", ".join(a.handle for a in session.every_agent.values()) or "none"
                raise BadInput(f"no agent {missing[0]!r} on this host (agents: {listed})")
    keys = {}
    for name in session.only:
        found = _find(session, name)
        keys[found.id if found else name] = f"@{found.handle}" if found else name
    return keys


def _find(session: HostSession, name: str) -> AgentInfo | None:
    return next((a for a in session.every_agent.values() if a.named(name)), None)
