"""Building the chat for a turn from the agent's rows: the guide, the window, roles, taps."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bridges.model.clean import PRESET_WORDS
from bridges.model.history import (
    build_chat,
    conversation,
    guide_for,
    merge_roles,
    row_message,
    short_guide,
    system_prompt,
    tokens,
)

GUIDE = (Path(__file__).resolve().parent.parent / "relay" / "channel_guide.md").read_text()
HEADING = "## You are talking to someone in Yui"


def row(sender: str, body: str, kind: str = "text", **meta: Any) -> dict[str, Any]:
    return {"id": body, "sender": sender, "kind": kind, "body": body, "meta": meta}


def person(body: str, kind: str = "text") -> dict[str, Any]:
    return row("user", body, kind)


def agent(body: str, **meta: Any) -> dict[str, Any]:
    return row("agent", body, **meta)


def test_tokens_err_high() -> None:
    assert tokens("") == 4
    assert tokens("a" * 7) == 6
    assert tokens("a" * 8) == 7


# --- the system message -------------------------------------------------------------------------


def test_a_large_window_gets_the_full_guide_then_the_hosts_words() -> None:
    system = system_prompt(GUIDE, "  You are Coach.\n", 65536)
    assert system == GUIDE.strip() + "\n\nYou are Coach."


@pytest.mark.parametrize("context", [4096, 8192])
def test_a_window_under_three_guides_gets_the_short_one(context: int) -> None:
    assert tokens(GUIDE.strip()) > context / 3
    assert guide_for(GUIDE, context) == short_guide().strip()


def test_the_guide_is_full_exactly_up_to_a_third_of_the_window() -> None:
    third = tokens(GUIDE.strip()) * 3
    assert guide_for(GUIDE, third) == GUIDE.strip()
    assert guide_for(GUIDE, third - 1) == short_guide().strip()


def test_no_guide_from_the_session_means_the_short_one() -> None:
    assert system_prompt(None, "", 65536) == short_guide().strip()


def test_the_short_guide_is_short_and_true_to_the_full_one() -> None:
    text = short_guide()
    assert text.splitlines()[0] == HEADING
    assert tokens(text) < 700 and len(text.splitlines()) <= 50
    examples = re.findall(r"`((?:[a-z]+) [^`]+)`", text)
    fenced = re.findall(r"```yui\n(.*?)```", text, re.DOTALL)
    lines = examples + [line for block in fenced for line in block.splitlines()]
    assert len(examples) >= 6
    for line in lines:
        assert line.split()[0] in PRESET_WORDS, line
        assert line in GUIDE, f"not an example line of the full guide: {line}"
    assert "[yui] n2 choose choice=Swim" in text


# --- rows as messages ---------------------------------------------------------------------------


def test_rows_become_messages_and_what_isnt_conversation_is_left_out() -> None:
    assert row_message(person("hi")) == {"role": "user", "content": "hi"}
    assert row_message(agent("hello")) == {"role": "assistant", "content": "hello"}
    tap = person("[yui] n1 choose choice=Swim", kind="event")
    assert row_message(tap) == {"role": "user", "content": "[yui] n1 choose choice=Swim"}
    assert row_message(agent("Can't reach the model", status=True)) is None
    assert row_message(agent("old status", bridge="status")) is None
    assert row_message(row("agent", "Stopped.", kind="control")) is None
    assert row_message(row("user", "stop", kind="control")) is None
    assert row_message(person("   ")) is None


def test_what_the_person_stopped_is_taken_back() -> None:
    stop = row("user", "stop", kind="control", op="stop")
    stopped = row("agent", "Stopped.", kind="control", op="stop", ok=True)
    history = [person("hi"), agent("hello"), person("a story"), person("a long one"), stop, stopped]
    assert conversation(history) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    chat = build_chat("S", history, [person("hello again")], context=4096, reserve=1024)
    assert chat.messages[-1] == {"role": "user", "content": "hello again"}


def test_runs_of_one_role_are_joined_and_the_chat_starts_with_the_person() -> None:
    messages = [
        {"role": "assistant", "content": "welcome"},
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    assert merge_roles(messages) == [
        {"role": "user", "content": "a\nb"},
        {"role": "assistant", "content": "c\nd"},
    ]


# --- the window ---------------------------------------------------------------------------------


def test_the_turn_is_one_user_message_one_line_per_row() -> None:
    turn = [person("first"), person("[yui] n1 ask answer=Yes", kind="event"), person("third")]
    chat = build_chat("SYS", [], turn, context=4096, reserve=1024)
    assert chat.messages == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "first\n[yui] n1 ask answer=Yes\nthird"},
    ]


def test_the_bridges_notes_come_first_in_the_turn() -> None:
    note = "[yui] note: your last reply used chart, which this app can't draw yet"
    chat = build_chat("SYS", [], [person("and now?")], context=4096, reserve=1024, notes=[note])
    assert chat.messages[-1] == {"role": "user", "content": note + "\nand now?"}


def test_history_goes_oldest_first_with_a_tap_after_the_screen_it_answers() -> None:
    history = [
        person("hi"),
        agent("Which?\n```yui\nchoose Run|Swim\n```"),
        person("[yui] n1 choose choice=Swim", kind="event"),
        agent("Swim it is."),
        agent("Can't reach the model right now.", status=True),
    ]
    chat = build_chat("SYS", history, [person("thanks")], context=4096, reserve=1024)
    assert [m["role"] for m in chat.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert chat.messages[3]["content"] == "[yui] n1 choose choice=Swim"
    assert chat.messages[-1]["content"] == "thanks"
    assert (chat.kept, chat.dropped, chat.over) == (4, 0, False)


def test_a_long_thread_is_cut_whole_rows_at_the_oldest() -> None:
    history = [
        agent(f"{n:03d} " + "y" * 66) if n % 2 else person(f"{n:03d} " + "x" * 66)
        for n in range(40)
    ]
    per_row = tokens(history[0]["body"])
    system, turn = "S" * 350, [person("now")]
    context = 1024 + tokens(system) + tokens("now") + 10 * per_row + per_row // 2
    chat = build_chat(system, history, turn, context=context, reserve=1024)
    assert (chat.kept, chat.dropped) == (10, 30)
    sent = "\n".join(m["content"] for m in chat.messages[1:])
    kept = [r["body"] for r in history[-10:]]
    assert all(body in sent for body in kept)
    assert not any(r["body"][:3] in sent for r in history[:-10])
    assert [m["content"] for m in chat.messages[1:-1]] == kept
    assert chat.messages[-1] == {"role": "user", "content": "now"}


def test_a_row_too_big_for_the_window_ends_it_even_if_older_rows_would_fit() -> None:
    history = [person("old and short"), agent("z" * 20_000), person("recent")]
    chat = build_chat("S", history, [person("now")], context=4096, reserve=1024)
    assert (chat.kept, chat.dropped) == (1, 2)
    assert chat.messages[1:] == [{"role": "user", "content": "recent\nnow"}]


def test_a_turn_over_the_window_is_still_sent() -> None:
    chat = build_chat("S" * 10_000, [person("old")], [person("now")], context=2048, reserve=1024)
    assert chat.over and chat.kept == 0
    assert chat.messages[-1] == {"role": "user", "content": "now"}
