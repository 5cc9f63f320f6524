"""Controls for `yui run-model`: the personality is the `--system` file (read and write), and
the model and channels are shown in words (read only).

No memory section: this bridge keeps no notes of its own. The agent's memory is the thread,
which the person already reads (and deletes) in the app; a notes store made only to have
something to edit would be one more place for a secret to land and for the agent's idea of the
person to drift from what the person sees.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
import tempfile
import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bridges.client.rows import AgentInfo
from bridges.controls.provider import SOUL_ID, ControlError, ControlsProvider, rev_of

if TYPE_CHECKING:  # the plug-in builds its Controls: no import cycle at run time
    from bridges.model.plugin import ModelAgent

PROVIDERS = {
    "ollama": "Ollama",
    "llamacpp": "llama.cpp",
    "vllm": "vLLM",
    "lmstudio": "LM Studio",
    "openai": "OpenAI",
    "openrouter": "OpenRouter",
}
OUTLINE = re.compile(r"^(#{1,3})\s+(.+?)\s*#*\s*$")
MAX_OUTLINE = 20


class ModelControls(ControlsProvider):
    """The sections `run-model` serves for every agent it bridges."""

    def __init__(self, agent: ModelAgent, system_file: Path | None, server: str | None) -> None:
        self.agent = agent
        self.system_file = system_file.resolve() if system_file else None
        self.server = server
        self._lock = threading.Lock()

    def sections(self) -> dict[str, str]:
        served = {"model": "r", "channels": "r"}
        return {"soul": "rw", **served} if self.system_file else served

    def list(self, agent: AgentInfo, section: str) -> list[dict[str, Any]]:
        if section == "soul" and self.system_file:
            return [self._soul()]
        if section == "model":
            return [self._model()]
        if section == "channels":
            return [{"id": "yui", "title": "Yui", "account": agent.name, "live": True}]
        return []

    def get(self, agent: AgentInfo, section: str, item_id: str) -> dict[str, Any] | None:
        return next((i for i in self.list(agent, section) if i["id"] == item_id), None)

    def put(
        self, agent: AgentInfo, section: str, item_id: str, value: dict[str, Any], rev: str
    ) -> dict[str, Any]:
        """A new personality: written over the file (atomically, keeping its mode) and used
        from the next turn on."""
        if section != "soul" or self.system_file is None:
            raise ControlError("not_allowed")
        text = value["text"]
        with self._lock:  # the rev checked and the file written as one step
            if rev_of(self._soul()) != rev:
                raise ControlError("conflict")
            _write_text(self.system_file, text)
            self.agent.options = replace(self.agent.options, system=text)
        return self._soul()

    def act(self, agent: AgentInfo, section: str, item_id: str, verb: str) -> dict[str, Any]:
        raise ControlError("bad_verb")

    def delete(self, agent: AgentInfo, section: str, item_id: str, rev: str) -> None:
        raise ControlError("keep_soul" if section == "soul" else "not_allowed")

    def _soul(self) -> dict[str, Any]:
        assert self.system_file is not None
        text = self.system_file.read_text(encoding="utf-8")
        outline = [
            {"level": len(m.group(1)), "text": m.group(2)}
            for m in map(OUTLINE.match, text.splitlines())
            if m
        ][:MAX_OUTLINE]
        updated = datetime.fromtimestamp(self.system_file.stat().st_mtime, UTC)
        return {
            "id": SOUL_ID,
            "title": outline[0]["text"] if outline else self.system_file.stem,
            "text": text,
            "outline": outline,
            "updated": updated.isoformat(timespec="seconds").replace("+00:00", "Z"),
        }

    def _model(self) -> dict[str, Any]:
        """The model and its server in words: never the key, the URL or the host's name."""
        client = self.agent.client
        provider = PROVIDERS.get(self.server or "")
        where = _where(client.url)
        how = f"through {provider}" if provider else "on an OpenAI-compatible server"
        window = self.agent.options.context
        return {
            "id": "model",
            "title": client.model,
            "provider": provider or "OpenAI-compatible server",
            "where": where,
            "window": window,
            "text": f"{client.model} {how}, {where}. It reads up to {window} tokens at a time.",
        }


def _where(url: str) -> str:
    """Where a server runs, in words: this computer, the local network, or online."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return "on this computer"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        local = "." not in host or host.endswith((".local", ".lan", ".home.arpa", ".internal"))
        return "on your network" if local else "online"
    if address.is_loopback:
        return "on this computer"
    return "on your network" if address.is_private or address.is_link_local else "online"


def _write_text(path: Path, text: str) -> None:
    """Replace a file's text in one rename, so the bridge never reads half of it."""
    mode = stat.S_IMODE(path.stat().st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
