"""The `[yui] <id> <preset> ...` event line and the `yui app tap` value parser."""

from __future__ import annotations

import pytest

from yuilines.events import EventLineError, event_meta, format_event_line, parse_cli_values

# The five lines the relay spec gives, byte for byte.


def test_timer_done_flag_is_bare() -> None:
    line = format_event_line("hiit", "timer", {"done": True, "rounds": 8})
    assert line == "[yui] hiit timer done rounds=8"


def test_answer_with_a_space_is_quoted() -> None:
    assert format_event_line("n1", "ask", {"answer": "Not now"}) == '[yui] n1 ask answer="Not now"'


def test_list_joins_with_pipes() -> None:
    line = format_event_line("n3", "pick", {"picked": ["Dumbbells", "Bands"]})
    assert line == "[yui] n3 pick picked=Dumbbells|Bands"


def test_form_flattens_with_dots() -> None:
    line = format_event_line("n1", "form", {"form": {"mood": 4, "notes": "slept badly"}})
    assert line == '[yui] n1 form form.mood=4 form.notes="slept badly"'


def test_plain_choice() -> None:
    assert format_event_line("n1", "choose", {"choice": "Walk"}) == "[yui] n1 choose choice=Walk"


# Quoting.


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("Walk", "Walk"),
        ("a|b", '"a|b"'),
        ("x=y", '"x=y"'),
        ('say "hi"', '"say \\"hi\\""'),
        ('5"', '"5\\""'),
        ("tab\there", '"tab\\there"'),
        ("two\nlines", '"two\\nlines"'),
        ("back\\slash", "back\\slash"),
        ("back \\ slash", '"back \\\\ slash"'),
        ("💪", "💪"),
        ("café 💪", '"café 💪"'),
        ("3:00\u00a0pm", '"3:00\u00a0pm"'),
        ("", ""),
    ],
)
def test_quoting(text: str, written: str) -> None:
    assert format_event_line("n1", "ask", {"answer": text}) == f"[yui] n1 ask answer={written}"


def test_list_items_are_quoted_one_by_one() -> None:
    line = format_event_line("n3", "pick", {"picked": ["Pull-up bar", "Bands", "a|b"]})
    assert line == '[yui] n3 pick picked="Pull-up bar"|Bands|"a|b"'


def test_empty_list_reads_as_empty_value() -> None:
    value = {"kind": "tictactoe", "move": 5, "o": [], "x": [5]}
    assert format_event_line("n1", "game", value) == "[yui] n1 game kind=tictactoe move=5 o= x=5"


# Keys, flags, numbers.


def test_top_level_keys_are_sorted() -> None:
    line = format_event_line("n2", "choose", {"choice": "Run", "changed": True, "correct": False})
    assert line == "[yui] n2 choose changed choice=Run correct=false"


def test_nested_objects_keep_their_order() -> None:
    value = {"plan": {"who": {"first": "Maya"}, "agents": ["Penny", "Basil"]}}
    line = format_event_line("n1", "plan", value)
    assert line == "[yui] n1 plan plan.who.first=Maya plan.agents=Penny|Basil"


def test_deep_nesting_and_flags_inside_objects() -> None:
    value = {"point": {"series": 0, "index": 2, "x": "Wed", "y": 178.5, "hot": True}}
    line = format_event_line("n4", "chart", value)
    assert line == "[yui] n4 chart point.series=0 point.index=2 point.x=Wed point.y=178.5 point.hot"


def test_none_is_left_out_and_false_is_written() -> None:
    line = format_event_line("c1", "calc", {"result": None, "values": {"x": 0}, "ok": False})
    assert line == "[yui] c1 calc ok=false values.x=0"


@pytest.mark.parametrize(
    ("number", "written"),
    [(4, "4"), (4.0, "4"), (-2, "-2"), (2.5, "2.5"), (0.1, "0.1"), (1e-7, "1e-07"), (-0.0, "0")],
)
def test_numbers(number: float, written: str) -> None:
    assert format_event_line("n1", "slide", {"value": number}) == f"[yui] n1 slide value={written}"


