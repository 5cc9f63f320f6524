"""`/functions/v1/yui-screens`: a message's screens for the web app, and the event a tap writes.

The browser has no Yui Lines parser of its own: it asks here. `screen` reads one message row AS
the person (their token's role and claims, so row security decides what they may see), gates it
for the browser's build (what that build can't draw becomes words, as a bridge does for an old
phone) and answers its parts in order: words, and each ```yui fence as its ops. `event` turns a
tap on one of that message's elements into the row `yui app tap` writes (the same
`format_event_line` and `event_meta`), with the echo the person sees, so the line an agent reads
never depends on which client the person used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from psycopg.rows import dict_row

from relay.gateway.functions import Action, Call, Refusal, uuid_or_none
from state.rules import MAX_BODY
from yuilines.catalogue import PRESETS
from yuilines.events import EventLineError, event_meta, format_event_line
from yuilines.fences import all_fences
from yuilines.gating import gate_reply
from yuilines.limits import MAX_DEPTH, value_nesting
from yuilines.parser import parse
from yuilines.tokens import ID_RE

# What an event row may hold (relay spec: body 1..32,000 characters, meta at most 16 KB).
META_MAX = 16_000
BUILD_MAX = 10_000_000
ECHO_MAX = 500
KNOWN_MAX = 500  # lasting ids a request may name
# The app's own first lines (a mention, a reply, a note): never drawn.
_APP_LINE = re.compile(r"^\[yui\] [^\n]*(?:\n|$)", re.MULTILINE)
# Presets whose answer the person sees as their own reply: the value key the echo reads.
_ECHO_KEYS = {
    "ask": "answer",
    "choose": "choice",
    "compare": "choice",
    "mic": "transcript",
    "card": "cta",
    "stat": "cta",
    "project": "cta",
    "slide": "value",
}


async def _readable_row(call: Call) -> dict[str, Any]:
    """The message the body names, read with the caller's own rights: a row they can't read
    is a 404, as if it didn't exist."""
    claims = call.claims()
    if not claims or claims.get("role") != "yui_user" or not uuid_or_none(claims.get("sub")):
        raise Refusal(401, "unauthorized")
    message = uuid_or_none(call.body.get("message"))
    if message is None:
        raise Refusal(400, "invalid_message")
    async with (
        call.db.as_role("yui_user", claims) as conn,
        conn.cursor(row_factory=dict_row) as cur,
    ):
        await cur.execute(
            "select id, sender, kind, body from public.yui_messages where id = %s", (message,)
        )
        row = await cur.fetchone()
    if row is None:
        raise Refusal(404, "not_found")
    return dict(row)


