"""The Yui platform in the real Hermes (hermes-agent 0.19.0), offline, on a fake model.

One computer's Hermes for the whole module: profile `alpha` installed with `yui hermes
install`, paired with `hermes -p alpha yui pair`, its gateway run as `hermes -p alpha gateway
run`. A person's "hi" reaches the model with the channel guide and is answered once; what
arrives during a slow turn goes in together; Stop abandons the model's request; a SIGKILL
mid-turn is asked again and answered once; `hermes send` and cron land as hand-overs; a second
profile's gateway serves its own agent, with presence per gateway.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import yui
from tests.helpers.hermes import (
    Brain,
    Gateway,
    HermesMachine,
    gated,
    held,
    hermes_missing,
    user_text,
    wait_for,
)
from tests.helpers.media import JPEG, PNG, fetch_signed, signed_path
from tests.helpers.model import FakeModel, says
from tests.helpers.push import phone
from tests.helpers.push import rows as readable
from tests.helpers.relay import LocalRelay, Person

pytestmark = pytest.mark.skipif(bool(hermes_missing()), reason=hermes_missing() or "")

NOTICES = ("Interrupting", "Stopped", "queued", "shutting down", "home channel", "⚡", "busy")


@dataclass
class World:
    machine: HermesMachine
    brain: Brain
    model: FakeModel
    person: Person
    agent: dict[str, Any]
    gateway: Gateway


@pytest.fixture(scope="module")
def world(relay: LocalRelay, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    brain = Brain()
    model = FakeModel(brain.script)
    machine = HermesMachine(tmp_path_factory.mktemp("hermes"), relay)
    try:
        machine.make_profile("alpha", model.url)
        person = app_person(relay, machine.home / "app")
        phone(person)  # so hand-overs and answers are pushed, and recorded
        agent, code = person.add_agent("Alpha")
        machine.hermes("-p", "alpha", "yui", "pair", code)
        gateway = machine.gateway("alpha")
        online(person, "Alpha")
        yield World(machine, brain, model, person, agent, gateway)
    finally:
        machine.stop_all()
        model.close()


def app_person(relay: LocalRelay, home: Path) -> Person:
    """A person signed up with `yui app signup`, so `yui app` can speak for them too."""
    yui("app", "signup", "tester", home=home, env=app_env(relay))
    record = json.loads((home / "app.json").read_text())["people"]["tester"]
    return Person(relay, record["user_id"], record["access_token"])


def app_env(relay: LocalRelay) -> dict[str, str]:
    return {"YUI_URL": relay.url, "YUI_SERVICE_KEY": relay.service_key}


def online(person: Person, name: str) -> None:
    wait_for(lambda: person.listing()[name]["presence"] == "online", what=f"{name} online")


def say(person: Person, agent: dict[str, Any], body: str, **row: Any) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id, **row).status_code == 201
    return row_id


def from_agent(world: World, agent: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [r for r in world.person.thread(agent or world.agent) if r["sender"] == "agent"]


def answers_to(world: World, row_id: str) -> list[dict[str, Any]]:
    return [r for r in from_agent(world) if row_id in ((r.get("meta") or {}).get("turn") or [])]


def answered(world: World, row_id: str, timeout: float = 90) -> dict[str, Any]:
    found = wait_for(lambda: answers_to(world, row_id), timeout, f"an answer to {row_id}")
    return dict(found[0])


def test_hi_reaches_the_model_with_the_guide_and_is_answered_once(world: World) -> None:
    before = len(world.brain.turns)
    hi = say(world.person, world.agent, "hi")
    reply = answered(world, hi)
    call = world.brain.turns[before]
    system = call.messages[0]["content"]
    assert "Yui channel guide v" in system
    assert "## You are talking to someone in Yui" in system
    assert user_text(call) == "hi"
    assert reply["meta"]["turn"] == [hi]
    assert reply["body"] == f"Answer {before + 1}"
    row = lambda: next(r for r in world.person.thread(world.agent) if r["id"] == hi)  # noqa: E731
    wait_for(lambda: row()["handled_at"], what="hi handled")
    assert len(answers_to(world, hi)) == 1

    def status() -> dict[str, Any]:
        shown = world.machine.hermes("-p", "alpha", "yui", "status", "--json")
        return dict(json.loads(shown.stdout))

    # A written reply leaves the state file's outbox with the bridge's next edit (within 2 s).
    shown = wait_for(lambda: (now := status())["outbox"] == 0 and now, 20, "an empty outbox")
    assert [(a["name"], a["presence"]) for a in shown["agents"]] == [("Alpha", "online")]
    assert shown["profile"] == "alpha"


def test_messages_sent_during_a_slow_turn_go_in_together(world: World) -> None:
    gate = threading.Event()
    world.brain.plan(gated(gate, "first, slowly"))
    before = len(world.brain.turns)
    first = say(world.person, world.agent, "one")
    wait_for(lambda: len(world.brain.turns) > before, what="the slow turn")
    later = [say(world.person, world.agent, text) for text in ("two", "three", "four")]
    gate.set()
    answered(world, first)
    together = answered(world, later[0])
    assert together["meta"]["turn"] == later
    assert [user_text(c) for c in world.brain.turns[before:]] == ["one", "two\nthree\nfour"]
    bodies = [r["body"] for r in from_agent(world)]
    assert not [b for b in bodies if any(n in b for n in NOTICES)], bodies


def test_a_command_goes_to_hermes_and_its_answer_is_the_reply(world: World) -> None:
    before = len(world.brain.turns)
    fresh = say(world.person, world.agent, "/new")
    reply = answered(world, fresh)
    assert "session" in reply["body"].lower(), reply["body"]
    assert "/approve" not in reply["body"] and "confirm" not in reply["body"].lower()
    assert len(world.brain.turns) == before  # Hermes answers it without the model


def test_stop_mid_turn_abandons_the_model_request(world: World) -> None:
    world.brain.plan(held)
    before = len(world.brain.turns)
    slow = say(world.person, world.agent, "think very hard")
    wait_for(lambda: len(world.brain.turns) > before, what="the held turn")
    stop = say(world.person, world.agent, "stop", kind="control", meta={"op": "stop"})
    stopped = wait_for(
        lambda: [r for r in from_agent(world) if (r.get("meta") or {}).get("for") == stop],
        what="Stopped.",
    )
    assert [r["body"] for r in stopped] == ["Stopped."]
    assert wait_for(world.brain.turns[before].closed.is_set, what="the request abandoned")
    after = say(world.person, world.agent, "and now?")
    answered(world, after)
    assert answers_to(world, slow) == []
    assert [r["body"] for r in from_agent(world) if r["body"] == "Stopped."] == ["Stopped."]


def test_a_photo_reaches_hermes_as_a_local_file_and_as_vision(world: World) -> None:
    picture = world.machine.home / "IMG_0001.jpg"
    picture.write_bytes(JPEG)
    before = len(world.brain.turns)
    taken = app(world, "photo", str(picture), "--agent", "Alpha")
    answered(world, taken["id"])
    call = world.brain.turns[before]
    content: Any = call.messages[-1]["content"]
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    text = " ".join(p.get("text", "") for p in parts if p.get("type") == "text")
    cache = world.machine.profile_home("alpha") / "yui" / "cache" / "media"
    assert f"[yui] c1 camera photo={cache}/" in text
    images = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    assert len(images) == 1 and images[0].startswith("data:image/jpeg;base64,")


def test_a_picture_in_hermess_answer_is_stored_and_linked(world: World) -> None:
    chart = world.machine.home / "chart.png"
    chart.write_bytes(PNG)
    world.brain.plan(says(f"Here is the chart\nMEDIA:{chart}"))
    asked = say(world.person, world.agent, "draw me a chart")
    answer = answered(world, asked)
    words, fence = answer["body"].split("\n\n")
    assert words == "Here is the chart"
    kind, link = fence.removeprefix("```yui\n").removesuffix("\n```").split()
    assert kind == "image"
    assert signed_path(link).endswith(".png")
    assert fetch_signed(link).content == PNG


def test_controls_reach_the_profiles_soul_and_memory(world: World) -> None:
    home = world.machine.profile_home("alpha")
    (home / "SOUL.md").write_text("# Alpha\n\nKind and brief.\n")
    (home / "memories").mkdir(exist_ok=True)
    (home / "memories" / "MEMORY.md").write_text("Likes tea\n§\nLives in Oslo")
    sections = app(world, "controls", "report", "--agent", "Alpha")["controls"]["sections"]
    assert sections == {
        "soul": "rw",
        "memory": "rwd",
        "skills": "r",
        "schedules": "rwd",
        "model": "r",
        "channels": "r",
    }
    soul = app(world, "controls", "get", "soul", "SOUL.md", "--agent", "Alpha")
    assert soul["item"]["text"] == "# Alpha\n\nKind and brief.\n"
    app(world, "controls", "put", "soul", "SOUL.md", "--text", "# Alpha\n\nWarm.\n",
        "--rev", soul["rev"], "--agent", "Alpha")  # fmt: skip
    assert (home / "SOUL.md").read_text() == "# Alpha\n\nWarm.\n"
    memory = app(world, "controls", "list", "memory", "--agent", "Alpha")["items"]
    assert [m["title"] for m in memory] == ["Likes tea", "Lives in Oslo"]
    app(world, "controls", "delete", "memory", memory[0]["id"], "--yes", "--agent", "Alpha")
    assert (home / "memories" / "MEMORY.md").read_text().strip() == "Lives in Oslo"
    model = app(world, "controls", "get", "model", "model", "--agent", "Alpha")["item"]
    assert model["title"] == "fake-model" and "dummy" not in json.dumps(model)


def app(world: World, *args: str) -> Any:
    """`yui app …` as the person, its one JSON answer."""
    done = yui(
        "app", *args, "--json", home=world.machine.home / "app", env=app_env(world.machine.relay)
    )
    return json.loads(done.stdout)


def test_hermes_send_lands_as_a_hand_over(world: World) -> None:
    world.machine.hermes("-p", "alpha", "send", "--to", "yui", "Your report is ready")
    handed = wait_for(lambda: [r for r in from_agent(world) if r["body"] == "Your report is ready"])
    assert not (handed[0].get("meta") or {}).get("turn")
    pushed = [n["body"] for n in readable(world.person, "yui_notifications")]
    assert pushed[-1] == "Alpha has something for you in Yui", pushed


def cron_job(machine: HermesMachine, profile: str, text: str) -> None:
    """A job delivering `text` to yui, due at the scheduler's next tick (no model needed)."""
    scripts = machine.profile_home(profile) / "scripts"
    scripts.mkdir(exist_ok=True)
    (scripts / "digest.sh").write_text(f"echo '{text}'\n")
    machine.hermes("-p", profile, "cron", "create", "1h", "--name", "digest", "--deliver", "yui",
                   "--script", "digest.sh", "--no-agent")  # fmt: skip
    machine.hermes("-p", profile, "cron", "run", _job_id(machine.profile_home(profile), "digest"))


