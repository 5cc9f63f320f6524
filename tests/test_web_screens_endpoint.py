"""`/functions/v1/yui-screens`, the one parser the web app asks: a message's screens read as
the person (another person's row is not there for them), gated for the browser's build, and
the event a tap writes built by the same code as `yui app tap` (body, meta and echo)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from relay.gateway.screens import echo_of
from tests.helpers.relay import LocalRelay, Person
from yuilines.events import event_meta, format_event_line

REPLY = """Here's the plan.
```yui
timeline Trip
done Booked
now Packing
end
shapes Map
shape circle Home
end
plan@trip Weekend
ask@busy Busy on Saturday?
choose@where Where to? Park|Beach
slide@energy Energy 1-5
end
choose@meal What sounds good? Pasta|Curry
```
[yui] note: never drawn
Bye."""


def agent_row(relay: LocalRelay, person: Person, agent: dict[str, Any], body: str) -> str:
    """An agent's message in the person's thread (as its host would write it)."""
    row = str(uuid.uuid4())
    relay.sql(
        "insert into yui_messages (id, user_id, agent_id, sender, kind, body)"
        " values (%s, %s, %s, 'agent', 'text', %s)",
        (row, person.id, agent["id"], body),
    )
    return row


@pytest.fixture
def world(relay: LocalRelay) -> tuple[LocalRelay, Person, Person, str]:
    """Two people; the first has an agent whose message holds REPLY."""
    ann, bob = relay.person("Ann"), relay.person("Bob")
    agent, _ = ann.add_agent("Planner")
    return relay, ann, bob, agent_row(relay, ann, agent, REPLY)


def screens(relay: LocalRelay, token: str | None, **body: Any) -> Any:
    return relay.fn("yui-screens", {"action": "screen", **body}, token)


def test_a_message_comes_back_as_words_and_screens_gated_for_the_build(
    world: tuple[LocalRelay, Person, Person, str],
) -> None:
    relay, ann, _, row = world
    answer = screens(relay, ann.token, message=row, build=100)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["id"] == row
    kinds = [part["kind"] for part in data["parts"]]
    assert kinds == ["words", "screen", "words", "screen", "words"]
    first, shapes_words = data["parts"][1], data["parts"][2]["text"]
    assert [op["preset"] for op in first["ops"] if op["op"] == "add"] == ["timeline", "done", "now"]
    assert shapes_words == "**Map**\n- Home"  # build 100 draws no shapes (131): its words
    assert data["gated"] == ["shapes"]
    assert data["parts"][-1] == {"kind": "words", "text": "Bye."}  # the [yui] line is dropped
    newer = screens(relay, ann.token, message=row, build=200).json()
    assert newer["gated"] == [] and [p["kind"] for p in newer["parts"]] == [
        "words",
        "screen",
        "words",
    ]


def test_only_the_person_whose_row_it_is_gets_its_screens(
    world: tuple[LocalRelay, Person, Person, str],
) -> None:
    relay, _, bob, row = world
    assert screens(relay, bob.token, message=row).status_code == 404
    tap = {"action": "event", "message": row, "id": "meal", "preset": "choose"}
    answer = relay.fn("yui-screens", {**tap, "value": {"choice": "Pasta"}}, bob.token)
    assert (answer.status_code, answer.json()) == (404, {"error": "not_found"})
    assert screens(relay, None, message=row).status_code == 401
    assert screens(relay, relay.service_key, message=row).status_code == 401
    assert screens(relay, bob.token, message="nope").json() == {"error": "invalid_message"}
    assert screens(relay, bob.token, message=row, build="new").status_code == 400


def event(relay: LocalRelay, person: Person, row: str, **tap: Any) -> Any:
    return relay.fn(
        "yui-screens", {"action": "event", "message": row, "build": 413, **tap}, person.token
    )


def test_a_tap_is_built_as_yui_app_tap_builds_it(
    world: tuple[LocalRelay, Person, Person, str],
) -> None:
    relay, ann, _, row = world
    answer = event(relay, ann, row, id="meal", preset="choose", value={"choice": "Curry"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "body": format_event_line("meal", "choose", {"choice": "Curry"}),
        "meta": event_meta("meal", "choose", {"choice": "Curry"}, "Curry"),
        "echo": "Curry",
    }
    plan = {"plan": {"busy": "Yes", "where": "Beach", "energy": 4}}
    folded = event(relay, ann, row, id="trip", preset="plan", value=plan).json()
    assert folded["body"] == "[yui] trip plan plan.busy=Yes plan.where=Beach plan.energy=4"
    assert folded["echo"] == "Busy on Saturday? Yes\nWhere to? Beach\nEnergy: 4"
    assert event(relay, ann, row, id="ghost", preset="choose", value={}).status_code == 404
    wrong = event(relay, ann, row, id="meal", preset="ask", value={"answer": "Yes"})
    assert (wrong.status_code, wrong.json()) == (400, {"error": "invalid_event"})
    bad_key = event(relay, ann, row, id="meal", preset="choose", value={"a b": 1})
    assert bad_key.status_code == 400


@pytest.mark.parametrize(
    ("preset", "value", "props", "echo"),
    [
        ("ask", {"answer": "Not now"}, {}, "Not now"),
        ("pick", {"picked": ["Bands", "Dumbbells"]}, {}, "Bands, Dumbbells"),
        ("slide", {"value": 4}, {}, "4"),
        ("camera", {"photo": "u/a/user/x.jpg"}, {}, "Photo"),
        ("gallery", {"picked": [1, 0]}, {"caps": ["Lake", "Dawn"]}, "Dawn, Lake"),
        (
            "form",
            {"form": {"full_name": "Ann", "ok": True, "pic": "u/a/user/x.jpg", "n": ""}},
            {"fields": [{"key": "full_name"}, {"key": "pic", "type": "photo"}, {"key": "n"}]},
            "full name: Ann, ok: Yes, pic: Photo",
        ),
        ("image", {"edit": {"box": [0, 0, 50, 50], "instruction": "No sky"}}, {}, "No sky"),
        ("timer", {"done": True, "rounds": 8}, {}, None),
        ("list", {"item": "Eggs", "checked": True}, {}, None),
    ],
)
def test_the_echo_follows_the_fold_rules(
    preset: str, value: dict[str, Any], props: dict[str, Any], echo: str | None
) -> None:
    assert echo_of(preset, value, props) == echo


def test_each_screen_of_a_message_counts_its_own_ids(
    world: tuple[LocalRelay, Person, Person, str],
) -> None:
    relay, ann, _, _ = world
    agent = next(iter(ann.agents.values()))
    row = agent_row(
        relay, ann, agent, "```yui\nask Ready?\n```\nThen:\n```yui\nchoose Where? A|B\n```"
    )
    parts = screens(relay, ann.token, message=row).json()["parts"]
    assert [p["kind"] for p in parts] == ["screen", "words", "screen"]
    tap = {"id": "n1", "preset": "choose", "value": {"choice": "B"}}
    assert event(relay, ann, row, part=2, **tap).json()["body"] == "[yui] n1 choose choice=B"
    assert event(relay, ann, row, part=0, **tap).status_code == 400  # n1 there is an ask
    assert event(relay, ann, row, part=-1, **tap).status_code == 400


def test_ids_that_last_make_a_later_patch_a_patch(
    world: tuple[LocalRelay, Person, Person, str],
) -> None:
    relay, ann, _, _ = world
    agent = next(iter(ann.agents.values()))
    row = agent_row(relay, ann, agent, "```yui\n~today items=Eggs|Tea\n```")
    patch = {"op": "patch", "screen": "1", "target": "today", "props": {"items": ["Eggs", "Tea"]}}
    lasting = screens(relay, ann.token, message=row, known={"today": "list"}).json()
    assert lasting["parts"] == [{"kind": "screen", "ops": [patch]}]
    unknown = screens(relay, ann.token, message=row).json()  # not a lasting id: a bad line
    assert unknown["parts"] == [{"kind": "screen", "ops": []}]
    for bad in ({"to day": "list"}, {"today": "nope"}, ["today"]):
        refused = screens(relay, ann.token, message=row, known=bad)
        assert (refused.status_code, refused.json()) == (400, {"error": "invalid_known"})
