"""What one line of a reply may cost (`yuilines/limits.py`): a line of any depth or size is an
`error` op, never an exception, on every entry point: `parse`, the streaming `feed`, the gating
the bridges apply to replies, and `yui lint` (as a real process).

The finding (issue 14): an agent's ```yui fence holding `custom ` and about 1,200 `[` made the
JSON reader raise RecursionError inside the gating; the turn's thread died and the agent was
wedged for good. The fuzz tests draw depths and lengths around the bounds and far past them
(100,000 brackets, lines of megabytes), in every place a line can be.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.cli import ROOT
from tests.helpers.fuzzing import fuzz_settings, huge_lines, nested_json
from yuilines.gating import gate_reply
from yuilines.limits import MAX_DEPTH, MAX_LINE, MAX_MESSAGE
from yuilines.lint import check
from yuilines.parser import Parser, parse

POISON = "custom " + "[" * 1_200
TOO_DEEP = f"custom JSON nests deeper than {MAX_DEPTH} levels"
TOO_LONG = f"a line holds at most {MAX_LINE} characters"
# What comes before the line: nothing, a preset, a route, a block head still waiting for its
# first line, or a block the line falls inside (where it is the block's, not Yui Lines).
CONTEXTS = ["", "say hi\n", "> s\n", "timeline t\n", "diagram\n"]
IN_BLOCKS = [
    "diagram\nflowchart TD\n",
    "diagram\nsequenceDiagram\n",
    "flow\nflowchart TD\n",
    "flow as plan\n",
    "draw\n<svg>\n",
    "motion\n=== scene a 1 ===\n",
]


def fenced(body: str) -> str:
    return f"Here you go.\n```yui\n{body}\n```\nBye.\n"


def errors(ops: list[dict[str, Any]]) -> dict[int, str]:
    return {op["line"]: op["message"] for op in ops if op["op"] == "error"}


def streamed(text: str, size: int) -> list[dict[str, Any]]:
    parser = Parser()
    ops = [op for at in range(0, len(text), size) for op in parser.feed(text[at : at + size])]
    return ops + parser.flush()


# --- the poison reply, on every entry point ------------------------------------------------------


def test_the_poison_line_is_an_error_op() -> None:
    ops = parse(f"say before\n{POISON}\nsay after")
    assert [op["op"] for op in ops] == ["add", "error", "add"]
    assert errors(ops) == {2: TOO_DEEP}


def test_the_poison_line_streamed_char_by_char_is_the_same_error() -> None:
    text = f"say before\n{POISON}\nsay after"
    assert streamed(text, 1) == parse(text)


def test_the_poison_reply_is_gated_as_written() -> None:
    """The bad line stays in the fence, as every bad line does: the phone shows it as one."""
    reply = fenced(f"say hi\n{POISON}")
    gated = gate_reply(reply, None)
    assert gated.text == reply and gated.gated == ()


def test_the_poison_reply_lints_as_one_error_on_its_line() -> None:
    assert check(fenced(POISON), None) == [{"line": 3, "kind": "error", "message": TOO_DEEP}]


# --- the bounds themselves ---------------------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_as_deep_as_the_bound_reads_and_one_deeper_does_not() -> None:
    (ok,) = parse(f"custom {nested(MAX_DEPTH)}")
    assert ok["op"] == "add" and ok["preset"] == "custom"
    assert errors(parse(f"custom {nested(MAX_DEPTH + 1)}")) == {1: TOO_DEEP}


def test_brackets_inside_strings_do_not_nest() -> None:
    spec = '{"text": "' + "[{" * 1_000 + '\\" ]]"}'
    (ok,) = parse(f"custom {spec}")
    assert ok["props"]["spec"] == {"text": "[{" * 1_000 + '" ]]'}


def test_a_line_as_long_as_the_bound_reads_and_one_longer_does_not() -> None:
    words = "x" * (MAX_LINE - len("say "))
    (ok,) = parse(f"say {words}")
    assert ok["props"]["text"] == words
    (carriage,) = parse(f"say {words}\r\n")  # a "\r" before the newline is not the line's
    assert carriage["props"]["text"] == words
    assert errors(parse(f"say {words}x")) == {1: TOO_LONG}
    assert errors(parse(f"say {words}x\r\nsay ok")) == {1: TOO_LONG}
    assert errors(parse(f"say {words}\rx")) == {1: TOO_LONG}


def test_a_long_line_inside_a_block_is_an_error_and_the_block_still_ends() -> None:
    ops = parse(f"diagram\nflowchart TD\n{'A-->B ' * 6_000}\nA --> C\nend")
    assert errors(ops) == {3: TOO_LONG}
    patch = ops[-1]
    assert patch["op"] == "patch" and patch["line"] == 5
    assert patch["props"]["edges"] == [{"from": "A", "to": "C"}]


def test_a_long_line_where_a_block_would_start_leaves_its_head_plain() -> None:
    ops = parse(f"diagram\n{'x' * 40_000}\nsay after")
    assert [(op["op"], op["line"]) for op in ops] == [("add", 1), ("error", 2), ("add", 3)]


def test_an_error_message_quoting_a_long_word_is_cut_short() -> None:
    (bad,) = parse("x" * 20_000 + " hi")
    assert bad["message"].startswith("unknown preset 'xxx")
    assert len(bad["message"]) == MAX_MESSAGE and bad["message"].endswith("…")


# --- fuzzing: deep and huge, in every place a line can be ----------------------------------------


def expected_error(context: str, line: str, depth: int = 0) -> str | None:
    """The error a line gets where it stands, if any: too long anywhere; too deep as YL."""
    if len(line) > MAX_LINE:
        return TOO_LONG
    if context not in IN_BLOCKS and line.startswith("custom ") and depth > MAX_DEPTH:
        return TOO_DEEP
    return None


def assert_every_entry_point_reads(context: str, line: str, error: str | None, cut: int) -> None:
    """`parse` gives the line its error (a limit's, or none of those) and reads the line after
    it; `feed` in chunks of `cut` gives the same ops; the gating keeps the reply's words around
    the fence; lint finds the error on the line of the reply."""
    body = f"{context}{line}\nsay after"
    number = context.count("\n") + 1
    ops = parse(body)
    if error is None:
        assert errors(ops).get(number) not in (TOO_LONG, TOO_DEEP)
    else:
        assert errors(ops)[number] == error
    assert max(op["line"] for op in ops) == number + 1
    if cut > 1 or len(body) < 50_000:
        assert streamed(body, cut) == ops
    reply = fenced(body)
    for build in (None, 100, 10_000):
        gated = gate_reply(reply, build).text
        assert gated.startswith("Here you go.\n") and gated.endswith("Bye.\n")
    findings = check(reply, None)
    if error is not None:
        assert {"line": number + 2, "kind": "error", "message": error} in findings


@fuzz_settings(60)
@given(
    json=nested_json(),
    context=st.sampled_from(CONTEXTS + IN_BLOCKS),
    cut=st.sampled_from([1, 7, 4096]),
)
def test_any_nesting_parses_streams_gates_and_lints(
    json: tuple[str, int], context: str, cut: int
) -> None:
    text, depth = json
    line = f"custom {text}"
    assert_every_entry_point_reads(context, line, expected_error(context, line, depth), cut)


@fuzz_settings(25)
@given(
    line=huge_lines(),
    context=st.sampled_from(CONTEXTS + IN_BLOCKS),
    cut=st.sampled_from([4096, 65_536]),
)
def test_any_line_of_any_size_parses_streams_gates_and_lints(
    line: str, context: str, cut: int
) -> None:
    assert_every_entry_point_reads(context, line, expected_error(context, line), cut)


# --- `yui lint`, as an agent author runs it -------------------------------------------------------


def lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bin" / "yui"), "lint", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_yui_lint_reports_each_line_and_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "reply.md"
    bad = [
        (POISON, TOO_DEEP),
        ("custom " + '[{"k":' * 50_000, TOO_LONG),  # 100,000 brackets and braces, mixed
        ("say " + "[" * 100_000, TOO_LONG),
        ("say " + "x" * 3_000_000, TOO_LONG),  # 3 MB on one line
    ]
    path.write_text(fenced("\n".join(["say hi", *(line for line, _ in bad), "say bye"])))
    result = lint(path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{path}:{n}: error: {message}" for n, (_, message) in enumerate(bad, start=4)
    ]
    assert result.stderr == "4 error(s)\n"


def test_yui_lint_on_a_file_that_is_not_text_says_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "reply.md"
    path.write_bytes(b"```yui\nsay \xff\xfe\n```\n")
    result = lint(path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"Error: {path} is not UTF-8 text\n"
