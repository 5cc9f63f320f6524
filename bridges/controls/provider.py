"""The contract between Controls and a plug-in: the sections it serves and what it does with
their items, and how it refuses. The checks every request passes (`bridges.controls.requests`)
and what is kept on this machine (`bridges.controls.store`) are the same whoever serves it.
"""

from __future__ import annotations

import abc
import hashlib
import json
from typing import Any

from bridges.client.rows import AgentInfo
from bridges.controls.text import MESSAGES

V = 1  # the version of Controls this host speaks
# The sections and the most a host may serve of each (the relay keeps no more than this).
SECTIONS = {
    "soul": "rw",
    "memory": "rwd",
    "skills": "rwd",
    "schedules": "rwd",
    "model": "r",
    "channels": "r",
}
SOUL_ID = "SOUL.md"  # the personality's one item


class ControlError(Exception):
    """A request the host refuses: its code, a plain message, and anything the app shows with
    it (the current rev and item on a conflict)."""

    def __init__(self, code: str, message: str | None = None, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.message = message or MESSAGES.get(code, MESSAGES["failed"])
        self.extra = extra


class ControlsProvider(abc.ABC):
    """The sections a plug-in serves, and what it does with them. Items are JSON objects with an
    `id` (a name from its own list, never a path) and, for text, `text`; the requests module
    adds `rev` and `read_only`, and redacts them on the way out. A provider refuses with
    `ControlError`."""

    @abc.abstractmethod
    def sections(self) -> dict[str, str]:
        """Section → mode (`r`, `rw`, `rwd`)."""

    @abc.abstractmethod
    def list(self, agent: AgentInfo, section: str) -> list[dict[str, Any]]: ...

    @abc.abstractmethod
    def get(self, agent: AgentInfo, section: str, item_id: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    def put(
        self, agent: AgentInfo, section: str, item_id: str, value: dict[str, Any], rev: str
    ) -> dict[str, Any]: ...

    @abc.abstractmethod
    def act(self, agent: AgentInfo, section: str, item_id: str, verb: str) -> dict[str, Any]: ...

    @abc.abstractmethod
    def delete(self, agent: AgentInfo, section: str, item_id: str, rev: str) -> None: ...

    def load_report(self) -> None:
        """Learn what it serves before `sections` is first read (the webhook asks its author);
        raise `Unreachable` to be asked again later. By default there is nothing to learn."""
        return None


def report_of(provider: ControlsProvider | None) -> dict[str, Any] | None:
    """The capability report for yui-connect: only known sections, each within its limit."""
    if provider is None:
        return None
    sections = {
        name: mode
        for name, mode in provider.sections().items()
        if name in SECTIONS and mode in ("r", "rw", "rwd") and set(mode) <= set(SECTIONS[name])
    }
    return {"v": V, "sections": sections} if sections else None


def rev_of(item: dict[str, Any]) -> str:
    """An item's version: the first 12 hex of SHA-256 of its text (or of its JSON)."""
    text = item.get("text")
    if not isinstance(text, str):
        text = json.dumps(
            {k: v for k, v in item.items() if k not in ("rev", "read_only")},
            sort_keys=True,
            ensure_ascii=False,
        )
    return hashlib.sha256(text.encode()).hexdigest()[:12]
