"""Min-build gating: each gated preset at its build boundary, in the chat and in a deck, the
agent's note line, and the reply's words outside fences kept byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yuilines.fences import find_fences
from yuilines.gates import (
    DECK_PICTURES_BUILD,
    MADE_OVER,
    MARKS_BUILD,
    MIN_BUILD,
    NO_BUILD_YET,
    draws,
)
from yuilines.gating import gate_reply, turn_note
from yuilines.parser import parse

# A few lines that use each MIN_BUILD row (a group's head brings members along).
SAMPLES: dict[str, list[str]] = {
    "timeline": ["timeline Week", "done One at=Mon", "now Two", "next Three"],
    "done": ["done Shipped at=Mon"],
    "now": ["now Building"],
    "next": ["next Later"],
    "game": ["game snake Beat me"],
    "sketch": ["sketch Home", "row Old +x note=gone", "after Now", "row New +hi"],
    "row": ["row Alone +hi"],
    "after": ["after Then"],
    "shapes": ["shapes Flow", "shape circle You", "shape box Board"],
    "shape": ["shape circle You"],
    "loop": ["loop 96 Beat"],
    "drums": ["drums 2x2"],
    "keys": ["keys C major"],
    "chords": ["chords G I-V-vi-IV"],
    "tuner": ["tuner guitar"],
    "metronome": ["metronome 72"],
    "map": ["map Trip", "pin Lisbon 38.7,-9.1", "area PT"],
    "area": ["area PT Portugal"],
    "pin": ["pin Home 1,2"],
    "route": ["route Road a|b"],
    "flow": ["flow@f Check", "flowchart TD", "  a[ask Ready? Yes|No]", "end"],
    "table create": ["table create log Note:text"],
    "put": ["put log Note=hi"],
    "query": ["query meals"],
    "draw": ["draw Pic", "<svg></svg>", "end"],
    "diagram": ["diagram Flow", "flowchart LR", "  a --> b", "end"],
    "mock": ["mock Phone", "part button Go"],
    "part": ["part button Go"],
    "motion": ["motion T film=m1 part=1", "=== scene a 4 ===", "x();", "end"],
    "menu": ['menu review@x "Check this"'],
}
NAMES = sorted(MIN_BUILD)
DECK_MEMBERS = {"sketch", "shapes", "map", "mock", "diagram", "draw"}


def reply(lines: list[str]) -> str:
    body = "\n".join(lines)
    return f"Here it is, café ☕ — see below.  \n\n```yui\nsay Start\n{body}\nask Ok?\n```\nBye!\n"


def fence_ops(text: str) -> list[dict]:
    return [op for f in find_fences(text) for op in parse(f.body(text))]


def uses(op: dict, name: str) -> bool:
    kind = {"table": "table create", "put": "put", "menu": "menu"}.get(op["op"], op.get("preset"))
    return kind == name


def outside(text: str) -> list[str]:
    """The reply's text outside its fences, piece by piece."""
    pieces, at = [], 0
    for fence in find_fences(text):
        pieces.append(text[at : fence.start])
        at = fence.end
    return [*pieces, text[at:]]


def test_every_row_has_a_sample() -> None:
    assert set(SAMPLES) == set(MIN_BUILD)


@pytest.mark.parametrize("name", NAMES)
def test_build_before_the_row_gates_it_in_the_chat(name: str) -> None:
    gate = MIN_BUILD[name]
    text = reply(SAMPLES[name])
    for build in (gate.build - 1, None):
        gated = gate_reply(text, build)
        ops = fence_ops(gated.text)
        assert not any(uses(op, name) for op in ops), gated.text
        assert not any(op["op"] == "error" for op in ops), gated.text
        adds = [op["props"] for op in ops if op["op"] == "add" and "in" not in op]
        if name in MADE_OVER:
            assert [op["preset"] for op in ops if op["op"] == "add"][1:3] == ["plan", "ask"]
            assert gated.gated == ()
            continue
        assert [p.get("text", p.get("q")) for p in adds] == ["Start", "Ok?"]
        assert gated.gated == (() if gate.quiet else (name,))
        pieces = outside(gated.text)
        assert pieces[0] == outside(text)[0] and pieces[-1] == outside(text)[-1]
        if name not in ("table create", "put", "menu"):
            assert len(find_fences(gated.text)) == 2  # split around the words
            assert pieces[1].strip(), "the preset became words between the fences"


