"""Controls: the person lists, reads and changes what their agent is made of (its personality,
memory, skills, schedules; its model and channels, read only) from the app, with no chat turn.

A request is the owner's control row, `meta = {v, req, op, section, id?, rev?, value?, verb?,
confirmed?}`; the host answers each with exactly one control row that names it (`meta.for`,
never `meta.turn`). The host trusts nothing the phone says, so every request runs the same
checks in the same order (the seed's section 3): version, owner, op, section, mode, the id's
shape, the verb, confirm on delete, 30 writes a minute per agent, the item's rev, then the new
value (32 KB, an empty personality, keys). What goes out passes the same checks whoever made it,
a plug-in's own files or an author's webhook: a line that looks like a key leaves whole as a
placeholder and marks its item read only, so a save can never write the placeholder back.

Before an accepted write the old item is copied to `$YUI_HOME/controls-trash/` (swept after 30
days) and the write is logged as one JSON line in `$YUI_HOME/controls.log`; the agent hears of
it in one line on its next turn. What a bridge serves comes from a `ControlsProvider`; a bridge
without one answers every request `bad_section`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from bridges.client.host import HostSession
from bridges.controls.text import HIDDEN, MESSAGES, change_words, note_line, redact, title_of
from bridges.engine.replies import agent_row
from bridges.engine.turns import AgentInfo
from state.jsonfile import JsonFile
from state.paths import ensure_private_dir, yui_home

log = logging.getLogger("yui.controls")

V = 1
OPS = {"list": "r", "get": "r", "put": "w", "act": "w", "delete": "d"}
WRITES = ("put", "act", "delete")
# The sections and the most a host may serve of each (the relay keeps no more than this).
SECTIONS = {
    "soul": "rw",
    "memory": "rwd",
    "skills": "rwd",
    "schedules": "rwd",
    "model": "r",
    "channels": "r",
}
VERBS = {"skills": ("enable", "disable"), "schedules": ("pause", "resume", "run")}
SOUL_ID = "SOUL.md"
ITEM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MAX_REQ = 40
MAX_TEXT = 32 * 1024  # bytes of a value (UTF-8)
MAX_META = 60_000  # bytes of an answer's meta; the relay takes 64 KB on a control row
MAX_ITEMS = 200
WRITES_PER_MINUTE = 30
TRASH_DAYS = 30
ANSWERS = uuid.UUID("6f1c2a52-7d0e-4b8e-9f5e-1f3c0a9b7e21")  # answer ids: uuid5 of the request's


class ControlError(Exception):
    """A request the host refuses: its code, a plain message, and anything the app shows with
    it (the current rev and item on a conflict)."""

    def __init__(self, code: str, message: str | None = None, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.message = message or MESSAGES.get(code, MESSAGES["failed"])
        self.extra = extra


class ControlsProvider(Protocol):
    """The sections a plug-in serves, and what it does with them. Items are JSON objects with an
    `id` (a name from its own list, never a path) and, for text, `text`; the module adds `rev`
    and `read_only`, and redacts them on the way out. A provider refuses with `ControlError`."""

    def sections(self) -> dict[str, str]:
        """Section → mode (`r`, `rw`, `rwd`)."""
        ...

    def list(self, agent: AgentInfo, section: str) -> list[dict[str, Any]]: ...

    def get(self, agent: AgentInfo, section: str, item_id: str) -> dict[str, Any] | None: ...

    def put(
        self, agent: AgentInfo, section: str, item_id: str, value: dict[str, Any], rev: str
    ) -> dict[str, Any]: ...

    def act(self, agent: AgentInfo, section: str, item_id: str, verb: str) -> dict[str, Any]: ...

    def delete(self, agent: AgentInfo, section: str, item_id: str, rev: str) -> None: ...


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


def valid_id(value: Any) -> bool:
    """A name from the host's own list: letters, digits, `.`, `_`, `-`, never `..` or `/`."""
    return isinstance(value, str) and bool(ITEM_ID.fullmatch(value)) and ".." not in value


