"""Fuzzing event lines (`yuilines/events.py`): formatting any value tree gives exactly one line
or EventLineError (for a bad id or preset), and reading any text back gives a tree or
EventLineError.

The round trip (format, then parse, gives the tree back) is `test_event_roundtrip.py`'s; here only
"never anything but the documented error" and "always one line". The regression tests at the end
pin what the fuzz found, now fixed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.fuzzing import DEPTHS, TRICKY, deep_value, fuzz_settings, tricky_text
from yuilines.events import EventLineError, event_meta, format_event_line, parse_event_line
from yuilines.limits import MAX_DEPTH

EXAMPLES = 300

# Characters str.splitlines() breaks on besides \n and \r (which the formatter escapes).
OTHER_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
LINE_BREAKS = "\n\r" + OTHER_LINE_BREAKS


# --- value trees ------------------------------------------------------------------------------

good_keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True)
keys = st.one_of(good_keys, good_keys, tricky_text)  # odd keys: EventLineError (finding E1)
texts = tricky_text  # Unicode line breaks included (finding E2)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and infinities included
    st.sampled_from([0, -0.0, 4.0, 1e16, 1e-7, 2**53 + 1]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)


def trees(
    max_leaves: int = 16, key_strategy: st.SearchStrategy[str] = keys
) -> st.SearchStrategy[dict[str, Any]]:
    """Nested dicts and lists, as the app's values are (lists of lists, objects in lists)."""
    values = st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(key_strategy, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )
    return st.dictionaries(key_strategy, values, max_size=5)


element_ids = st.one_of(
    st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True),
    tricky_text,
)
presets = st.one_of(st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True), tricky_text)


_ID = re.compile(r"[A-Za-z0-9_-]+")
_PRESET = re.compile(r"[a-z][a-z0-9_-]*")
_KEY = re.compile(r"[A-Za-z_][\w-]*")


def _all_keys(value: Any) -> list[str]:
    """Every key in a value tree, at any depth (lists included)."""
    if isinstance(value, dict):
        return [*value, *(k for v in value.values() for k in _all_keys(v))]
    if isinstance(value, list):
        return [k for v in value for k in _all_keys(v)]
    return []


def assert_one_line(line: str, element_id: str, preset: str) -> None:
    assert isinstance(line, str)
    assert "\n" not in line and "\r" not in line, repr(line)
    assert line.splitlines() == [line], repr(line)
    assert line.startswith(f"[yui] {element_id} {preset}")


@fuzz_settings(EXAMPLES)
@given(element_id=element_ids, preset=presets, value=trees())
def test_formatting_any_tree_gives_one_line_or_bad_input(
    element_id: str, preset: str, value: dict[str, Any]
) -> None:
    """One line whatever the values hold; EventLineError only for a bad id, preset (or key)."""
    try:
        line = format_event_line(element_id, preset, value)
    except EventLineError as exc:
        assert str(exc).strip()
        assert not (_ID.fullmatch(element_id) and _PRESET.fullmatch(preset)) or any(
            not _KEY.fullmatch(key) for key in _all_keys(value)
        ), f"refused a good head and good keys: {exc}"
        return
    assert_one_line(line, element_id, preset)
    assert event_meta(element_id, preset, value)["value"] == value


# --- reading lines back -----------------------------------------------------------------------

words = st.one_of(
    tricky_text,
    st.builds(lambda k, v: f"{k}={v}", good_keys | tricky_text, tricky_text),
    st.builds(
        lambda k, v: f'{k}="{v}"', good_keys, tricky_text.map(lambda t: t.replace('"', '\\"'))
    ),
    st.builds(lambda k, v: f"{k}={'|'.join(v)}", good_keys, st.lists(tricky_text, max_size=4)),
    st.builds(lambda a, b: f"{a}.{b}={a}", good_keys, good_keys),
    st.builds(
        lambda a, v, b: f"{a}{v} {a}.{b}", good_keys, st.sampled_from(["", "=1", '="x"']), good_keys
    ),
    st.sampled_from([*TRICKY, "n=" + "9" * 4400, "n=1|" + "9" * 4400]),
)
heads = st.one_of(
    st.just("[yui] n1 choose"),
    st.builds(lambda i, p: f"[yui] {i} {p}", element_ids, presets),
    tricky_text,
)


