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

import json
import logging
import re
import uuid
from datetime import UTC, datetime
from typing import Any, TypeGuard

from bridges.client.host import HostSession
from bridges.client.rows import AgentInfo, agent_row
from bridges.controls.provider import ControlError, ControlsProvider, V, report_of, rev_of
from bridges.controls.store import ControlsState
from bridges.controls.text import HIDDEN, MESSAGES, change_words, redact, title_of

log = logging.getLogger("yui.controls")

OPS = {"list": "r", "get": "r", "put": "w", "act": "w", "delete": "d"}
WRITES = ("put", "act", "delete")
VERBS = {"skills": ("enable", "disable"), "schedules": ("pause", "resume", "run")}
ITEM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MAX_REQ = 40
MAX_TEXT = 32 * 1024  # bytes of a value (UTF-8)
MAX_META = 60_000  # bytes of an answer's meta; the relay takes 64 KB on a control row
MAX_ITEMS = 200
ANSWERS = uuid.UUID("6f1c2a52-7d0e-4b8e-9f5e-1f3c0a9b7e21")  # answer ids: uuid5 of the request's


def valid_id(value: Any) -> TypeGuard[str]:
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
    if _meta(row).get("op") == "stop":
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
    meta = _meta(row)
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


def _meta(row: dict[str, Any]) -> dict[str, Any]:
    meta = row.get("meta")
    return meta if isinstance(meta, dict) else {}


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
    if not isinstance(section, str) or not served:
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
    if op == "act" and (not isinstance(verb, str) or verb not in VERBS.get(section, ())):
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
            after = provider.act(agent, section, item_id, str(verb))
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