def _job_id(home: Path, name: str) -> str:
    jobs = json.loads((home / "cron" / "jobs.json").read_text())
    jobs = jobs.get("jobs", jobs) if isinstance(jobs, dict) else jobs
    return str(next(j["id"] for j in jobs if j.get("name") == name))


def test_two_profiles_serve_their_own_agents_with_presence_per_gateway(world: World) -> None:
    machine = world.machine
    machine.make_profile("bravo", world.model.url)
    bravo, code = world.person.add_agent("Bravo")
    machine.hermes("-p", "bravo", "yui", "pair", code)
    cron_job(machine, "bravo", "The nightly digest")  # the gateway's scheduler delivers it
    second = machine.gateway("bravo")
    online(world.person, "Bravo")
    to_bravo = say(world.person, bravo, "hello bravo")
    bravos = lambda: [r for r in world.person.thread(bravo) if r["sender"] == "agent"]  # noqa: E731
    wait_for(lambda: len(bravos()) == 2, what="bravo's answer and its cron delivery")
    digest, reply = sorted(bravos(), key=lambda r: "The nightly digest" not in r["body"])
    assert "The nightly digest" in digest["body"] and not (digest.get("meta") or {}).get("turn")
    assert reply["meta"]["turn"] == [to_bravo]
    pushed = [n["body"] for n in readable(world.person, "yui_notifications")]
    assert "Bravo has something for you in Yui" in pushed
    state = json.loads((machine.profile_home("alpha") / "yui" / "state.json").read_text())
    assert bravo["id"] not in state["floors"]  # alpha's gateway never reads bravo's rows
    assert second.stop() is not None  # Hermes says "shutting down" to its home channel: not here
    wait_for(lambda: world.person.listing()["Bravo"]["presence"] == "offline", what="bravo off")
    shown = yui("app", "agents", "--json", home=machine.home / "app", env=app_env(machine.relay))
    presence = {a["name"]: a["presence"] for a in map(json.loads, shown.stdout.splitlines())}
    assert presence == {"Alpha": "online", "Bravo": "offline"}
    assert sorted(r["id"] for r in bravos()) == sorted([digest["id"], reply["id"]])


def test_a_sigkill_mid_turn_is_asked_again_and_answered_once(world: World) -> None:
    world.brain.plan(held)
    before = len(world.brain.turns)
    lost = say(world.person, world.agent, "survive this")
    wait_for(lambda: len(world.brain.turns) > before, what="the held turn")
    world.gateway.kill()
    world.gateway = world.machine.gateway("alpha")
    reply = answered(world, lost)
    assert reply["meta"]["turn"] == [lost]
    # Asked again by the engine, and only by it: Hermes doesn't resume the session on its own.
    asked = [user_text(c) for c in world.brain.turns[before:]]
    assert [text.rsplit("\n", 1)[-1] for text in asked] == ["survive this"] * 2, asked
    assert len(answers_to(world, lost)) == 1
