"""Controls for a Hermes agent, served from its profile through Hermes's own code.

soul: the profile's SOUL.md (read, write). memory: the entries of MEMORY.md and USER.md, each
an item `mem-<hash>` or `user-<hash>` that follows its text (an edit answers with a new id),
changed only through Hermes's memory store, so its file lock, injection scan and size limit
apply. skills: the profile's skill folders (read). schedules: its cron jobs (read; pause,
resume, run now and remove through `cron.jobs`). model and channels: words only, never a key
or a chat id. The checks every request passes (owner, rev, rate, secrets) are the engine's.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

from bridges.client.rows import AgentInfo
from bridges.controls.provider import SOUL_ID, ControlError, ControlsProvider, rev_of

MEMORY_FILES = {"mem": "memory", "user": "user"}  # id prefix → the memory store's target
MAX_SKILLS = 200
FRONTMATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


class HermesControls(ControlsProvider):
    """The sections of one Hermes profile (its home folder)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._lock = threading.Lock()

    def sections(self) -> dict[str, str]:
        return {
            "soul": "rw",
            "memory": "rwd",
            "skills": "r",
            "schedules": "rwd",
            "model": "r",
            "channels": "r",
        }

    def list(self, agent: AgentInfo, section: str) -> list[dict[str, Any]]:
        if section == "soul":
            return [self._soul()]
        if section == "memory":
            return _memories()
        if section == "skills":
            return _skills(self.home)
        if section == "schedules":
            return [_job_item(job) for job in _cron().list_jobs(include_disabled=True)]
        if section == "model":
            return [self._model()]
        if section == "channels":
            return [{"id": "yui", "title": "Yui", "account": agent.name, "live": True}]
        return []

    def get(self, agent: AgentInfo, section: str, item_id: str) -> dict[str, Any] | None:
        return next((i for i in self.list(agent, section) if i["id"] == item_id), None)

    def _current(self, agent: AgentInfo, section: str, item_id: str, rev: str) -> dict[str, Any]:
        """The item as it is now, if it is the one the person saw (`rev`)."""
        current = self.get(agent, section, item_id)
        if current is None:
            raise ControlError("not_found")
        if rev_of(current) != rev:
            raise ControlError("conflict")
        return current

    def put(
        self, agent: AgentInfo, section: str, item_id: str, value: dict[str, Any], rev: str
    ) -> dict[str, Any]:
        text = value.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ControlError("bad_value")
        with self._lock:
            current = self._current(agent, section, item_id, rev)
            if section == "soul":
                _write_text(self.home / "SOUL.md", text)
                return self._soul()
            if section == "memory":
                target = MEMORY_FILES[item_id.split("-", 1)[0]]
                _checked(_memory_store().replace(target, current["text"], text))
                return _memory_item(target, text.strip())
        raise ControlError("not_allowed")

    def act(self, agent: AgentInfo, section: str, item_id: str, verb: str) -> dict[str, Any]:
        if section != "schedules":
            raise ControlError("bad_verb")
        jobs = _cron()
        actions = {"pause": jobs.pause_job, "resume": jobs.resume_job, "run": jobs.trigger_job}
        if verb not in actions:
            raise ControlError("bad_verb")
        job = actions[verb](item_id)
        if job is None:
            raise ControlError("not_found")
        return _job_item(job)

    def delete(self, agent: AgentInfo, section: str, item_id: str, rev: str) -> None:
        if section == "soul":
            raise ControlError("keep_soul")
        with self._lock:
            current = self._current(agent, section, item_id, rev)
            if section == "memory":
                target = MEMORY_FILES[item_id.split("-", 1)[0]]
                _checked(_memory_store().remove(target, current["text"]))
            elif section == "schedules":
                if not _cron().remove_job(item_id):
                    raise ControlError("not_found")
            else:
                raise ControlError("not_allowed")

    # --- the items -----------------------------------------------------------------------

    def _soul(self) -> dict[str, Any]:
        path = self.home / "SOUL.md"
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.strip()), "")
        return {"id": SOUL_ID, "title": title or "Personality", "text": text}

    def _model(self) -> dict[str, Any]:
        """The model and its provider in words: never the key or the server's address."""
        from hermes_cli.config import load_config_readonly

        model = load_config_readonly().get("model") or {}
        name = str(model.get("default") or model.get("model") or "not set")
        provider = str(model.get("provider") or "auto")
        return {
            "id": "model",
            "title": name,
            "provider": provider,
            "text": f"{name} through the {provider} provider.",
        }


def _memories() -> list[dict[str, Any]]:
    store = _memory_store()
    return [
        *(_memory_item("memory", entry) for entry in store.memory_entries),
        *(_memory_item("user", entry) for entry in store.user_entries),
    ]


def _skills(home: Path) -> list[dict[str, Any]]:
    folder = home / "skills"
    found = sorted(folder.glob("**/SKILL.md"))[:MAX_SKILLS] if folder.is_dir() else []
    items = []
    for skill in found:
        text = skill.read_text(encoding="utf-8", errors="replace")
        head = FRONTMATTER.match(text)
        about = re.search(r"^description:\s*(.+)$", head.group(1), re.M) if head else None
        items.append(
            {
                "id": skill.parent.name,
                "title": skill.parent.name,
                "text": text,
                "about": about.group(1).strip().strip("'\"") if about else "",
            }
        )
    return items


def _memory_item(target: str, entry: str) -> dict[str, Any]:
    prefix = "user" if target == "user" else "mem"
    digest = hashlib.sha256(entry.encode()).hexdigest()[:10]
    return {"id": f"{prefix}-{digest}", "title": entry.splitlines()[0][:80], "text": entry}


def _job_item(job: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(job.get("id")),
        "title": str(job.get("name") or job.get("prompt") or job.get("id"))[:80],
        "schedule": str(job.get("schedule_display") or ""),
        "paused": not job.get("enabled", True) or job.get("state") == "paused",
        "next": job.get("next_run_at"),
        "text": str(job.get("prompt") or ""),
    }


def _memory_store() -> Any:
    from tools.memory_tool import MemoryStore

    store = MemoryStore()
    store.load_from_disk()
    return store


def _cron() -> Any:
    import cron.jobs

    return cron.jobs


def _checked(result: dict[str, Any]) -> None:
    """A memory store's answer: refused changes (its scan, its size limit) are the host's
    refusal, in its own words."""
    if not result.get("success"):
        raise ControlError("failed", str(result.get("error") or "Hermes refused the change."))


def _write_text(path: Path, text: str) -> None:
    """Replace a file's text in one rename, so Hermes never reads half of it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