def shown(item: Any) -> dict[str, Any]:
    """An item as it may leave the host: checked for shape and size, every key-shaped line
    hidden, with its rev and whether it is read only."""
    if not isinstance(item, dict) or ("id" in item and not valid_id(item["id"])):
        raise ControlError("failed", detail="an item that isn't an object with a valid id")
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        raise ControlError("failed", detail="an item whose text isn't a string")
    if isinstance(text, str) and len(text.encode()) > MAX_TEXT:
        raise ControlError("too_big")
    clean, hidden = redact(item)
    clean["rev"] = rev_of(item)
    clean["read_only"] = bool(hidden or item.get("read_only"))
    return clean


def _listed(items: Any) -> list[dict[str, Any]]:
    """A list as it goes out: items with a valid id, each without its full text (the app gets
    that with `get`), titled, capped."""
    if not isinstance(items, list):
        raise ControlError("failed", detail="a list that isn't a list")
    out = []
    for item in items[:MAX_ITEMS]:
        if not isinstance(item, dict) or not valid_id(item.get("id")):
            continue
        entry = shown(item)
        entry["title"] = title_of(entry)
        entry.pop("text", None)
        out.append(entry)
    return out


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


def controls_note(agent_id: str, state: ControlsState) -> str | None:
    """The engine's hook for a turn: the line to put first in it, if anything changed."""
    return state.take_note(agent_id)


# --- one request --------------------------------------------------------------------------------


def answer_id(request_id: str) -> str:
    """The answer's row id, fixed by the request's: a replay writes the same row (a 409)."""
    return str(uuid.uuid5(ANSWERS, str(request_id)))


def handle_control(
    row: dict[str, Any],
    agent: AgentInfo,
    provider: ControlsProvider | None,
    session: HostSession,
    state: ControlsState,
) -> dict[str, Any] | None:
    """The engine's hook for a person's control row: the one answer row to queue (ack the
    request with it), or None when there is nothing to write: a Stop (the engine's own) or a
    request already answered before a restart (only ack it). Relay errors (`Unreachable`,
    `Refused`) propagate: the row stays unacked and is handled on the next read."""
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    if meta.get("op") == "stop":
        return None
    row_id = str(row["id"])
    answer = answer_id(row_id)
    if row.get("delivered_at") and (
        any(item.id == answer for item in session.state.snapshot().outbox)
        or session.rows("yui_messages", [("select", "id"), ("id", f"eq.{answer}")])
    ):
        return None
    session.mark([row_id], "delivered_at")  # a replay after a crash looks for its answer
    reply = respond(row, agent, provider, state, owner=session.user_id)
    words = [reply.get("op", "request"), reply.get("section"), reply.get("id")]
    body = ["controls:", *(w for w in words if w)]
    if not reply["ok"]:
        body.append(f"({reply['error']})")
    meta = {**reply, "for": row_id}
    return agent_row(session.user_id, agent.id, " ".join(body), meta, "control", row_id=answer)


def respond(
    row: dict[str, Any],
    agent: AgentInfo,
    provider: ControlsProvider | None,
    state: ControlsState,
    *,
    owner: str,
) -> dict[str, Any]:
    """The answer's meta (without `for`): `ok: true` with what was asked, or `ok: false` with
    an error code and a plain message. Never raises: one bad request (or a provider's bug) must
    not take the bridge down."""
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    req = meta.get("req")
    answer: dict[str, Any] = {"v": V, "req": str(req)[:MAX_REQ] if req is not None else None}
    try:
        answer.update(_serve(row, meta, agent, provider, state, owner, answer))
        answer["ok"] = True
    except ControlError as refusal:
        answer.update(ok=False, error=refusal.code, message=refusal.message, **refusal.extra)
    except Exception as exc:
        log.exception("a Controls request failed")
        answer.update(
            ok=False, error="failed", message=MESSAGES["failed"], detail=type(exc).__name__
        )
    if len(json.dumps(answer, ensure_ascii=False).encode()) > MAX_META:
        for key in ("items", "item", "rev", "detail"):
            answer.pop(key, None)
        answer.update(ok=False, error="too_long", message=MESSAGES["too_long"])
    return answer


