"""A position in one query parameter's text, and the tokens of PostgREST's grammar read from it.

Every failure is a PGRST100 that quotes the parameter and says what was wrong where.
"""

from __future__ import annotations

import re
from typing import NoReturn

from relay.gateway.rest_ast import Field, JsonStep
from relay.gateway.rest_http import grammar_error

_INDEX = re.compile(r"-?\d{1,9}")  # an array index: JSON arrays are never longer


class Cursor:
    """A position in one parameter's text; every failure names the parameter and the problem."""

    def __init__(self, what: str, text: str, shown: str | None = None) -> None:
        self.what = what
        self.text = text
        self.shown = text if shown is None else shown  # what the error message quotes
        self.pos = 0

    def fail(self, problem: str) -> NoReturn:
        raise grammar_error(self.what, self.shown, problem)

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self, token: str) -> bool:
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.take(token):
            found = repr(self.peek()) if not self.at_end() else "the end"
            self.fail(f"expected {token!r} but found {found}")

    def _name_char(self, index: int) -> bool:
        char = self.text[index]
        if char == "-":  # part of a name unless it starts an arrow
            return not self.text.startswith("->", index)
        return char.isalnum() or char in "_ $"

    def name(self) -> tuple[str, bool]:
        """A bare name (letters, digits, `_`, `$`, spaces, `-`) or a double-quoted one."""
        if self.peek() == '"':
            return self.quoted(), True
        start = self.pos
        while not self.at_end() and self._name_char(self.pos):
            self.pos += 1
        name = self.text[start : self.pos].strip()
        if not name:
            found = repr(self.peek()) if not self.at_end() else "the end"
            self.fail(f"expected a name but found {found}")
        return name, False

    def quoted(self) -> str:
        """A double-quoted string; a backslash escapes the next character."""
        self.expect('"')
        chars: list[str] = []
        while not self.at_end():
            char = self.text[self.pos]
            self.pos += 1
            if char == '"':
                return "".join(chars)
            if char == "\\" and not self.at_end():
                char = self.text[self.pos]
                self.pos += 1
            chars.append(char)
        self.fail("unterminated quoted string")

    def field(self) -> Field:
        """A column, optionally followed by a JSON path (`meta->turn`, `meta->a->>b`, `meta->0`)."""
        column, _ = self.name()
        steps: list[JsonStep] = []
        while self.text.startswith("->", self.pos):
            if steps and steps[-1].arrow == "->>":
                self.fail("->> must be the last step of a JSON path")
            arrow = "->>" if self.text.startswith("->>", self.pos) else "->"
            self.pos += len(arrow)
            key, quoted = self.name()
            if not quoted and re.fullmatch(r"-?\d+", key) and not _INDEX.fullmatch(key):
                self.fail(f"the array index {key[:12]}… is too large")
            index = not quoted and _INDEX.fullmatch(key)
            steps.append(JsonStep(arrow, int(key) if index else key))
        return Field(column, tuple(steps))

    def refuse_embedding(self) -> None:
        """A filter or an order names a column of its own rows; an embedded resource is named
        by a `name.` prefix on the key (`yui_agents.name=eq.x`), not `name(...)`."""
        if self.peek() in ("(", "!"):
            self.fail("embedded resources can't be filtered or ordered by here")

    def bracketed(self) -> str:
        """A `{...}` or `[...]` value taken whole, so commas inside it don't split a logic tree."""
        start, depth, in_string = self.pos, 0, False
        while not self.at_end():
            char = self.text[self.pos]
            self.pos += 1
            if in_string:
                if char == "\\":
                    self.pos += 1
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
                if depth == 0:
                    return self.text[start : self.pos]
        self.fail("unbalanced brackets in value")

    def rest(self) -> str:
        start, self.pos = self.pos, len(self.text)
        return self.text[start:]

    def until(self, stops: str) -> str:
        start = self.pos
        while not self.at_end() and self.text[self.pos] not in stops:
            self.pos += 1
        return self.text[start : self.pos]

    def in_list(self) -> tuple[str, ...]:
        """`(a,b,"c,d")`: quoted items may hold commas and parentheses."""
        if not self.take("("):
            self.fail("an in list must be enclosed in parentheses, as in in.(a,b)")
        items: list[str] = []
        if self.take(")"):
            return ()
        while True:
            if self.peek() == '"':
                items.append(self.quoted())
            else:
                items.append(self.until(",)"))
            if self.take(")"):
                return tuple(items)
            if not self.take(","):
                self.fail("malformed in list: expected ',' or ')' after an item")