def test_nested_lists_join_with_commas() -> None:
    value = {
        "edit": {"box": [10, 20, 30, 40], "path": [[1, 2], [3.5, 4]], "instruction": "Brighter"}
    }
    line = format_event_line("n1", "image", value)
    assert line == (
        "[yui] n1 image edit.box=10|20|30|40 edit.path=1,2|3.5,4 edit.instruction=Brighter"
    )


def test_photo_path_is_not_quoted() -> None:
    line = format_event_line("c1", "camera", {"photo": "u1/a1/user/5f2c.jpg"})
    assert line == "[yui] c1 camera photo=u1/a1/user/5f2c.jpg"


@pytest.mark.parametrize(("element_id", "preset"), [("", "ask"), ("n 1", "ask"), ("n1", "Ask")])
def test_bad_head_is_refused(element_id: str, preset: str) -> None:
    with pytest.raises(EventLineError):
        format_event_line(element_id, preset, {})


# Meta.


def test_meta_carries_echo() -> None:
    meta = event_meta("n1", "choose", {"choice": "Walk"}, "Walk")
    assert meta == {"id": "n1", "preset": "choose", "value": {"choice": "Walk"}, "echo": "Walk"}


def test_meta_without_echo_has_no_echo_key() -> None:
    meta = event_meta("hiit", "timer", {"done": True, "rounds": 8}, None)
    assert meta == {"id": "hiit", "preset": "timer", "value": {"done": True, "rounds": 8}}
    assert "echo" not in meta


# parse_cli_values.


def test_cli_values_types() -> None:
    values = parse_cli_values(
        ["done", "rounds=8", "pace=5.5", "ok=true", "correct=false", "answer=Not now", "n=-3"]
    )
    assert values == {
        "done": True,
        "rounds": 8,
        "pace": 5.5,
        "ok": True,
        "correct": False,
        "answer": "Not now",
        "n": -3,
    }
    assert isinstance(values["rounds"], int)
    assert isinstance(values["pace"], float)


def test_cli_values_lists_are_strings() -> None:
    assert parse_cli_values(["picked=Dumbbells|Bands"]) == {"picked": ["Dumbbells", "Bands"]}
    assert parse_cli_values(["picked=0|2"]) == {"picked": ["0", "2"]}


def test_cli_values_text_that_only_looks_numeric() -> None:
    assert parse_cli_values(["a=1e5", "b=.5", "c=", "d=a=b", "e=True"]) == {
        "a": "1e5",
        "b": ".5",
        "c": "",
        "d": "a=b",
        "e": "True",
    }


def test_cli_values_dotted_keys_nest() -> None:
    values = parse_cli_values(["form.mood=4", "form.notes=slept badly", "form.extra.ok"])
    assert values == {"form": {"mood": 4, "notes": "slept badly", "extra": {"ok": True}}}


def test_cli_values_last_repeat_wins() -> None:
    assert parse_cli_values(["choice=Walk", "choice=Run"]) == {"choice": "Run"}


def test_cli_round_trip_to_the_line() -> None:
    values = parse_cli_values(["form.mood=4", "form.notes=slept badly"])
    assert format_event_line("n1", "form", values) == (
        '[yui] n1 form form.mood=4 form.notes="slept badly"'
    )


@pytest.mark.parametrize(
    "pairs",
    [
        ["=x"],
        [""],
        ["form..mood=4"],
        [".mood=4"],
        ["form.=4"],
        ["9lives=1"],
        ["a b=1"],
        ["form=1", "form.mood=4"],
        ["form.mood=4", "form=1"],
        ["form.mood=4", "form.mood.deep=1"],
    ],
)
def test_cli_values_refuse_malformed_input(pairs: list[str]) -> None:
    with pytest.raises(EventLineError):
        parse_cli_values(pairs)
