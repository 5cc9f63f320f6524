"""Gate a reply for the app build that will draw it (ref-client §4.6).

Before a bridge writes a reply, each ```yui fence is read and what the phone's build cannot
draw is turned into something it can: a gated preset (with its group's members, or its block
up to `end`) becomes plain words outside the fence, or, inside a deck or plan, a `page` whose
points are the rows; a flow with a chart becomes a plan of its steps; a `menu` line is dropped
silently, and so is a patch of a gated preset and a shape mark (venn, doodle, …) before build
492; below build 158, math/chart/stat/calc/shapes pictures move out of their deck. Text outside
the fences is never touched. The names of what was gated go into one `[yui] ` note line on the
agent's next turn, so it stops sending them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yuilines.catalogue import BLOCKS, ROW_KINDS
from yuilines.fences import Fence, build_fence, find_fences, splice
from yuilines.flows import step_texts
from yuilines.gates import (
    DECK_PICTURES,
    DECK_PICTURES_BUILD,
    MADE_OVER,
    MARK_KINDS,
    MARKS_BUILD,
    MIN_BUILD,
    draws,
)
from yuilines.parser import parse

Op = dict[str, Any]
# Group members: alone (outside their group) each is one line of words.
_LEAVES = frozenset(("row", "shape", "part", "area", "pin", "route", *ROW_KINDS))


@dataclass(frozen=True, slots=True)
class Gated:
    """The reply as it may be sent, and the names to put in the agent's next note line."""

    text: str
    gated: tuple[str, ...]


@dataclass
class _Unit:
    """A gated preset with everything that goes with it: members, block lines up to `end`."""

    head: Op
    page: bool
    members: list[Op] = field(default_factory=list)
    last: int = 0
    patch: Op | None = None


def gate_name(op: Op) -> str | None:
    """The MIN_BUILD row an op answers to (None for ops every build draws)."""
    if op["op"] == "add":
        return str(op["preset"])
    return {"table": "table create", "put": "put", "menu": "menu"}.get(op["op"])


def gate_reply(text: str, build: int | None, known: Mapping[str, str] | None = None) -> Gated:
    """The reply with every fence made drawable by `build` (None: unknown, older than all).
    `known` maps lasting ids from earlier replies to their presets, as the parser takes it."""
    replacements: dict[Fence, str] = {}
    names: set[str] = set()
    for fence in find_fences(text):
        new = _gate_fence(text, fence, build, known or {}, names)
        if new is not None:
            replacements[fence] = new
    return Gated(splice(text, replacements), tuple(sorted(names)))


def turn_note(build: int | None, gated: tuple[str, ...] | list[str]) -> str | None:
    """The one `[yui] ` line for the agent's next turn, or None when nothing was gated."""
    if not gated:
        return None
    app = f"build {build}" if build is not None else "an older build"
    return (
        f"[yui] This person's Yui app ({app}) cannot draw {', '.join(sorted(gated))} yet: "
        "don't send those; say it in words or use another preset."
    )