@st.composite
def lines(draw: st.DrawFn) -> str:
    """Event-line-like text: a head, words, or a formatted line with a piece changed."""
    kind = draw(st.sampled_from(["words", "words", "mutated", "text"]))
    if kind == "text":
        return draw(st.text(max_size=60) | tricky_text)
    if kind == "words":
        separator = draw(st.sampled_from([" ", " ", "  ", "\t"]))
        return separator.join([draw(heads), *draw(st.lists(words, max_size=6))])
    line = format_event_line("n1", "form", draw(trees(8, good_keys)))
    at = draw(st.integers(0, len(line)))
    cut = draw(st.integers(0, 3))
    return line[:at] + draw(st.sampled_from(TRICKY)) + line[at + cut :]


@fuzz_settings(EXAMPLES)
@given(line=lines())
def test_reading_any_text_gives_a_tree_or_bad_input(line: str) -> None:
    """(id, preset, dict) for an event line; EventLineError for anything else."""
    try:
        element_id, preset, tree = parse_event_line(line)
    except EventLineError as exc:
        assert str(exc).strip()
        return
    assert isinstance(element_id, str) and isinstance(preset, str)
    assert isinstance(tree, dict)


# --- regression tests for the findings --------------------------------------------------------


@pytest.mark.parametrize(
    "value", [{"a\nb": 1}, {"form": {"x\ry": "z"}}, {"a\u2028b": True}, {"ok": {"k\n": [1]}}]
)
def test_e1_a_key_with_a_line_break_is_refused_or_kept_on_one_line(value: dict[str, Any]) -> None:
    try:
        line = format_event_line("n1", "form", value)
    except EventLineError:
        return
    assert_one_line(line, "n1", "form")


@pytest.mark.parametrize("char", list(OTHER_LINE_BREAKS))
def test_e2_a_value_with_a_unicode_line_break_stays_one_line(char: str) -> None:
    line = format_event_line("n1", "ask", {"answer": f"one{char}two"})
    assert_one_line(line, "n1", "ask")


def test_e4_a_huge_int_is_written_or_refused() -> None:
    try:
        line = format_event_line("n1", "slide", {"value": 10**5000})
    except EventLineError:
        return
    assert_one_line(line, "n1", "slide")


@pytest.mark.parametrize(
    "line", ["[yui] n1 form a=1 a.b=2", "[yui] n1 form a a.b", '[yui] n1 form a="x" a.b.c=1']
)
def test_p1_a_dotted_key_under_a_value_is_bad_input(line: str) -> None:
    with pytest.raises(EventLineError):
        parse_event_line(line)


@pytest.mark.parametrize("word", ["9" * 5000, "1|" + "9" * 5000, "-" + "1" * 4301])
def test_p2_a_huge_number_word_reads_or_is_bad_input(word: str) -> None:
    try:
        tree = parse_event_line(f"[yui] n1 slide value={word}")[2]
    except EventLineError:
        return
    assert "value" in tree


# --- deep values (issue 14) ----------------------------------------------------------------------


@fuzz_settings(60)
@given(depth=DEPTHS, pattern=st.lists(st.booleans(), min_size=1, max_size=6))
def test_e5_a_value_of_any_depth_is_written_or_refused(depth: int, pattern: list[bool]) -> None:
    """Writing recursed once per level: 1,200 nested lists or objects raised RecursionError."""
    value = {"v": deep_value(depth, pattern)}
    if depth + 1 > MAX_DEPTH:
        with pytest.raises(EventLineError, match=f"nests deeper than {MAX_DEPTH} levels"):
            format_event_line("n1", "form", value)
        return
    assert_one_line(format_event_line("n1", "form", value), "n1", "form")


@fuzz_settings(60)
@given(depth=DEPTHS)
def test_p3_a_dotted_key_of_any_depth_reads_or_is_refused(depth: int) -> None:
    """A line's dotted keys nest its value: past the bound, it could not be written back."""
    line = "[yui] n1 form " + ".".join(["k"] * (depth + 1)) + "=1"
    if depth + 1 > MAX_DEPTH:
        with pytest.raises(EventLineError, match=f"nests deeper than {MAX_DEPTH} levels"):
            parse_event_line(line)
        return
    element_id, preset, tree = parse_event_line(line)
    assert format_event_line(element_id, preset, tree) == line
