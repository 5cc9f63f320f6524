"""Event lines read back: formatting any value tree, then parsing the line, gives it back.

The value trees are the ones an event line can carry (the line format itself cannot tell some
values apart; those are pinned below as examples of how they read).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yuilines.events import EventLineError, format_event_line, parse_event_line

_LOOKS_TYPED = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|true|false")

keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True)
element_ids = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True)
presets = st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True)

# Words with the characters that need care: quotes, pipes, equals, backslashes, spaces, tabs,
# line breaks, emoji and other scripts.
tricky = st.sampled_from(list(' "|=\\\t\n\r,.:{}#@+-💪é中'))
texts = st.lists(st.one_of(tricky, st.characters(codec="utf-8")), max_size=12).map("".join)
words = texts.filter(lambda t: not _LOOKS_TYPED.fullmatch(t))
list_words = words.filter(lambda t: "," not in t)
numbers = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)
scalars = st.one_of(st.just(True), st.just(False), numbers, words)
list_items = st.one_of(
    st.just(True),
    st.just(False),
    numbers,
    list_words,
    st.lists(numbers, min_size=2, max_size=4),  # an image edit's path: [[x, y], ...]
)
leaves = st.one_of(scalars, st.lists(list_items, min_size=2, max_size=5))
trees = st.recursive(
    st.dictionaries(keys, leaves, min_size=1, max_size=4),
    lambda inner: st.dictionaries(keys, st.one_of(leaves, inner), min_size=1, max_size=4),
    max_leaves=12,
)


@given(element_ids, presets, trees)
def test_format_then_parse_gives_the_tree_back(element_id: str, preset: str, tree: Any) -> None:
    line = format_event_line(element_id, preset, tree)
    assert "\n" not in line
    assert parse_event_line(line) == (element_id, preset, tree)


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ('[yui] n1 ask answer="Not now"', {"answer": "Not now"}),
        ("[yui] hiit timer done rounds=8", {"done": True, "rounds": 8}),
        ("[yui] n3 pick picked=Dumbbells|Bands", {"picked": ["Dumbbells", "Bands"]}),
        (
            '[yui] n1 form form.mood=4 form.notes="slept badly"',
            {"form": {"mood": 4, "notes": "slept badly"}},
        ),
        (
            "[yui] n1 plan plan.who.first=Maya plan.agents=Penny|Basil",
            {"plan": {"who": {"first": "Maya"}, "agents": ["Penny", "Basil"]}},
        ),
        (
            '[yui] n3 pick picked="Pull-up bar"|Bands|"a|b"',
            {"picked": ["Pull-up bar", "Bands", "a|b"]},
        ),
        ("[yui] n1 image edit.path=1,2|3.5,4", {"edit": {"path": [[1, 2], [3.5, 4]]}}),
        ('[yui] n1 ask answer="say \\"hi\\" \\\\ \\n"', {"answer": 'say "hi" \\ \n'}),
        ("[yui] c1 camera photo=u1/a1/user/5f2c.jpg", {"photo": "u1/a1/user/5f2c.jpg"}),
    ],
)
def test_the_spec_lines_read_back(line: str, value: dict[str, Any]) -> None:
    assert parse_event_line(line)[2] == value


@pytest.mark.parametrize(
    ("value", "reads_as"),
    [
        ({"o": []}, {"o": ""}),  # an empty list and an empty string both write `o=`
        ({"x": [5]}, {"x": 5}),  # a list of one item writes as the item
        ({"answer": "5"}, {"answer": 5}),  # a bare word that looks like a number
        ({"answer": "true"}, {"answer": True}),
        ({"result": None, "ok": False}, {"ok": False}),  # None is left out
        ({"box": [[1, 2]]}, {"box": "1,2"}),
    ],
)
def test_what_the_line_cannot_tell_apart(value: dict[str, Any], reads_as: dict[str, Any]) -> None:
    assert parse_event_line(format_event_line("n1", "game", value))[2] == reads_as


@pytest.mark.parametrize(
    "line", ["", "hello", "[yui]", "[yui] n1", "[yui] n 1 ask", "[yui] n1 Ask"]
)
def test_lines_that_are_not_event_lines(line: str) -> None:
    with pytest.raises(EventLineError):
        parse_event_line(line)