def _gate_fence(
    text: str, fence: Fence, build: int | None, known: Mapping[str, str], names: set[str]
) -> str | None:
    body = fence.body(text)
    lines = body.split("\n")
    if body.endswith("\n"):
        lines.pop()
    ops = parse(body, known)
    presets = {**known, **{op["id"]: op["preset"] for op in ops if op["op"] == "add"}}
    units: dict[int, _Unit] = {}
    unit_of: dict[str, _Unit] = {}
    owner: dict[int, _Unit | None] = {}  # line -> the unit it belongs to; None: dropped
    for op in ops:
        line = op["line"]
        name = gate_name(op)
        unit = unit_of.get(op.get("in", "")) or unit_of.get(op.get("target", ""))
        if unit is not None and (op["op"] in ("add", "end") or _closes_block(op, unit)):
            if op["op"] == "add":
                unit.members.append(op)
                unit_of[op["id"]] = unit
            unit.last = max(unit.last, line)
            unit.patch = op if op["op"] == "patch" else unit.patch
            continue
        target: str = op.get("target", "")
        if op["op"] == "patch" and (unit or not draws(presets.get(target, target), build)):
            owner[line] = None
        elif op.get("preset") == "shape" and not _draws_kind(op, build):
            owner[line] = None
            names.add(f"shape {op['props']['kind']}")
        elif name is not None and not draws(name, build):
            if op["op"] != "add":
                owner[line] = None
                if not MIN_BUILD[name].quiet:
                    names.add(name)
                continue
            parent = presets.get(op.get("in", ""))
            unit = _Unit(op, page=parent in ("deck", "plan"), last=line)
            units[line] = unit_of[op["id"]] = unit
            if name not in MADE_OVER:
                names.add(name)
    for unit in units.values():
        if unit.head["preset"] in MADE_OVER and not _made_over(unit, lines):
            names.add(unit.head["preset"])
    by_line: dict[int, list[Op]] = {}
    for op in ops:
        by_line.setdefault(op["line"], []).append(op)
    for unit in units.values():
        for line in range(unit.head["line"], unit.last + 1):
            mine = (op["op"] == "error" or _in(op, unit, unit_of) for op in by_line.get(line, []))
            if all(mine):
                owner.setdefault(line, unit)
    lifted = _lifts(ops, owner) if build is None or build < DECK_PICTURES_BUILD else {}
    if not owner and not lifted:
        return None
    return _rebuild(text, fence, lines, units, owner, lifted)


def _closes_block(op: Op, unit: _Unit) -> bool:
    """The patch a block head's `end` sends (not a later `~id` patch of the same head)."""
    return (
        op["op"] == "patch"
        and unit.patch is None
        and unit.head["preset"] in BLOCKS
        and op["target"] == unit.head["id"]
        and unit.last == unit.head["line"]
    )


def _draws_kind(op: Op, build: int | None) -> bool:
    kind = str(op["props"].get("kind", "")).lower()
    return kind not in MARK_KINDS or (build is not None and build >= MARKS_BUILD)


def _in(op: Op, unit: _Unit, unit_of: Mapping[str, _Unit]) -> bool:
    key = op.get("id") if op["op"] == "add" else op.get("target")
    return unit_of.get(key or "") is unit


def _lifts(ops: list[Op], owner: Mapping[int, _Unit | None]) -> dict[int, list[int]]:
    """Older builds end a deck at a math/chart/stat/calc/shapes picture: those lines (with
    their own members) move to just after the deck's last line. Maps that line to them."""
    lifts: dict[int, list[int]] = {}
    for deck in (op for op in ops if op["op"] == "add" and op["preset"] == "deck"):
        inside = {deck["id"]}
        span = [deck["line"]]
        moving: list[int] = []
        picture_ids: set[str] = set()
        for op in ops:
            parent = op.get("in") if op["op"] == "add" else None
            if parent in inside:
                inside.add(op["id"])
                span.append(op["line"])
                if parent == deck["id"] and op["preset"] in DECK_PICTURES:
                    picture_ids.add(op["id"])
                if (op["id"] in picture_ids or parent in picture_ids) and op["line"] not in owner:
                    picture_ids.add(op["id"])
                    moving.append(op["line"])
            elif op["op"] == "end" and op["target"] == deck["id"]:
                span.append(op["line"])
        staying = [n for n in span if n not in moving]
        if moving:
            lifts[max(staying)] = moving
    return lifts


def _rebuild(
    text: str,
    fence: Fence,
    lines: list[str],
    units: Mapping[int, _Unit],
    owner: Mapping[int, _Unit | None],
    lifted: Mapping[int, list[int]],
) -> str:
    moving = {n for moved in lifted.values() for n in moved}
    pieces: list[tuple[str, list[str]]] = []
    current: list[str] = []
    for number, line in enumerate(lines, start=1):
        unit = units.get(number)
        if unit is not None and unit.head["preset"] in MADE_OVER and _made_over(unit, lines):
            current.extend(_made_over(unit, lines))
        elif unit is not None and not unit.page:
            pieces += [("yui", current), ("words", _words(unit))]
            current = []
        elif unit is not None:
            current.append(_page_line(unit))
        elif number not in owner and number not in moving:
            current.append(line)
        current.extend(lines[moved - 1] for moved in lifted.get(number, []))
    pieces.append(("yui", current))
    kept = [piece for piece in pieces if piece[0] == "words" or _draws(piece[1])]
    out: list[str] = []
    for i, (kind, body) in enumerate(kept):
        if kind == "words":
            # Blank lines keep the words their own paragraph next to the reply's own words.
            lead = text[: fence.start]
            gap = i == 0 and lead.strip() != "" and not lead.endswith("\n\n")
            before = "\n" if gap else ""
            after = "\n" if i < len(kept) - 1 or text[fence.end :].strip() else ""
            out.append(before + "".join(f"{line}\n" for line in body) + after)
            continue
        last_open = i == len(kept) - 1 and fence.closer is None
        out.append(build_fence(body, fence.opener, None if last_open else fence.closer or "```"))
    new = "".join(out)
    if not text[fence.start : fence.end].endswith("\n") and new.endswith("\n"):
        new = new[:-1]
    return new


