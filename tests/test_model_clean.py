"""Cleaning a model's answer before it goes out: one test group per rule, then the whole."""

from __future__ import annotations

import pytest

from bridges.model.clean import (
    ThinkingFilter,
    clean,
    close_yui_fence,
    drop_echoed_markers,
    has_screen,
    retag_yui_fences,
    starts_with_preset,
    strip_thinking,
)
from yuilines.fences import find_fences

FENCE = "```"


def block(tag: str, *lines: str, closed: bool = True) -> str:
    return "\n".join([FENCE + tag, *lines, *([FENCE] if closed else [])])


# --- <think> ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("<think>\nthe person wants tea\n</think>\nTea it is.", "\nTea it is."),
        ("<think>a</think>One. <think>b</think>Two.", "One. Two."),
        ("<THINKING>x</THINKING>Hi", "Hi"),
        ("  <think>\nstill thinking when the tokens ran out", ""),
        ("the template opened it</think>\nHello", "\nHello"),
        ("No thinking here.", "No thinking here."),
    ],
)
def test_thinking_is_removed(raw: str, kept: str) -> None:
    assert strip_thinking(raw) == kept


def test_a_stream_shows_the_answer_without_its_thinking() -> None:
    shown: list[str] = []
    stream = ThinkingFilter(shown.append)
    for piece in ["<th", "ink>ponder", "ing</thi", "nk>\n", "Hel", "lo"]:
        stream.feed(piece)
    stream.end()
    assert "".join(shown) == "Hello"

    plain: list[str] = []
    stream = ThinkingFilter(plain.append)
    for piece in ["<", "b>bold</b>", " text"]:
        stream.feed(piece)
    stream.end()
    assert "".join(plain) == "<b>bold</b> text"

    short: list[str] = []
    stream = ThinkingFilter(short.append)
    stream.feed("<th")
    stream.end()
    assert short == ["<th"]


# --- an unclosed ```yui fence -----------------------------------------------------------------


def test_an_unclosed_yui_fence_is_closed() -> None:
    raw = "Pick one.\n" + block("yui", "choose Tea|Coffee", closed=False) + "\n"
    assert close_yui_fence(raw) == "Pick one.\n" + block("yui", "choose Tea|Coffee")


def test_a_closed_or_other_fence_is_left_alone() -> None:
    closed = block("yui", "ask Ready?")
    assert close_yui_fence(closed) == closed
    code = "Here:\n" + block("python", "print(1)", closed=False)
    assert close_yui_fence(code) == code


def test_a_longer_opener_is_closed_with_as_many_backticks() -> None:
    assert close_yui_fence("````yui\nask Ready?") == "````yui\nask Ready?\n````"


# --- retagging a yml, yaml or untagged fence ----------------------------------------------------


@pytest.mark.parametrize("tag", ["", "yml", "yaml", "YAML"])
def test_a_plain_fence_of_yui_lines_is_retagged(tag: str) -> None:
    raw = "Which?\n" + block(tag, "", 'choose "Which session today?" Run|Swim|Rest +other')
    assert retag_yui_fences(raw) == "Which?\n" + block(
        "yui", "", 'choose "Which session today?" Run|Swim|Rest +other'
    )


def test_a_named_component_counts_as_a_preset() -> None:
    assert retag_yui_fences(block("", "timer@plank 60 Plank")) == block(
        "yui", "timer@plank 60 Plank"
    )


def test_the_tag_written_inside_the_fence_moves_out() -> None:
    assert retag_yui_fences(block("", "yui", "ask Ready?")) == block("yui", "ask Ready?")


@pytest.mark.parametrize(
    "raw",
    [
        block("yaml", "name: tea", "list: [a, b]"),
        block("python", "list = [1, 2]"),
        block("", "Some quoted text"),
        block("js", "timer 10m Stretch"),
    ],
)
def test_other_fences_keep_their_tag(raw: str) -> None:
    assert retag_yui_fences(raw) == raw


def test_an_unclosed_yaml_screen_is_retagged_then_closed() -> None:
    assert clean(block("yaml", "ask Ready?", closed=False)) == block("yui", "ask Ready?")


