"""Controls end to end: a real relay, `yui run-model` and `yui run-webhook --controls` as real
processes, the person's requests as the app writes them, and nothing else.

Each op lands once and never as a turn; the agent's next turn carries the one-line note; every
refusal reaches the person with its code; and after the round trips nothing key-shaped is
anywhere in `yui_messages` (a relay of this module's own, so the whole table is ours).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridges.controls.store import WRITES_PER_MINUTE
from bridges.controls.text import HIDDEN, looks_like_key
from relay.cluster import cluster_for
from tests.helpers.bridge import Machine, run_model
from tests.helpers.cli import yui
from tests.helpers.controls import TOKEN, ControlsHook
from tests.helpers.http import free_port
from tests.helpers.model import FakeModel
from tests.helpers.relay import LocalRelay, Person

SOUL = "# Qwen\n\nYou are Qwen, brief and kind.\n"
MODEL_KEY = "sk-proj-Qm4Lr8Tz2Wx6Vb1Nc5Hd9Kf3"


@pytest.fixture(scope="module")
def own_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRelay]:
    """A relay for this module alone: the secrets check reads its whole table."""
    home = tmp_path_factory.mktemp("controls-relay")
    port = free_port()
    yui("relay", "up", "--port", str(port), home=home)
    keys = json.loads((home / "relay" / "keys.json").read_text())
    try:
        yield LocalRelay(
            url=f"http://127.0.0.1:{port}",
            home=home,
            anon_key=keys["anon_key"],
            service_key=keys["service_key"],
            jwt_secret=keys["jwt_secret"],
            superuser=cluster_for(home / "relay").conninfo(),
        )
    finally:
        yui("relay", "down", home=home, check=False)
        cluster_for(home / "relay").remove()


@pytest.fixture
def machine(own_relay: LocalRelay, tmp_path: Path) -> Iterator[Machine]:
    host = Machine(tmp_path / "host", own_relay)
    yield host
    host.stop_all()


@pytest.fixture
def hook() -> Iterator[ControlsHook]:
    served = ControlsHook()
    yield served
    served.close()


def ask(person: Person, agent: dict[str, Any], timeout: float = 20, **meta: Any) -> dict:
    """One request as the app writes it, and the host's one answer (found by `meta.for`)."""
    row_id = str(uuid.uuid4())
    meta = {"v": 1, "req": "c-" + row_id[:8], **meta}
    body = f"controls: {meta.get('op')} {meta.get('section')}"
    sent = person.say(agent, body, id=row_id, kind="control", meta=meta)
    assert sent.status_code == 201, sent.text
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [
            r
            for r in person.thread(agent)
            if r["kind"] == "control" and (r["meta"] or {}).get("for") == row_id
        ]
        if found:
            (answer,) = found
            assert answer["sender"] == "agent" and "turn" not in answer["meta"]
            return answer["meta"]
        time.sleep(0.2)
    raise AssertionError(f"no answer to {meta} within {timeout} s")


def say(person: Person, agent: dict[str, Any], body: str) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id).status_code == 201
    return row_id


# --- run-model ----------------------------------------------------------------------------------


def test_run_model_serves_its_personality_and_the_next_turn_hears_of_it(
    own_relay, machine, tmp_path
) -> None:
    server = FakeModel()
    person = own_relay.person()
    agent = machine.pair(person, "Qwen", "qwen")["agent"]
    system = tmp_path / "soul.md"
    system.write_text(SOUL)
    bridge = run_model(machine, server.url, "--system", str(system))
    bridge.wait("controls", agent=agent["handle"])

    listed = ask(person, agent, op="list", section="soul")
    assert [i["id"] for i in listed["items"]] == ["SOUL.md"]
    got = ask(person, agent, op="get", section="soul", id="SOUL.md")
    assert got["item"]["text"] == SOUL
    new = SOUL.replace("brief", "thorough")
    saved = ask(
        person, agent, op="put", section="soul", id="SOUL.md", rev=got["rev"], value={"text": new}
    )
    assert saved["ok"] and system.read_text() == new
    stale = ask(
        person, agent, op="put", section="soul", id="SOUL.md", rev=got["rev"], value={"text": "x"}
    )
    assert stale["error"] == "conflict" and stale["item"]["text"] == new
    model = ask(person, agent, op="get", section="model", id="model")
    assert model["item"]["title"] == "tiny" and "127.0.0.1" not in json.dumps(model)
    assert server.calls == []  # no control row was ever a turn

    hi = say(person, agent, "hi")
    bridge.acked([hi])
    (call,) = server.calls
    system_text = call.body["messages"][0]["content"]
    assert "thorough" in system_text
    user_text = call.body["messages"][-1]["content"]
    notes = [line for line in user_text.splitlines() if "Controls" in line]
    assert len(notes) == 1 and "personality edited" in notes[0]
    trash = list((machine.home / "controls-trash").iterdir())
    assert [p.read_text() for p in trash] == [SOUL]
    log = (machine.home / "controls.log").read_text().splitlines()
    assert [json.loads(line)["op"] for line in log] == ["put"]
    server.close()