@pytest.mark.parametrize("name", NAMES)
def test_its_own_build_draws_it_as_is(name: str) -> None:
    text = reply(SAMPLES[name])
    for build in (MIN_BUILD[name].build, NO_BUILD_YET):
        gated = gate_reply(text, build)
        assert gated.text == text
        assert gated.gated == ()


@pytest.mark.parametrize("name", NAMES)
def test_inside_a_deck(name: str) -> None:
    gate = MIN_BUILD[name]
    text = reply(["deck Lesson", "page One", *SAMPLES[name], "page Two"])
    low = gate_reply(text, gate.build - 1)
    ops = fence_ops(low.text)
    assert not any(uses(op, name) for op in ops)
    assert not any(op["op"] == "error" for op in ops)
    deck = next(op for op in ops if op.get("preset") == "deck")
    pages = [op for op in ops if op.get("preset") == "page"]
    assert pages[0]["props"]["title"] == "One" and pages[0]["in"] == deck["id"]
    if name in DECK_MEMBERS:
        assert len(find_fences(low.text)) == 1  # no words: a page in its place
        page = pages[1]
        assert page["in"] == deck["id"]
        assert pages[2]["props"]["title"] == "Two" and pages[2]["in"] == deck["id"]
    high = gate_reply(text, max(gate.build, DECK_PICTURES_BUILD))
    assert high.text == text and high.gated == ()
    drawn = gate_reply(text, gate.build)
    assert any(uses(op, name) for op in fence_ops(drawn.text))


def test_a_sketch_in_a_deck_becomes_a_page_with_its_rows_as_points() -> None:
    text = reply(["deck D", "page One", *SAMPLES["sketch"], "page Two"])
    gated = gate_reply(text, 103)
    assert 'page "Home" points="Old (gone)"|"New"' in gated.text
    assert gated.gated == ("sketch",)


def test_a_sketch_in_the_chat_reads_as_a_list_with_marks() -> None:
    gated = gate_reply(reply(SAMPLES["sketch"]), 103)
    words = outside(gated.text)[1]
    assert words == "**Home**\nBefore:\n- ~~Old~~ (gone)\nNow:\n- **New**\n\n"


def test_a_timeline_reads_as_done_now_next_lines() -> None:
    gated = gate_reply(reply(SAMPLES["timeline"]), 68)
    assert outside(gated.text)[1] == "**Week**\n- Done: One (Mon)\n- Now: Two\n- Next: Three\n\n"


def test_a_plan_takes_a_gated_picture_as_a_page() -> None:
    text = reply(["plan@p Trip", "page Where", "map", "pin Lisbon 38.7,-9.1", "choose Go? Yes|No"])
    ops = fence_ops(gate_reply(text, 218).text)
    assert [op["preset"] for op in ops if op.get("in") == "p"] == ["page", "page", "choose", "ask"]


def test_patches_of_gated_presets_are_dropped() -> None:
    lines = ["sketch@s Home", "row@r Old", "~r +x", "~sketch title=New", "~s frame=phone"]
    gated = gate_reply(reply([*lines, "timer@t 60", "~t rounds=3"]), 103)
    ops = fence_ops(gated.text)
    assert [op["target"] for op in ops if op["op"] == "patch"] == ["t"]
    lasting = gate_reply("```yui\n~w1 kind=done\nsay ok\n```\n", 60, known={"w1": "now"})
    assert lasting.text == "```yui\nsay ok\n```\n"


def test_a_flow_with_a_chart_becomes_a_plan_of_its_steps() -> None:
    lines = [
        'flow@intake "Website intake" submit=Send',
        "flowchart TD",
        '  %% kind: choose "What are we building?" Website|Shop',
        "  kind{Kind?} -->|Shop| products",
        "  kind --> done((Done))",
        "  products[slide How many? 1-500]",
        "end",
    ]
    gated = gate_reply(reply(lines), 413)
    assert gated.gated == ()
    assert (
        '```yui\nsay Start\nplan@intake "Website intake" submit="Send"\n'
        'choose@kind "What are we building?" Website|Shop\nslide@products How many? 1-500\n'
        "end\nask Ok?\n```"
    ) in gated.text
    saved = gate_reply(reply(["flow website-intake"]), 413)
    assert saved.gated == ("flow",)
    assert "There's a flow here." in saved.text
    assert gate_reply(reply(lines), 414).text == reply(lines)


