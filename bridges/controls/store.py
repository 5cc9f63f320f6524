"""What Controls keeps on this machine: the trash of old versions (30 days), the log of
changes, each agent's note for its next turn, each agent's recent writes, and which reports
were sent. Nothing here leaves the host."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bridges.client.rows import AgentInfo
from bridges.controls.text import note_line
from state.jsonfile import JsonFile
from state.paths import ensure_private_dir, yui_home

WRITES_PER_MINUTE = 30
TRASH_DAYS = 30


class ControlsState:
    """What Controls keeps on this machine: the trash, the log, each agent's note for its next
    turn (in `controls.json`, so a restart doesn't lose it), and each agent's recent writes."""

    def __init__(self, home: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.home = home or yui_home()
        self.trash = self.home / "controls-trash"
        self.log_path = self.home / "controls.log"
        self.clock = clock
        self._file = JsonFile(self.home / "controls.json")
        self._writes: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self.sweep_trash()

    def take_write(self, agent_id: str) -> bool:
        """One write for this agent, if it has had fewer than 30 in the last minute."""
        now = self.clock()
        with self._lock:
            window = self._writes.setdefault(agent_id, deque())
            while window and window[0] <= now - 60:
                window.popleft()
            if len(window) >= WRITES_PER_MINUTE:
                return False
            window.append(now)
            return True

    def keep(self, agent: AgentInfo, section: str, item_id: str, item: dict[str, Any]) -> Path:
        """Copy an item to the trash before it changes: its text as it was, or its JSON."""
        ensure_private_dir(self.trash)
        stamp = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y%m%dT%H%M%S%fZ")
        name = f"{stamp}-{agent.handle}-{section}-{item_id}"
        text = item.get("text")
        data = text if isinstance(text, str) else json.dumps(item, ensure_ascii=False, indent=1)
        for n in itertools.count(1):  # two writes in one microsecond keep two copies
            path = self.trash / (name if n == 1 else f"{name}.{n}")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                break
            except FileExistsError:
                continue
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(data)
        self.sweep_trash()
        return path

    def sweep_trash(self) -> int:
        """Delete trash older than 30 days; how many went."""
        cutoff = self.clock() - TRASH_DAYS * 86400
        gone = 0
        if self.trash.is_dir():
            for path in self.trash.iterdir():
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink(missing_ok=True)
                    gone += 1
        return gone

    def record(self, entry: dict[str, Any]) -> None:
        """One JSON line in the log (mode 600); nothing in it leaves the host."""
        ensure_private_dir(self.home)
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def changed(self, agent_id: str, change: str) -> None:
        with self._file.edit() as doc:
            doc.setdefault("notes", {}).setdefault(agent_id, []).append(change)

    def take_note(self, agent_id: str) -> str | None:
        """The agent's one line about what changed since its last turn, once."""
        if agent_id not in self._file.read().get("notes", {}):
            return None
        with self._file.edit() as doc:
            changes = doc.get("notes", {}).pop(agent_id, [])
        return note_line(list(Counter(changes).items())) if changes else None

    def reported(self, key: str, on: bool | None = None) -> bool:
        """Whether a report was sent for `key` (a connector and a ref); `on` sets it."""
        if on is None:
            return key in self._file.read().get("reported", [])
        with self._file.edit() as doc:
            keys = set(doc.get("reported", []))
            keys = keys | {key} if on else keys - {key}
            doc["reported"] = sorted(keys)
        return on