def test_run_model_refusals(own_relay, machine, tmp_path) -> None:
    person, other = own_relay.person(), own_relay.person("Other")
    agent = machine.pair(person, "Qwen", "qwen")["agent"]
    system = tmp_path / "soul.md"
    system.write_text(SOUL)
    bridge = run_model(machine, "http://127.0.0.1:9/v1", "--system", str(system))
    bridge.wait("controls", agent=agent["handle"])
    rev = ask(person, agent, op="get", section="soul", id="SOUL.md")["rev"]

    def put(text: str) -> dict:
        meta = {"op": "put", "section": "soul", "id": "SOUL.md", "rev": rev}
        return ask(person, agent, **meta, value={"text": text})

    assert put("")["error"] == "empty"
    assert put("x" * (33 * 1024))["error"] == "too_big"
    gone = ask(person, agent, op="delete", section="soul", id="SOUL.md", rev=rev, confirmed=True)
    assert gone["error"] == "keep_soul"
    assert ask(person, agent, op="get", section="soul", id="../soul.md")["error"] == "bad_id"
    assert ask(person, agent, v=2, op="list", section="soul")["error"] == "version"
    meta = {"v": 1, "req": "c-other", "op": "list", "section": "soul"}
    refused = other.say(agent, "controls", kind="control", meta=meta, user_id=person.id)
    assert refused.status_code in (401, 403)
    assert system.read_text() == SOUL


# --- run-webhook --controls ---------------------------------------------------------------------


def test_run_webhook_forwards_each_op_and_never_makes_a_turn(own_relay, machine, hook) -> None:
    person = own_relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = machine.bridge(hook.url, "--controls")
    bridge.wait("controls", agent=agent["handle"])

    assert [i["id"] for i in ask(person, agent, op="list", section="memory")["items"]] == [
        "m1",
        "m2",
    ]
    got = ask(person, agent, op="get", section="memory", id="m1")
    meta: dict[str, Any] = {
        "op": "put",
        "section": "memory",
        "id": "m1",
        "value": {"text": "Likes green tea"},
    }
    assert ask(person, agent, **meta, rev=got["rev"])["ok"]
    assert ask(person, agent, **meta, rev=got["rev"])["error"] == "conflict"
    paused = ask(person, agent, op="act", section="schedules", id="morning", verb="pause")
    assert paused["item"]["paused"] is True
    rev = ask(person, agent, op="get", section="memory", id="m1")["rev"]
    forget: dict[str, Any] = {"op": "delete", "section": "memory", "id": "m1", "rev": rev}
    assert ask(person, agent, **forget)["error"] == "confirm"
    assert ask(person, agent, **forget, confirmed=True)["deleted"] is True
    assert hook.turns() == []

    hi = say(person, agent, "hi")
    bridge.acked([hi])
    (turn,) = hook.turns()
    assert [m["kind"] for m in turn["messages"]] == ["text"]
    first, *rest = turn["text"].splitlines()
    assert first.startswith("[yui] ") and "Controls" in first
    assert "a memory edited" in first and "a memory forgotten" in first and "paused" in first
    assert rest == ["hi"]


def test_the_31st_write_in_a_minute_is_refused(own_relay, machine, hook) -> None:
    person = own_relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = machine.bridge(hook.url, "--controls")
    bridge.wait("controls", agent=agent["handle"])
    act: dict[str, Any] = {"op": "act", "section": "schedules", "id": "morning", "verb": "run"}
    answers = [ask(person, agent, **act) for _ in range(WRITES_PER_MINUTE + 1)]
    assert [a["ok"] for a in answers[:-1]] == [True] * WRITES_PER_MINUTE
    assert answers[-1]["error"] == "too_fast"


# --- secrets: the whole table -------------------------------------------------------------------


def test_nothing_key_shaped_reaches_the_relay(own_relay, machine, hook, tmp_path) -> None:
    person = own_relay.person()
    qwen = machine.pair(person, "Qwen", "qwen")["agent"]
    echo_machine = Machine(tmp_path / "echo-host", own_relay)
    echo = echo_machine.pair(person, "Echo", "echo")["agent"]
    system = tmp_path / "soul.md"
    system.write_text(SOUL + f"openai key: {MODEL_KEY}\n")
    model = run_model(machine, "http://127.0.0.1:9/v1", "--system", str(system))
    webhook = echo_machine.bridge(hook.url, "--controls")
    model.wait("controls", agent=qwen["handle"])
    webhook.wait("controls", agent=echo["handle"])

    soul = ask(person, qwen, op="get", section="soul", id="SOUL.md")
    assert soul["item"]["read_only"] is True and soul["item"]["text"].endswith(f"{HIDDEN}\n")
    back = {"text": soul["item"]["text"]}
    meta = {"op": "put", "section": "soul", "id": "SOUL.md", "rev": soul["rev"], "value": back}
    assert ask(person, qwen, **meta)["error"] == "read_only"
    memory = ask(person, echo, op="get", section="memory", id="m2")
    assert memory["item"]["read_only"] is True
    ask(person, echo, op="list", section="memory")

    rows = own_relay.sql(
        "select body, meta::text from yui_messages where agent_id = any(%s::uuid[])",
        ([qwen["id"], echo["id"]],),
    )
    assert len(rows) == 8  # four requests, four answers
    for body, meta_text in rows:
        for text in (body, meta_text):
            assert MODEL_KEY not in text and TOKEN not in text
            assert not looks_like_key(text), text[:200]
    echo_machine.stop_all()
