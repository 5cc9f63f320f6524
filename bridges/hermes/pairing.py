"""A profile's agent on a computer already paired: `yui add`, with no code.

The relay makes the agent for the profile's name (or finds the one already there), so the
profile's gateway serves it; its floor starts at the relay's now, like a paired agent's.
"""

from __future__ import annotations

from typing import Any

from bridges.client.host import FLOOR_MARGIN, HostSession
from state.host import HostState


def add_agent(state: HostState, profile: str, name: str | None = None) -> dict[str, Any]:
    """The relay's answer: `{created, agent}`."""
    session = HostSession(state)
    body: dict[str, Any] = {"remote_ref": profile, "serving": []}
    if name:
        body["name"] = name
    answer = session.connect("add", **body)
    state.setdefault_floors([str(answer["agent"]["id"])], session.relay_now - FLOOR_MARGIN)
    return answer
