"""Light checks on the channel guide; a conformant Yui Lines parser checks every example later."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from yuilines.events import format_event_line

GUIDE = Path(__file__).resolve().parent.parent / "relay" / "channel_guide.md"
HEADING = "## You are talking to someone in Yui"

# Preset and core words the guide's examples may start with.
PRESETS = {
    "ask", "choose", "pick", "slide", "form", "timer", "list", "table", "card", "image",
    "stat", "chart", "camera", "mic", "say",
}  # fmt: skip
HEAD = re.compile(r"(?P<tilde>~)?(?P<word>[a-z]+)(?:@(?P<id>[A-Za-z0-9_-]+))?")
ROUTE = re.compile(r">(?P<screen>[A-Za-z0-9_-]+)(?: (?P<rest>.*))?")


def _text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """Every fenced block as (info string, lines); fails on a fence left open."""
    blocks: list[tuple[str, list[str]]] = []
    info: str | None = None
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if info is None:
                info, body = line[3:].strip(), []
            else:
                assert line == "```", f"line {number}: a closing fence carries nothing else"
                blocks.append((info, body))
                info = None
        elif info is not None:
            body.append(line)
    assert info is None, "a fenced block is never closed"
    return blocks


def _yui_blocks() -> list[list[str]]:
    return [lines for info, lines in _blocks(_text()) if info == "yui"]


def _balanced_quotes(line: str) -> bool:
    return len(re.findall(r'(?<!\\)"', line)) % 2 == 0


def test_guide_starts_with_the_heading() -> None:
    assert _text().splitlines()[0] == HEADING


def test_guide_has_one_heading_and_a_sane_size() -> None:
    text = _text()
    assert text.count(HEADING) == 1
    assert 150 <= len(text.splitlines()) <= 300
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_fences_are_closed_and_are_yui_or_plain() -> None:
    blocks = _blocks(_text())
    assert blocks
    assert {info for info, _ in blocks} <= {"yui", ""}


def _head(line: str) -> re.Match[str] | None:
    """The head of a component line (after any `>S ` route); None for `close` and bare `>S`."""
    route = ROUTE.fullmatch(line)
    if line == "close" or (route and route.group("rest") is None):
        return None
    first = (route.group("rest") if route else line).split(" ", 1)[0]
    head = HEAD.fullmatch(first)
    assert head, f"bad head in {line!r}"
    return head


def test_the_presets_the_guide_must_teach_have_examples() -> None:
    heads = [_head(line) for block in _yui_blocks() for line in block]
    words = {head.group("word") for head in heads if head and not head.group("tilde")}
    required = {"ask", "choose", "pick", "form", "timer", "list", "table", "card", "image"}
    assert required <= words
    assert any(head and head.group("tilde") for head in heads), "no patch example"


@pytest.mark.parametrize("block", _yui_blocks(), ids=lambda block: block[0])
def test_each_yui_line_has_a_known_head(block: list[str]) -> None:
    assert block, "an empty yui block"
    named: set[str] = set()
    for line in block:
        assert line.strip(), "a blank line inside a yui example"
        assert line == line.strip(), f"stray spaces around {line!r}"
        assert _balanced_quotes(line), f"unbalanced quotes in {line!r}"
        head = _head(line)
        if head is None:
            continue
        word, name = head.group("word"), head.group("id")
        if head.group("tilde"):
            assert name is None, f"patch by preset@id in {line!r}"
            # A name given in this block, or a preset word: a name from another block is unknown.
            assert word in named or word in PRESETS, f"patch target unknown in {line!r}"
        else:
            assert word in PRESETS, f"unknown preset in {line!r}"
            if name:
                named.add(name)


def test_lines_the_guide_rejects_would_fail_the_checks() -> None:
    assert not _balanced_quotes('ask "Ready?')
    assert _balanced_quotes('say "a \\"quote\\" inside"')
    assert HEAD.fullmatch("Ask") is None
    assert HEAD.fullmatch("timer@") is None
    assert ROUTE.fullmatch("> 2 say hi") is None
    with pytest.raises(AssertionError):
        _head("> 2 say hi")


EVENT_EXAMPLES: list[tuple[str, str, dict[str, Any]]] = [
    ("n2", "choose", {"choice": "Swim"}),
    ("n1", "ask", {"answer": "Not now"}),
    ("n3", "pick", {"picked": ["Dumbbells", "Pull-up bar"]}),
    ("n1", "slide", {"value": 2}),
    ("n1", "form", {"form": {"mood": 4, "notes": "slept badly", "sleep": 7}}),
    ("plank", "timer", {"done": True, "rounds": 3}),
    ("n1", "card", {"cta": "Start run"}),
    ("n2", "choose", {"choice": "Run", "changed": True}),
]


@pytest.mark.parametrize(("element_id", "preset", "value"), EVENT_EXAMPLES)
def test_event_examples_match_the_formatter(
    element_id: str, preset: str, value: dict[str, Any]
) -> None:
    assert format_event_line(element_id, preset, value) in _text()
