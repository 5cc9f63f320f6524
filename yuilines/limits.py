"""What one line of an agent's reply, or one event, may cost to read.

A reply comes from a program the person doesn't control, and Python's JSON reader and writer
recurse: 1,200 nested `[` in a `custom` line once raised RecursionError inside the bridge and
wedged the agent. So every size and depth that grows the work is bounded here, checked before
the work starts, and what passes a bound is reported the reader's normal way (an `error` op, an
EventLineError), never raised as anything else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# Characters in one Yui Lines line at most: the relay's limit for a whole message, so no line a
# phone reads is longer. Every reader of a line is linear, or close to it, up to this.
MAX_LINE = 32_000
# Arrays and objects nested in a `custom` line's JSON, or in an event's value, at most (a
# screen of v0 primitives nests two levels per stack or row; a form's value, two or three).
MAX_DEPTH = 64
# Characters of a bad line's message at most: it may quote the line's words.
MAX_MESSAGE = 200

_JSON_MARKS = re.compile(r'[\[\]{}"\\]')


def json_nesting(text: str) -> int:
    """How deep arrays and objects nest in `text` read as JSON (brackets inside strings don't
    count), without reading it; it stops counting past MAX_DEPTH. Whether the JSON is valid
    is for `json.loads` to say."""
    depth = deepest = 0
    in_string = False
    at = 0
    while deepest <= MAX_DEPTH and (mark := _JSON_MARKS.search(text, at)):
        ch, at = mark.group(), mark.end()
        if in_string:
            if ch == "\\":
                at += 1  # the escaped character, whatever it is
            in_string = ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def value_nesting(value: Any) -> int:
    """How deep mappings and lists nest in a value tree (a scalar is 0), without recursing; it
    stops counting past MAX_DEPTH."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo and deepest <= MAX_DEPTH:
        node, depth = todo.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, Sequence) and not isinstance(node, str | bytes | bytearray):
            children = node
        else:
            continue
        deepest = max(deepest, depth + 1)
        todo.extend((child, depth + 1) for child in children)
    return deepest
