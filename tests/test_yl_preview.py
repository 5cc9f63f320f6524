"""A message's words as the app shows them: a `[screen]` line for each screen in notes and
quotes, nothing at all in a push alert; both read the screens the phone does."""

from __future__ import annotations

import pytest

from relay.gateway.push import preview
from yuilines.preview import one_line, plain, screens, without_screens


def test_screens_drops_the_header_and_marks_each_screen() -> None:
    text = "[yui] mention to=bravo\n[yui] reply to=x\nHi\n```yui\nask A\n```\n~~~yui\nb\n~~~\nBye"
    assert screens(text) == "Hi\n[screen]\n[screen]\nBye"
    assert screens("Hi [yui] mention to=bravo") == "Hi [yui] mention to=bravo"


def test_one_line_cuts_at_the_limit() -> None:
    assert one_line(" one\n two\tthree ", 13) == "one two three"
    assert one_line("one two three", 9) == "one two…"  # no space before the "…"
    assert plain("Hi\n```yui\nask A\n```\nthere", 8) == "Hi [scr…"


@pytest.mark.parametrize(
    ("text", "alert", "note"),
    [
        ("Hi\n~~~yui\nask Ready?\n~~~\nBye", "Hi Bye", "Hi [screen] Bye"),
        ("Hi\n````yui\nask Ready?\n```\nsay b\n````\nBye", "Hi Bye", "Hi [screen] Bye"),
        ("Hi\n``` yui\nask Ready?\n```\nBye", "Hi Bye", "Hi [screen] Bye"),
        ("Hi\n```yui\nask Ready?\n``` Bye", "Hi", "Hi [screen]"),  # no closer: to the end
        (
            "Hi\n````markdown\n```yui\nask Ready?\n```\n````\nBye",  # an example, no screen
            "Hi ````markdown ```yui ask Ready? ``` ```` Bye",
            "Hi ````markdown ```yui ask Ready? ``` ```` Bye",
        ),
        # A stray ```yui is words to the phone, but an alert leaves it out all the same.
        ("Hi ```yui ask Ready? ``` Bye", "Hi Bye", "Hi ```yui ask Ready? ``` Bye"),
        ("Hi\n    ```yui\nask Ready?", "Hi", "Hi ```yui ask Ready?"),
    ],
)
def test_alerts_and_notes_leave_out_the_screens_the_phone_reads(
    text: str, alert: str, note: str
) -> None:
    assert preview(text) == alert
    assert plain(text, 500) == note


def test_a_stray_yui_that_runs_into_a_screen() -> None:
    assert " ".join(without_screens("a ```yui\n```yui\nsay b\n```\nc").split()) == "a c"
