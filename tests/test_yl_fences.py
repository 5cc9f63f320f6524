"""Finding a reply's ```yui fences and putting a reply back together around them."""

from __future__ import annotations

from yuilines.fences import build_fence, find_fences, splice


def test_finds_yui_fences_with_their_first_line() -> None:
    text = "Hi.\n\n```yui\ntimer 60\nask Ready?\n```\nAfter.\n"
    (fence,) = find_fences(text)
    assert fence.body(text) == "timer 60\nask Ready?\n"
    assert fence.first_line == 4
    assert text[fence.start : fence.end] == "```yui\ntimer 60\nask Ready?\n```\n"


def test_other_fences_are_skipped_whole() -> None:
    text = "````markdown\n```yui\nsay inside an example\n```\n````\n~~~yui\nsay real\n~~~\n"
    (fence,) = find_fences(text)
    assert fence.body(text) == "say real\n"


def test_an_unclosed_fence_runs_to_the_end() -> None:
    text = "Go:\n```yui\nsay a\nsay b"
    (fence,) = find_fences(text)
    assert fence.closer is None
    assert fence.body(text) == "say a\nsay b"
    assert fence.end == len(text)


def test_longer_markers_indent_and_crlf() -> None:
    text = "x\r\n  ````yui\r\nsay a\r\n```\r\nsay b\r\n  ````\r\ny"
    (fence,) = find_fences(text)
    assert fence.body(text) == "say a\r\n```\r\nsay b\r\n"
    assert text[fence.end :] == "y"


def test_only_the_yui_info_string_counts() -> None:
    assert find_fences("```yuix\nsay a\n```\n```python\nx = 1\n```\n") == []
    assert len(find_fences("``` yui\nsay a\n```\n")) == 1


def test_splice_touches_nothing_outside_the_fences() -> None:
    text = "  lead  \n```yui\nsay a\n```\nmid ✓\n```yui\nsay b\n```\ntail"
    first, second = find_fences(text)
    out = splice(text, {second: build_fence(["say c"])})
    assert out == "  lead  \n```yui\nsay a\n```\nmid ✓\n```yui\nsay c\n```\ntail"
    assert splice(text, {}) == text
    assert splice(text, {first: ""}) == "  lead  \nmid ✓\n```yui\nsay b\n```\ntail"


def test_build_fence_can_leave_it_open() -> None:
    assert build_fence(["say a"], "```yui", None) == "```yui\nsay a\n"


def test_lines_end_at_newlines_only_as_the_parser_reads_them() -> None:
    text = "hello\u2028world\nand\x0b```yui\n```yui\ntitle Hi\n```\n"
    (fence,) = find_fences(text)
    assert fence.first_line == 4
    assert fence.body(text) == "title Hi\n"
