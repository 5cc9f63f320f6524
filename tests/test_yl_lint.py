"""`yui lint`: errors with their line in the reply, gated presets by build, exit codes, --ops."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from yui_cli.main import cli
from yuilines.lint import check, reply_ops

GUIDE = Path(__file__).resolve().parent.parent / "relay" / "channel_guide.md"
VECTORS = Path(__file__).resolve().parent / "yl-conformance"

BROKEN = """\
Here are a few screens.

```yui
timer 60
dance 5 minutes
ask Ready?
~nope rounds=3
```

Some words in between, with a ``` inline.

```yui
Timer 60
custom {bad json}
> 2 say hi
close now
doing 6/5
end
say fine
```
"""
# The reply line of each bad line above.
BROKEN_LINES = [5, 7, 13, 14, 15, 16, 17, 18]


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["lint", *args], input=stdin, catch_exceptions=False)


def guide_examples() -> list[str]:
    return re.findall(r"```yui\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("example", guide_examples())
def test_every_guide_example_lints_clean(example: str) -> None:
    assert check(f"```yui\n{example}```\n", None) == []


def test_the_guide_lints_clean_from_the_command_line() -> None:
    assert guide_examples(), "the guide has ```yui examples"
    result = run(str(GUIDE))
    assert result.exit_code == 0
    assert result.output == ""


def test_broken_lines_are_reported_on_their_reply_lines(tmp_path: Path) -> None:
    path = tmp_path / "reply.md"
    path.write_text(BROKEN, encoding="utf-8")
    findings = check(BROKEN, None)
    assert [f["line"] for f in findings] == BROKEN_LINES
    assert all(f["kind"] == "error" and f["message"] for f in findings)
    result = run(str(path))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert [int(line.split(":")[1]) for line in lines] == BROKEN_LINES
    assert lines[0].startswith(f"{path}:5: error: unknown preset 'dance'")


def test_json_findings_and_stdin() -> None:
    result = run("-", "--json", stdin=BROKEN)
    assert result.exit_code == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["line"] for r in records] == BROKEN_LINES
    assert {r["kind"] for r in records} == {"error"}


def test_build_names_what_it_would_not_draw_and_only_warns() -> None:
    reply = "Plan:\n```yui\nsay hi\nsketch Home\nrow Old +x\nmenu review@x Check\n```\n"
    result = run("-", "--build", "100", "--json", stdin=reply)
    assert result.exit_code == 0
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["line"], r["name"]) for r in records] == [(4, "sketch"), (5, "row"), (6, "menu")]
    assert all(r["kind"] == "gated" for r in records)
    assert run("-", "--build", "115", stdin=reply).stdout == ""


def test_ops_are_json_lines_in_the_vectors_shape() -> None:
    cases = json.loads((VECTORS / "18-flows.json").read_text(encoding="utf-8"))["vectors"]
    case = next(
        c for c in cases if c["name"] == "narrate: end closes the deck first, then the narrate"
    )
    reply = f"Words.\n```yui\n{case['input']}\n```\nMore words.\n"
    result = run("-", "--ops", stdin=reply)
    assert result.exit_code == 0
    assert [json.loads(line) for line in result.stdout.splitlines()] == case["expected"]
    assert reply_ops(reply) == case["expected"]


def test_ops_with_errors_still_print_and_exit_1() -> None:
    result = run("-", "--ops", stdin="```yui\nbogus\nsay a\n```\n")
    assert result.exit_code == 1
    ops = [json.loads(line) for line in result.stdout.splitlines()]
    assert ops == [
        {"op": "error", "screen": "1"},
        {"op": "add", "screen": "1", "preset": "say", "id": "n1", "props": {"text": "a"}},
    ]
    assert "2: error: unknown preset 'bogus'" in result.stderr


def test_a_reply_without_fences_is_clean() -> None:
    result = run("-", stdin="Just words, no screen.\n")
    assert result.exit_code == 0 and result.output == ""