def _serve(
    row: dict[str, Any],
    meta: dict[str, Any],
    agent: AgentInfo,
    provider: ControlsProvider | None,
    state: ControlsState,
    owner: str,
    answer: dict[str, Any],
) -> dict[str, Any]:
    """The checks in order, then the op. Adds what it learns (op, section, id) to `answer` as
    it goes, so a refusal still names them."""
    if type(meta.get("v")) is not int or meta["v"] != V:  # not True, not 1.0
        raise ControlError("version")
    # The engine reads only the person's rows; a row that says otherwise isn't theirs.
    if row.get("sender", "user") != "user" or str(row.get("user_id")) != owner:
        raise ControlError("not_owner")
    op = meta.get("op")
    if not isinstance(op, str) or op not in OPS:
        raise ControlError("bad_op")
    answer["op"] = op
    section = meta.get("section")
    sections = (report_of(provider) or {}).get("sections", {})
    served = sections.get(section) if isinstance(section, str) else None
    if not served:
        raise ControlError("bad_section")
    answer["section"] = section
    if op == "delete" and section == "soul":
        raise ControlError("keep_soul")
    if OPS[op] not in served:
        raise ControlError("not_allowed")
    assert provider is not None
    if op == "list":
        return {"items": _listed(provider.list(agent, section))}
    item_id = meta.get("id")
    if not valid_id(item_id):
        raise ControlError("bad_id")
    answer["id"] = item_id
    verb = meta.get("verb")
    if op == "act" and verb not in VERBS.get(section, ()):
        raise ControlError("bad_verb")
    if op == "delete" and meta.get("confirmed") is not True:
        raise ControlError("confirm")
    if op in WRITES and not state.take_write(agent.id):
        raise ControlError("too_fast")
    current = provider.get(agent, section, item_id)
    if current is None:
        raise ControlError("not_found")
    before = shown(current)
    if op == "get":
        return {"rev": before["rev"], "item": before}
    if op in ("put", "delete") and meta.get("rev") != before["rev"]:
        raise ControlError("conflict", rev=before["rev"], item=before)
    value = _checked_value(section, meta.get("value"), before) if op == "put" else {}
    state.keep(agent, section, item_id, current)
    try:
        if op == "put":
            after: dict[str, Any] | None = provider.put(
                agent, section, item_id, value, before["rev"]
            )
        elif op == "act":
            after = provider.act(agent, section, item_id, verb)
        else:
            provider.delete(agent, section, item_id, before["rev"])
            after = None
    except ControlError as refusal:
        if refusal.code == "conflict":  # the provider's own rev check: show what it holds now
            now = provider.get(agent, section, item_id)
            if now is not None:
                refusal.extra.update(rev=rev_of(now), item=shown(now))
        raise
    if op != "delete" and after is None:  # done, but not shown: read it back
        after = provider.get(agent, section, item_id)
        if after is None:
            raise ControlError("failed", detail="the change was made but can't be read back")
    new = shown(after) if after is not None else None
    state.record(
        {
            "at": datetime.fromtimestamp(state.clock(), UTC).isoformat(timespec="seconds"),
            "who": str(row.get("user_id")),
            "agent": agent.id,
            "op": op,
            "section": section,
            "id": item_id,
            **({"verb": verb} if op == "act" else {}),
            "old": before["rev"],
            "new": new["rev"] if new else None,
        }
    )
    state.changed(agent.id, change_words(op, section, title_of(before), verb))
    return {"deleted": True} if new is None else {"rev": new["rev"], "item": new}


def _checked_value(section: str, value: Any, before: dict[str, Any]) -> dict[str, Any]:
    """A put's new value: an object whose text is a string, within 32 KB, not an empty
    personality, for an item that holds no key, and holding no key itself."""
    if not isinstance(value, dict) or not isinstance(value.get("text", ""), str):
        raise ControlError("bad_value")
    text = value.get("text", "")
    rest = {k: v for k, v in value.items() if k != "text"}  # a schedule's time, say
    extra = json.dumps(rest, ensure_ascii=False) if rest else ""
    if len(text.encode()) + len(extra.encode()) > MAX_TEXT:
        raise ControlError("too_big")
    if section == "soul" and not text.strip():
        raise ControlError("empty")
    if before["read_only"]:
        raise ControlError("read_only")
    _, hidden = redact(value)
    if hidden or HIDDEN in json.dumps(value, ensure_ascii=False):
        raise ControlError("unsafe")
    return value
