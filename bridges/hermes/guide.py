"""The channel guide as the Yui platform's hint: Hermes puts a platform's hint in the system
prompt of that platform's turns and no other, which is where the guide belongs.

The guide is the relay's current one (the session's), with its version line, set before the
turn that first carries it goes in; a guide published later reaches the agent without a new
plug-in.
"""

from __future__ import annotations

from typing import Any

_current: dict[str, str] = {}


def hint(version: str, body: str) -> str:
    """The guide as the agent reads it: its version line, then its text."""
    return f"Yui channel guide {version}\n\n{body.strip()}"


def hint_for(guide: dict[str, Any]) -> None:
    """Make the relay's guide (`{version, body}`) the platform's hint, once per version."""
    version, body = guide.get("version"), guide.get("body")
    if not isinstance(version, str) or not isinstance(body, str) or not body.strip():
        return
    if _current.get("version") == version:
        return
    from gateway.platform_registry import platform_registry

    entry = platform_registry.get("yui")
    if entry is not None:
        entry.platform_hint = hint(version, body)
        _current["version"] = version
