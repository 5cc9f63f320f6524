"""A bridge's life as a program: one per state file, built on its session, stopped by a signal.

A second bridge on the same state file is refused at once (naming the pid that holds it);
the plug-in is built once the session exists, so what it needs is passed in, never set later;
SIGTERM and SIGINT both end in the same clean stop, whose last step says bye to the relay.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from bridges.client.host import HostSession
from bridges.engine.bridge import Bridge, BridgeOptions, Events
from bridges.engine.plugin import AgentPlugin
from state.bridgelock import BridgeLock
from state.host import HostState

PluginFactory = Callable[[HostSession], AgentPlugin]


def serve(
    state: HostState,
    url: str | None,
    make_plugin: PluginFactory,
    events: Events,
    options: BridgeOptions,
) -> None:
    """Run one bridge until SIGTERM or SIGINT; a refusal (revoked, suspended) is raised."""
    with BridgeLock(state.path):
        session = HostSession(state, url)
        bridge = Bridge(session, state, make_plugin(session), events, options)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: bridge.stop())
        bridge.run()
