"""Yui Lines to ops, whole or streamed (ref-specs §1.2, §1.5–§1.8, §1.15).

Each line is read alone into ops, in order, each carrying its 1-based `line`; a bad line is an
`error` op with a `message` and the lines after it still parse. What carries over between lines
is small: the focused screen, the open groups, this reply's ids and the auto-id counter, and an
open block (a diagram, drawing, flow or motion whose raw lines run up to `end`).

Whatever an agent writes, a line costs a bounded amount and never raises (`yuilines.limits`): a
line longer than MAX_LINE is an error op (streamed, no more of it than that is kept while it
arrives), and so is a `custom` line whose JSON nests deeper than MAX_DEPTH.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yuilines import catalogue as cat
from yuilines import core, flows, mermaid
from yuilines import props_data as _registers_readers  # noqa: F401
from yuilines.limits import MAX_DEPTH, MAX_LINE, MAX_MESSAGE, json_nesting
from yuilines.props import LineError, read
from yuilines.tokens import ID_RE

Op = dict[str, Any]

_ROUTE = re.compile(r">([A-Za-z0-9_-]+)(?=\s|$)")
_SCENE = re.compile(r"===\s*scene\b.*===")
_TOO_LONG = f"a line holds at most {MAX_LINE} characters"


@dataclass(slots=True)
class _Group:
    preset: str
    id: str
    screen: str


@dataclass(slots=True)
class _Block:
    """An open block preset: waiting for its first line, then collecting raw lines."""

    preset: str
    id: str
    screen: str
    variant: bool = False
    started: bool = False
    depth: int = 0
    lines: list[tuple[int, str]] = field(default_factory=list)


class Parser:
    """A stream parser: `feed` any chunks, get each line's ops when its newline arrives;
    `flush` reads a last line without one and closes an open block."""

    def __init__(self, known: Mapping[str, str] | None = None) -> None:
        self.known = dict(known or {})
        self.ids: dict[str, str] = {}
        self.counter = 0
        self.focus = "1"
        self.groups: list[_Group] = []
        self.block: _Block | None = None
        self.lineno = 0
        # The line arriving: its pieces, at most MAX_LINE + 2 characters (a "\r" at its end is
        # not part of it), enough to tell a line that is too long however much more comes.
        self._pieces: list[str] = []
        self._held = 0

    def feed(self, chunk: str) -> list[Op]:
        *whole, rest = chunk.split("\n")
        ops: list[Op] = []
        for piece in whole:
            self._hold(piece)
            ops.extend(self._next_line())
        self._hold(rest)
        return ops

    def flush(self) -> list[Op]:
        ops: list[Op] = []
        if self._held:
            ops.extend(self._next_line())
        if self.block is not None:
            ops.extend(self._end_block(self.lineno))
        return ops

    def _hold(self, piece: str) -> None:
        room = MAX_LINE + 2 - self._held
        if piece and room > 0:
            self._pieces.append(piece[:room])
            self._held += min(len(piece), room)

    def _next_line(self) -> list[Op]:
        text = "".join(self._pieces)
        self._pieces, self._held = [], 0
        return self.line(text)

    def line(self, text: str) -> list[Op]:
        """The ops of one whole line (without its newline)."""
        self.lineno += 1
        if text.endswith("\r"):
            text = text[:-1]
        if self.block is not None:
            return self._block_line(text, self.lineno)
        return self._yl(text, self.lineno)

    # Plain lines.

    def _yl(self, text: str, lineno: int) -> list[Op]:
        if len(text) > MAX_LINE:
            return [self._error(self.focus, lineno, _TOO_LONG)]
        s = text.strip()
        if not s or s == "#" or s.startswith(("# ", "#\t")):
            return []
        screen = self.focus
        if s.startswith(">"):
            m = _ROUTE.match(s)
            if not m:
                return [self._error(screen, lineno, "a route is >screen with no space")]
            name, rest = m.group(1), s[m.end() :].strip()
            if not rest or rest == "#" or rest.startswith("# "):
                return [self._focus(name, lineno)]
            screen, s = ("1" if name == "chat" else name), rest
        try:
            return self._statement(s, screen, lineno)
        except LineError as exc:
            return [self._error(screen, lineno, str(exc))]

    def _focus(self, name: str, lineno: int) -> Op:
        if name == "chat":
            self.focus = "1"
            self.groups.clear()
            return {"op": "close", "screen": "full", "line": lineno}
        self.focus = name
        return {"op": "focus", "screen": name, "line": lineno}

    def _statement(self, s: str, screen: str, lineno: int) -> list[Op]:
        head = s.split(maxsplit=1)[0]
        start = len(head)
        if head.startswith('"'):
            raise LineError("a line starts with a preset name, not a quote")
        if head.startswith("~"):
            return [self._patch(head[1:], s, start, screen, lineno)]
        name, at, ident = head.partition("@")
        if at and not ID_RE.fullmatch(ident):
            raise LineError(f"bad id {ident!r}: use letters, digits, '_' or '-'")
        if name in cat.CORE_WORDS or (name == "table" and _second_word(s) == "create"):
            if at:
                raise LineError(f"{name} takes no @id")
            return [self._core(name, s, start, screen, lineno)]
        if name not in cat.PRESETS:
            raise LineError(f"unknown preset {name!r}")
        props = {"spec": _json(s[start:])} if name == "custom" else read(name, s, start)
        if at:
            element_id = ident
        else:
            self.counter += 1
            element_id = f"{'c' if name == 'custom' else 'n'}{self.counter}"
        op: Op = {"op": "add", "screen": screen, "preset": name, "id": element_id}
        op["props"] = props
        op["line"] = lineno
        self.ids[element_id] = name
        self._place(op)
        if name in cat.BLOCKS:
            self._open_block(op)
        return [op]

    def _core(self, name: str, s: str, start: int, screen: str, lineno: int) -> Op:
        if name == "end":
            if self.groups and self.groups[0].screen != screen:
                self.groups.clear()
            if not self.groups:
                raise LineError("end with no group open")
            return {"op": "end", "screen": screen, "target": self.groups.pop().id, "line": lineno}
        if name == "table":
            op = core.table_create(s, s.index("create", start) + len("create"))
        else:
            op = core.READERS[name](s, start)
        if name == "close":
            screen, self.focus = "full", "1"
        if name not in cat.KEEP_GROUP:
            self.groups.clear()
        return {"op": op.pop("op"), "screen": screen, **op, "line": lineno}

    def _patch(self, word: str, s: str, start: int, screen: str, lineno: int) -> Op:
        name, at, ident = word.partition("@")
        if not name:
            raise LineError("~ needs an id or a preset name")
        if at:
            if name not in cat.PRESETS or not ID_RE.fullmatch(ident):
                raise LineError(f"~{word}: unknown preset or bad id")
            made = self.ids.get(ident, self.known.get(ident))
            if made is not None and made != name:
                raise LineError(f"{ident} is a {made}, not a {name}")
            target, preset = (ident if made else name), name
        elif name in cat.PRESETS:
            target, preset = name, name
        elif name in self.ids or name in self.known:
            target, preset = name, self.ids.get(name) or self.known[name]
        else:
            raise LineError(f"~{name}: no such id in this reply or earlier, and not a preset")
        if preset == "custom":
            raise LineError("a custom block cannot be patched")
        props = read(preset, s, start)
        if preset in cat.ROW_KINDS and "kind" in props:
            kind = props["kind"]
            if kind not in cat.ROW_KINDS:
                raise LineError("kind= moves a row: done, now or next")
            if target != preset:
                (self.ids if target in self.ids else self.known)[target] = kind
        self.groups.clear()
        return {"op": "patch", "screen": screen, "target": target, "props": props, "line": lineno}

    def _place(self, op: Op) -> None:
        """Join the innermost open group that takes this preset; close the ones that don't."""
        preset = op["preset"]
        if self.groups and self.groups[0].screen != op["screen"]:
            self.groups.clear()
        while self.groups:
            top = self.groups[-1]
            if preset in cat.MEMBERS[top.preset]:
                op["in"] = top.id
                break
            self.groups.pop()
        if preset in cat.MEMBERS:
            self.groups.append(_Group(preset, op["id"], op["screen"]))

    def _error(self, screen: str, lineno: int, message: str) -> Op:
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 1] + "…"
        return {"op": "error", "screen": screen, "message": message, "line": lineno}

    # Blocks.

    def _open_block(self, op: Op) -> None:
        variant = op["preset"] == "flow" and "as" in op["props"]
        self.block = _Block(op["preset"], op["id"], op["screen"], variant, started=variant)

    def _block_line(self, text: str, lineno: int) -> list[Op]:
        block = self.block
        assert block is not None
        if len(text) > MAX_LINE:
            if not block.started:  # not the block's first line: the head was plain YL
                return self._abandon(lineno, text)
            return [self._error(block.screen, lineno, _TOO_LONG)]
        s = text.strip()
        if not block.started:
            if not s or (s.startswith("%%") and block.preset in ("diagram", "flow")):
                block.lines.append((lineno, text))
                return []
            if not self._opens(block.preset, s):
                return self._abandon(lineno, text)
            block.started = True
            if block.preset in ("draw", "motion"):
                block.lines = []
        if s == "end":
            if block.depth == 0:
                return self._end_block(lineno)
            block.depth -= 1
        elif not block.variant and block.preset in ("diagram", "flow"):
            first = s.split(maxsplit=1)[0] if s else ""
            if first == "subgraph" or first in mermaid.SEQUENCE_BLOCKS:
                block.depth += 1
        block.lines.append((lineno, text))
        return []

    @staticmethod
    def _opens(preset: str, s: str) -> bool:
        first = s.split(maxsplit=1)[0]
        if preset == "diagram":
            return first in cat.MERMAID_HEADERS
        if preset == "flow":
            return first in cat.MERMAID_FLOW
        if preset == "draw":
            return s.startswith("<")
        return bool(_SCENE.fullmatch(s))

    def _abandon(self, lineno: int, text: str) -> list[Op]:
        """The head had no block after it: the waiting lines and this one are plain YL."""
        block, self.block = self.block, None
        ops: list[Op] = []
        for waiting_no, waiting in [*(block.lines if block else []), (lineno, text)]:
            ops.extend(self._yl(waiting, waiting_no))
        return ops

    def _end_block(self, lineno: int) -> list[Op]:
        block, self.block = self.block, None
        if block is None:
            return []
        if not block.started:
            ops: list[Op] = []
            for waiting_no, waiting in block.lines:
                ops.extend(self._yl(waiting, waiting_no))
            return ops
        texts = [t for _, t in block.lines]
        errors: flows.Errors = []
        if block.preset == "diagram":
            props = mermaid.diagram(texts)
        elif block.preset == "flow":
            read_flow = flows.variant if block.variant else flows.graph
            props, errors = read_flow(block.lines)
        else:
            props = {"source": "\n".join(texts)}
        ops = [self._error(block.screen, n, message) for n, message in errors]
        patch = {"op": "patch", "screen": block.screen, "target": block.id, "props": props}
        ops.append({**patch, "line": lineno})
        return ops


def _second_word(s: str) -> str:
    parts = s.split(maxsplit=2)
    return parts[1] if len(parts) > 1 else ""


def _json(rest: str) -> Any:
    text = rest.strip()
    if not text:
        raise LineError("custom needs JSON after it")
    if json_nesting(text) > MAX_DEPTH:
        raise LineError(f"custom JSON nests deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise LineError(f"custom JSON does not parse: {exc}") from None


def parse(text: str, known: Mapping[str, str] | None = None) -> list[Op]:
    """All ops of a block of Yui Lines (the inside of one fence)."""
    parser = Parser(known)
    ops = parser.feed(text)
    ops.extend(parser.flush())
    return ops