def _draws(lines: list[str]) -> bool:
    """Whether a piece of fence has any line left that is more than blank or a comment."""
    return any(s and s != "#" and not s.startswith("# ") for s in (ln.strip() for ln in lines))


def _row_text(op: Op, marks: bool) -> str:
    props = op["props"]
    text = str(props.get("text") or props.get("label") or props.get("title") or "")
    text = text or str(props.get("kind") or "")
    if marks and text:
        if props.get("x") is True:
            text = f"~~{text}~~"
        if props.get("hi") is True or props.get("button") is True:
            text = f"**{text}**"
    if op["preset"] in ROW_KINDS:
        text = f"{op['preset'].capitalize()}: {text}"
    for key in ("at", "note"):
        if props.get(key):
            text += f" ({props[key]})"
    return text


def _title(op: Op) -> str:
    props = op["props"]
    return str(props.get("title") or props.get("label") or props.get("text") or "")


def _words(unit: _Unit) -> list[str]:
    """A gated preset as plain chat words: a bold title, then its rows as a list."""
    head, title = unit.head, _title(unit.head)
    if not unit.members:
        if head["preset"] == "after":
            return [f"{head['props'].get('label', 'After')}:"]
        if head["preset"] in _LEAVES:
            return [f"- {_row_text(head, True)}"]
        lead = f"**{title}**: " if title else ""
        return [f"{lead}There's a {head['preset']} here. Update Yui to see it."]
    out = [f"**{title}**"] if title else []
    if any(m["preset"] == "after" for m in unit.members):
        out.append(f"{head['props'].get('before', 'Before')}:")
    for member in unit.members:
        if member["preset"] == "after":
            out.append(f"{member['props'].get('label', 'After')}:")
        else:
            out.append(f"- {_row_text(member, True)}")
    return out


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _page_line(unit: _Unit) -> str:
    """A gated picture inside a deck or plan: a page whose points are its rows."""
    title = _title(unit.head) or unit.head["preset"].capitalize()
    points = [_row_text(m, False) for m in unit.members if m["preset"] != "after"]
    if points:
        return f"page {_quote(title)} points=" + "|".join(_quote(p) for p in points)
    return f"page {_quote(title)} body={_quote('Update Yui to see this picture.')}"


def _made_over(unit: _Unit, lines: list[str]) -> list[str]:
    """An inline flow as a plan of its steps, in the order the chart names them (a build that
    can't run a flow still asks every question); [] when there is no chart to walk."""
    nodes = (unit.patch or {}).get("props", {}).get("nodes", [])
    body = lines[unit.head["line"] : unit.last]
    if body and body[-1].strip() == "end":
        body = body[:-1]
    steps = step_texts(body)
    members = []
    for node in nodes:
        text = steps.get(node["id"])
        if text is not None:
            word, _, rest = text.strip().partition(" ")
            members.append(f"{word}@{node['id']} {rest}".rstrip() if "@" not in word else text)
    if not members:
        return []
    head = unit.head
    at = "" if re.fullmatch(r"[nc]\d+", head["id"]) else f"@{head['id']}"
    extras = [f"{k}={_quote(str(head['props'][k]))}" for k in ("submit",) if k in head["props"]]
    title = head["props"].get("title")
    plan = " ".join([f"plan{at}", *([_quote(str(title))] if title else []), *extras])
    return [plan, *members, "end"]