def test_starts_with_preset() -> None:
    assert starts_with_preset("ask Ready?") and starts_with_preset("choose@day Mon|Tue")
    assert not starts_with_preset("asks a lot") and not starts_with_preset("")
    assert not starts_with_preset("Ask Ready?")


# --- echoed [yui] lines -------------------------------------------------------------------------


def test_echoed_tap_lines_are_removed() -> None:
    raw = "[yui] n1 choose choice=Swim\nSwim it is.\n[yui]\n  [yui] n2 ask answer=Yes"
    assert drop_echoed_markers(raw) == "Swim it is."


def test_lines_inside_a_fence_and_mentions_in_words_stay() -> None:
    raw = "A tap reads like [yui] n1 ask.\n" + block("", "[yui] n1 ask answer=Yes")
    assert drop_echoed_markers(raw) == raw


# --- the whole ----------------------------------------------------------------------------------


def test_clean_applies_every_rule() -> None:
    raw = "<think>they said Swim</think>\n[yui] n1 choose choice=Swim\nGreat, a swim.\n\n" + block(
        "yml", "timer 45/15x6 Core circuit", closed=False
    )
    assert clean(raw) == "Great, a swim.\n\n" + block("yui", "timer 45/15x6 Core circuit")


def test_a_good_answer_passes_unchanged() -> None:
    good = "Leg day is ready.\n\n" + block("yui", "timer 40/20x6 Leg circuit", 'ask "Log it?"')
    assert clean(good) == good


def test_has_screen_wants_a_complete_yui_fence() -> None:
    assert has_screen("x\n" + block("yui", "ask Ready?"))
    assert not has_screen(block("yui", "ask Ready?", closed=False))
    assert not has_screen(block("yaml", "ask Ready?"))
    assert not has_screen("no fence")


# --- fences read as the phone reads them ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "screen"),
    [
        ("~~~yui\nask Ready?\n~~~", True),
        ("   ```yui\nask Ready?\n   ```", True),
        ("````yui\nask Ready?\n```\n````", True),
        ("Pick:\n    ```yui\n    ask Ready?\n    ```", False),  # indented code, not a fence
        ("Pick:\n\t```yui\nask Ready?\n```", False),  # the last line opens a bare fence
        ("```yui\nask Ready?\n``` done", False),  # a closer holds nothing but its ticks
        ("```YUI\nask Ready?\n```", False),
        ("~~~\n```yui\nask Ready?\n```\n~~~", False),  # shown inside another fence
        ("see ```yui\nask Ready?\n```", False),
    ],
)
def test_has_screen_reads_fences_as_the_phone_does(text: str, screen: bool) -> None:
    assert has_screen(text) is screen
    assert screen is any(fence.closer is not None for fence in find_fences(text))


@pytest.mark.parametrize(
    "raw",
    [
        "    ```yui\nask Ready?",  # trimmed as it goes out, it opens a screen: closed flush
        "[yui] n1 ask\n    ```yaml\nask Ready?",
        "```yui\nask Ready?\n``` done",
        "~~~yui\nask Ready?\n```",
        "Pick:\n  ````yui\nask Ready?\n```",
    ],
)
def test_clean_leaves_every_screen_closed_for_the_phone(raw: str) -> None:
    screens = find_fences(clean(raw))
    assert screens and all(fence.closer is not None for fence in screens)


def test_tilde_fences_are_fences() -> None:
    assert retag_yui_fences("~~~yaml\nask Ready?\n~~~") == "~~~yui\nask Ready?\n~~~"
    assert clean("~~~\nask Ready?") == "~~~yui\nask Ready?\n~~~"
    kept = "~~~\n[yui] n1 ask answer=Yes\n~~~"
    assert drop_echoed_markers(kept) == kept


def test_an_echoed_line_after_a_fence_four_spaces_in_goes() -> None:
    raw = "Text\n    ```\n[yui] n2 ask answer=Yes\n    ```"
    assert drop_echoed_markers(raw) == "Text\n    ```\n    ```"