def test_marks_need_their_build() -> None:
    text = reply(["shapes Overlap", "shape venn Yui sets=Chat|Drawing", "shape circle Dot"])
    gated = gate_reply(text, MARKS_BUILD - 1)
    ops = fence_ops(gated.text)
    assert [op["props"].get("kind") for op in ops if op.get("preset") == "shape"] == ["circle"]
    assert gated.gated == ("shape venn",)
    assert gate_reply(text, MARKS_BUILD).text == text


def test_a_patch_to_a_member_of_a_gated_group_is_dropped() -> None:
    text = reply(["mock Phone", "part@go button Go", "shape@t tap at=go", "~t at=1,1", "~go +hi"])
    ops = fence_ops(gate_reply(text, 500).text)
    assert not [op for op in ops if op["op"] == "patch"]


def test_menu_is_dropped_silently() -> None:
    gated = gate_reply("```yui\nmenu review@x Check\n```\nWords.\n", 114)
    assert gated.text == "Words.\n"
    assert gated.gated == ()
    assert turn_note(114, gated.gated) is None


def test_deck_pictures_leave_the_deck_before_build_158() -> None:
    text = reply(["deck D", "page One", "chart bar x=a|b y=1|2", "page Two", "end"])
    ops = fence_ops(gate_reply(text, DECK_PICTURES_BUILD - 1).text)
    chart = next(op for op in ops if op.get("preset") == "chart")
    assert "in" not in chart
    assert [op["props"]["title"] for op in ops if op.get("preset") == "page"] == ["One", "Two"]
    assert all("in" in op for op in ops if op.get("preset") == "page")
    assert gate_reply(text, DECK_PICTURES_BUILD).text == text


def test_the_note_line() -> None:
    note = turn_note(100, ("timeline", "sketch"))
    assert note is not None and note.startswith("[yui] ") and "\n" not in note
    assert "build 100" in note and "sketch, timeline" in note
    older = turn_note(None, ("game",))
    assert older is not None and "an older build" in older and "game" in older
    assert turn_note(100, ()) is None


def test_null_build_is_older_than_all() -> None:
    assert not any(draws(name, None) for name in MIN_BUILD)
    assert draws("ask", None) and draws("ask", 1)


def test_words_outside_fences_are_byte_identical() -> None:
    text = (
        "Intro with  two spaces\t and a tab\r\n\n"
        "```python\nprint('```yui inside code is not a screen')\n```\n"
        "```yui\ntimeline Week\ndone One\n```\r\n"
        "Middle — ünïcödé 💪 text\n\n"
        "```yui\nsay hi\nmenu shortcut Go\nsketch S\nrow R\n```\n"
        "Trailing words without a newline"
    )
    gated = gate_reply(text, 60)
    assert gated.gated == ("sketch", "timeline")
    at = 0
    for piece in outside(text):  # each piece of the original words, in order, unchanged
        found = gated.text.find(piece, at)
        assert found >= at, piece
        at = found + len(piece)
    assert gated.text.startswith(outside(text)[0])
    assert gated.text.endswith(outside(text)[-1])


def test_an_unclosed_fence_stays_open_at_the_end() -> None:
    text = "Go:\n```yui\nsay a\ngame snake\nsay b"
    gated = gate_reply(text, 70)
    words = "There's a game here. Update Yui to see it."
    assert gated.text == f"Go:\n```yui\nsay a\n```\n{words}\n\n```yui\nsay b"
    assert gate_reply(text, 71).text == text


_VECTOR_LINES = sorted(
    {
        line
        for path in (Path(__file__).resolve().parent / "yl-conformance").glob("*.json")
        for case in json.loads(path.read_text(encoding="utf-8"))["vectors"]
        for line in case["input"].split("\n")
    }
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(_VECTOR_LINES), st.text(max_size=20)), max_size=12),
    st.text(max_size=30),
    st.sampled_from([None, 60, 103, 130, 157, 300, 500, NO_BUILD_YET]),
)
def test_any_reply_gates_without_error_and_keeps_its_words(
    lines: list[str], words: str, build: int | None
) -> None:
    words = words.replace("`", "'").replace("~", "-")
    text = f"{words}\n```yui\n" + "\n".join(lines) + f"\n```\n{words}"
    gated = gate_reply(text, build)
    assert gated.text.startswith(f"{words}\n") and gated.text.endswith(f"\n{words}")
    for fence in find_fences(gated.text):
        for op in parse(fence.body(gated.text)):
            assert op["op"] == "error" or gate_name_drawn(op, build)


def gate_name_drawn(op: dict, build: int | None) -> bool:
    name = {"table": "table create", "put": "put", "menu": "menu"}.get(op["op"], op.get("preset"))
    return name is None or draws(name, build)