def _build(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= BUILD_MAX:
        raise Refusal(400, "invalid_build")
    return value


def _known(value: Any) -> dict[str, str]:
    """Ids that last from earlier replies (`{id: preset}`, what the page has drawn on its
    pages), so a patch of one reads as a patch; anything malformed is refused."""
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > KNOWN_MAX:
        raise Refusal(400, "invalid_known")
    for key, preset in value.items():
        if not ID_RE.fullmatch(key) or preset not in PRESETS:
            raise Refusal(400, "invalid_known")
    return dict(value)


def message_parts(
    text: str, build: int | None, known: Mapping[str, str] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """A message as the browser draws it: words and screens in order, after gating; and the
    names of what the build couldn't draw."""
    gated = gate_reply(text, build, known)
    body = gated.text
    parts: list[dict[str, Any]] = []
    at = 0

    def words(chunk: str) -> None:
        chunk = _APP_LINE.sub("", chunk)
        if chunk.strip():
            parts.append({"kind": "words", "text": chunk.strip("\n")})

    for fence in all_fences(body):
        if fence.tag != "yui":
            continue  # a code block stays in the words around it
        words(body[at : fence.start])
        ops = [
            {k: v for k, v in op.items() if k != "line"}
            for op in parse(fence.body(body), known)
            if op["op"] != "error"
        ]
        parts.append({"kind": "screen", "ops": ops})
        at = fence.end
    words(body[at:])
    return parts, list(gated.gated)


async def screen(call: Call) -> dict[str, Any]:
    """The parsed screens of one message the caller may read."""
    build = _build(call.body.get("build"))
    known = _known(call.body.get("known"))
    row = await _readable_row(call)
    if row["sender"] != "agent" or row["kind"] != "text":
        return {"id": str(row["id"]), "parts": [], "gated": []}
    parts, gated = message_parts(row["body"], build, known)
    return {"id": str(row["id"]), "parts": parts, "gated": gated}


def _element(
    text: str, element_id: str, build: int | None, part: int | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The add op of `element_id` in a message's screens, as the browser drew them (gated for
    its build: a flow made over into a plan answers as that plan), with the ops beside it.
    Each screen counts its own `n1`, `n2`…: `part` (its place among the parts) says which."""
    parts = message_parts(text, build)[0]
    if part is not None:
        parts = parts[part : part + 1]
    for screen_part in parts:
        for op in screen_part.get("ops", []):
            if op["op"] == "add" and op["id"] == element_id:
                return op, screen_part["ops"]
    return None


def _said(value: Any) -> str:
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(_said(v) for v in value)
    return str(value)


def _form_said(form: Mapping[str, Any], props: Mapping[str, Any]) -> str:
    """A form's answer as `field: value` pairs, each field by its label."""
    fields = [f for f in props.get("fields", []) if isinstance(f, Mapping)]
    labels = {
        f.get("key"): f.get("label") or str(f.get("key", "")).replace("_", " ") for f in fields
    }
    photos = {f.get("key") for f in fields if f.get("type") == "photo"}
    return ", ".join(
        f"{labels.get(k) or k}: {'Photo' if k in photos else _said(v)}"
        for k, v in form.items()
        if v not in (None, "", [])
    )


def _answer_said(preset: str, answer: Any, props: Mapping[str, Any]) -> str:
    """One plan step's answer as words: option text, picks joined, the form's pairs."""
    if preset == "form" and isinstance(answer, Mapping):
        return _form_said(answer, props)
    if preset == "camera":
        return "Photo"
    return _said(answer)


def _plan_said(value: Mapping[str, Any], members: list[dict[str, Any]]) -> str:
    """The plan's fold: one line per answered step, `<question>: <answer>` (no colon after a
    question that ends in `?` or `:`), or `Sent` when nothing was answered."""
    answers = value.get("plan")
    lines: list[str] = []
    for member in members:
        answer = answers.get(member["id"]) if isinstance(answers, Mapping) else None
        if answer in (None, "", []):
            continue
        props = member["props"]
        question = str(
            next((props[k] for k in ("q", "label", "title", "prompt") if props.get(k)), "")
        )
        said = _answer_said(member["preset"], answer, props)
        if not question:
            lines.append(said)
        elif question.endswith(("?", ":")):
            lines.append(f"{question} {said}")
        else:
            lines.append(f"{question}: {said}")
    return "\n".join(lines) or "Sent"


def echo_of(
    preset: str,
    value: Mapping[str, Any],
    props: Mapping[str, Any],
    members: list[dict[str, Any]] | None = None,
) -> str | None:
    """What the person sees as their reply for this event (None: it stays hidden). The rules
    of the spec's plan fold: option text, picks joined with `, `, the slide's number, a form
    as `field: value` pairs, `Photo` for a camera; a new order as its items."""
    key = _ECHO_KEYS.get(preset)
    if key is not None and value.get(key) not in (None, ""):
        return _said(value[key])
    if preset == "pick" and isinstance(value.get("picked"), list):
        return _said(value["picked"])
    if preset == "gallery" and isinstance(value.get("picked"), list):
        caps = props.get("caps") or []
        names = [
            str(caps[i]) if isinstance(i, int) and 0 <= i < len(caps) and caps[i] else f"#{i + 1}"
            for i in value["picked"]
        ]
        return ", ".join(names) or None
    if preset == "camera" and value.get("photo"):
        return "Photo"
    if preset == "form" and isinstance(value.get("form"), Mapping):
        return _form_said(value["form"], props) or "Sent"
    if preset == "plan" and "plan" in value:
        return _plan_said(value, members or [])
    if preset in ("timeline", "storyboard") and isinstance(value.get("order"), list):
        return "New order: " + _said(value["order"])
    if preset == "calc" and "result" in value:
        return "= " + ("no result" if value["result"] is None else _said(value["result"]))
    edit = value.get("edit")
    if preset == "image" and isinstance(edit, Mapping) and edit.get("instruction"):
        return _said(edit["instruction"])
    if preset == "custom" and value.get("action"):
        return _said(value["action"])
    return None


async def event(call: Call) -> dict[str, Any]:
    """The event row a tap on an element of a message writes: `{body, meta, echo}` exactly as
    `yui app tap <id> <preset> … --echo <echo>` writes it."""
    element_id, preset, value = (call.body.get(k) for k in ("id", "preset", "value"))
    if not isinstance(element_id, str) or not isinstance(preset, str):
        raise Refusal(400, "invalid_event")
    if not isinstance(value, dict) or value_nesting(value) > MAX_DEPTH:
        raise Refusal(400, "invalid_event")
    build = _build(call.body.get("build"))
    part = call.body.get("part")
    if part is not None and (isinstance(part, bool) or not isinstance(part, int) or part < 0):
        raise Refusal(400, "invalid_event")
    row = await _readable_row(call)
    found = _element(row["body"], element_id, build, part) if row["sender"] == "agent" else None
    if found is None:
        raise Refusal(404, "no_such_element")
    element, ops = found
    if preset != element["preset"]:
        raise Refusal(400, "invalid_event")
    members = [op for op in ops if op["op"] == "add" and op.get("in") == element_id]
    echo = echo_of(preset, value, element["props"], members)
    if echo is not None:
        echo = echo[:ECHO_MAX]
    try:
        body = format_event_line(element_id, preset, value)
        meta = event_meta(element_id, preset, value, echo)
    except EventLineError:
        raise Refusal(400, "invalid_event") from None
    if len(body) > MAX_BODY or len(json.dumps(meta, ensure_ascii=False)) > META_MAX:
        raise Refusal(413, "too_large")
    return {"body": body, "meta": meta, "echo": echo}


ACTIONS: dict[str, Action] = {"screen": screen, "event": event}
