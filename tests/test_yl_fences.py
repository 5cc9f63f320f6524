"""Reading a reply's fences, its ```yui ones among them, and putting a reply back together
around them."""

from __future__ import annotations

import pytest

from yuilines.fences import (
    all_fences,
    build_fence,
    fenced_lines,
    find_fences,
    outside_fences,
    splice,
    stray_yui,
)


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


def test_fences_pair_like_markdown() -> None:
    text = "\n".join(["````yui", "```", "ask A", "````", "```", "x"])
    found = [(f.opener_line, f.closer_line, f.tag) for f in all_fences(text)]
    assert found == [(0, 3, "yui"), (4, None, "")]


def test_every_fence_is_read_with_its_parts() -> None:
    text = "a\n  ~~~~ YAML extra\nname: tea\n~~~~~\n```python\nx = 1"
    tilde, code = all_fences(text)
    assert (tilde.indent, tilde.marker, tilde.tag) == ("  ", "~~~~", "YAML")
    assert (tilde.opener, tilde.closer) == ("  ~~~~ YAML extra", "~~~~~")
    assert (tilde.opener_line, tilde.closer_line, tilde.first_line) == (1, 3, 3)
    assert tilde.body(text) == "name: tea\n"
    assert text[tilde.start : tilde.end] == "  ~~~~ YAML extra\nname: tea\n~~~~~\n"
    assert (code.marker, code.tag, code.closer, code.closer_line) == ("```", "python", None, None)
    assert code.body(text) == "x = 1" and code.end == len(text)
    assert find_fences(text) == []


@pytest.mark.parametrize(
    ("text", "screens"),
    [
        # CommonMark's reading, which every caller shares.
        ("    ```yui\nsay a\n```\n", []),  # four spaces in: indented code, then a bare fence
        ("\t```yui\nsay a\n```\n", []),  # a tab is not up to three spaces
        ("   ```yui\nsay a\n   ```\n", ["say a\n"]),
        ("~~~yui\nsay a\n~~~\n", ["say a\n"]),
        ("~~~yui\nsay a\n```\nsay b\n~~~\n", ["say a\n```\nsay b\n"]),  # closes in kind
        ("```yui\nsay a\n``` done\nsay b\n", ["say a\n``` done\nsay b\n"]),  # no closer
        ("```yui\nsay a\n    ```\nsay b", ["say a\n    ```\nsay b"]),  # nor four in
        ("```yui\nsay a\n````  \nafter\n", ["say a\n"]),  # longer, trailing spaces: closes
        ("see ```yui\nsay a\n```\n", []),  # opened mid-line: not a fence
        ("```yui say a ```\n", []),  # backticks in the info string: inline code
        ("```YUI\nsay a\n```\n", []),  # the tag is `yui` as written
        ("~~~\n```yui\nsay a\n```\n~~~\n", []),  # inside another fence
    ],
)
def test_edge_cases_read_the_commonmark_way(text: str, screens: list[str]) -> None:
    assert [fence.body(text) for fence in find_fences(text)] == screens


def test_lines_inside_fences_and_the_words_outside() -> None:
    text = "a\n```yui\nsay a\n```\nb\r\n~~~\ncode\n~~~\nc\n```\nrest\n"
    assert fenced_lines(text) == {1, 2, 3, 5, 6, 7, 9, 10, 11}  # 11: after the last "\n"
    assert outside_fences(text) == "a\nb\nc"
    assert outside_fences("no fence\r\nat all") == "no fence\nat all"


def test_a_stray_yui_runs_to_the_next_ticks_or_the_end() -> None:
    text = "a ```yui x ``` b\n````markdown\nc ```yui d\n````\ne ```yui\nf\n```yui\ng\n```\nh"
    spans = [text[start:end] for start, end in stray_yui(text)]
    assert spans == ["```yui x ```", "```yui\nf\n```"]  # none inside the ````markdown fence
    assert stray_yui("    ```yui\nsay a") == [(4, 16)]  # four spaces in: words, to the end
    assert stray_yui("```yui\nsay a\n```\n```yui-ish ```yuix") == []
