"""`yui run-a2a` end to end: a real relay, the bridge as a real process, and test agents served
by the official a2a-sdk: 1.3 as A2A 1.0, 1.3 with 0.3 compatibility, and the real 0.3.26 (each
test runs against all three; one server per kind for the whole module).

The five-minute path, a question answered across two turns, a SIGKILL mid-task (resumed, never
resent), Stop mid-stream and Stop of a task waiting for input, a picture from the agent, a
failure, a key, and polling instead of streaming.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridges.engine.turns import turn_key
from tests.helpers.a2a import (
    FLAVOURS,
    AgentServer,
    run_a2a,
    serving,
    venv03_missing,
    wait_for,
)
from tests.helpers.a2a_agents import DOT, KEY
from tests.helpers.bridge import Machine
from tests.helpers.http import free_port
from tests.helpers.media import PNG, fetch_signed, signed_path


@pytest.fixture(scope="module", params=FLAVOURS)
def agents(request: pytest.FixtureRequest) -> Iterator[AgentServer]:
    if request.param == "0.3" and (why := venv03_missing()):
        pytest.skip(why)
    with serving(request.param) as server:
        yield server


def say(person: Any, agent: dict[str, Any], body: str, **row: Any) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id, **row).status_code == 201
    return row_id


def stop(person: Any, agent: dict[str, Any]) -> str:
    return say(person, agent, "stop", kind="control", meta={"op": "stop"})


def replies(person: Any, agent: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in person.thread(agent) if r["sender"] == "agent"]


def sent(agents: AgentServer, message_id: str) -> list[dict[str, Any]]:
    """The calls that sent the message `message_id` (a stream or a plain send)."""
    methods = {agents.method("stream"), agents.method("send")}
    return [
        c
        for c in agents.calls()
        if c["method"] in methods and c["params"]["message"]["messageId"] == message_id
    ]


def remote(machine: Machine, agent: dict[str, Any]) -> dict[str, Any]:
    """What the bridge keeps of the agent's side of the thread."""
    return dict(machine.state().get("remote", {}).get(agent["id"], {}))


def cancelled(agents: AgentServer, task: str) -> list[dict[str, Any]]:
    """The CancelTask calls for `task`."""
    return [c for c in agents.calls(agents.method("cancel")) if c["params"]["id"] == task]


def guide_of(message: dict[str, Any]) -> dict[str, Any] | None:
    first = message["parts"][0]
    return first.get("metadata") if "channel_guide" in json.dumps(first.get("metadata")) else None


def test_the_five_minute_path(relay, machine, agents) -> None:
    person = relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = run_a2a(machine, agents.echo)
    bridge.wait("start")
    hi = say(person, agent, "hi")
    bridge.acked([hi])
    (answer,) = replies(person, agent)
    assert answer["body"] == "echo: hi" and answer["meta"] == {"turn": [hi]}

    (call,) = sent(agents, "yui-" + turn_key([hi]))
    assert call["method"] == agents.method("stream")
    assert call["version"] == ("1.0" if agents.modern else None)
    message = call["params"]["message"]
    guide = json.loads(machine.yui("guide", "--json").stdout)
    assert guide_of(message) == {"yui": "channel_guide", "version": guide["version"]}
    assert message["contextId"] == remote(machine, agent)["context"]

    tap = say(
        person,
        agent,
        "[yui] n1 choose choice=Walk",
        kind="event",
        meta={"id": "n1", "preset": "choose", "value": {"choice": "Walk"}, "echo": "Walk"},
    )
    bridge.acked([tap])
    assert replies(person, agent)[-1]["body"] == (
        'echo: [yui] n1 choose choice=Walk\ndata: choose {"choice": "Walk"}'
    )
    (call,) = sent(agents, "yui-" + turn_key([tap]))
    assert call["params"]["message"]["contextId"] == message["contextId"]

    for word, said in (
        ("fail", "Echo couldn't finish this: the oven is on fire"),
        ("quick", "Quick answer."),
        ("pieces", "One, two, three.\n\nCounted."),
    ):
        row = say(person, agent, word)
        bridge.acked([row])
        assert replies(person, agent)[-1]["body"] == said
    assert len(replies(person, agent)) == 5
    assert remote(machine, agent)["state"] == "completed"


def test_a_question_and_its_answer_continue_one_task(relay, machine, agents) -> None:
    person = relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = run_a2a(machine, agents.echo)
    bridge.wait("start")
    book = say(person, agent, "book a table")
    bridge.acked([book])
    assert replies(person, agent)[-1]["body"] == "Which day?"
    waiting = remote(machine, agent)
    assert waiting["state"] == "input-required" and waiting["task"]

    friday = say(person, agent, "Friday")
    bridge.acked([friday])
    assert [r["body"] for r in replies(person, agent)] == ["Which day?", "Booked for Friday."]
    (first,) = sent(agents, "yui-" + turn_key([book]))
    (second,) = sent(agents, "yui-" + turn_key([friday]))
    assert second["params"]["message"]["taskId"] == waiting["task"]
    assert "taskId" not in first["params"]["message"]
    assert guide_of(first["params"]["message"]) and not guide_of(second["params"]["message"])
    assert remote(machine, agent)["state"] == "completed"


def test_a_sigkill_mid_task_resumes_the_task_and_one_answer_lands(relay, machine, agents) -> None:
    person = relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = run_a2a(machine, agents.echo)
    bridge.wait("start")
    gate = uuid.uuid4().hex[:8]
    story = say(person, agent, f"slow {gate}")
    task = wait_for(lambda: remote(machine, agent).get("task"), why="the task's id saved")
    bridge.kill()
    assert replies(person, agent) == []

    def resumed() -> list[dict[str, Any]]:
        looks = agents.calls(agents.method("subscribe")) + agents.calls(agents.method("get"))
        return [c for c in looks if c["params"]["id"] == task]

    again = run_a2a(machine, agents.echo)
    again.wait("turn", turn=[story])
    wait_for(resumed, why="the task looked up again")
    agents.open(gate)
    again.acked([story])
    (answer,) = replies(person, agent)
    assert answer["body"] == "Once upon a time, the end." and answer["meta"] == {"turn": [story]}
    assert len(sent(agents, "yui-" + turn_key([story]))) == 1  # resumed, never resent


def test_stop_mid_stream_cancels_the_task_and_writes_nothing(relay, machine, agents) -> None:
    person = relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = run_a2a(machine, agents.echo)
    bridge.wait("start")
    gate = uuid.uuid4().hex[:8]
    story = say(person, agent, f"slow {gate}")
    task = wait_for(lambda: remote(machine, agent).get("task"), why="the task's id saved")
    stopped = stop(person, agent)
    bridge.acked([story, stopped])
    wait_for(lambda: cancelled(agents, task), why="CancelTask")
    assert agents.task_state(task) == "canceled"
    agents.open(gate)

    stubborn_gate = uuid.uuid4().hex[:8]
    stubborn = say(person, agent, f"stubborn {stubborn_gate}")
    other = wait_for(lambda: remote(machine, agent).get("task"), why="the second task's id")
    again = stop(person, agent)
    bridge.acked([stubborn, again])
    line = wait_for(
        lambda: [r["body"] for r in replies(person, agent) if "couldn't be stopped" in r["body"]],
        why="the line saying the agent couldn't be stopped",
    )[0]
    assert line.startswith("Echo couldn't be stopped (") and "it may still finish" in line
    assert len(cancelled(agents, task)) == len(cancelled(agents, other)) == 1
    agents.open(stubborn_gate)

    after = say(person, agent, "hi")
    bridge.acked([after])
    assert [(r["kind"], r["body"]) for r in replies(person, agent)] == [
        ("control", "Stopped."),
        ("control", "Stopped."),
        ("text", line),
        ("text", "echo: hi"),
    ]


def test_stop_cancels_a_task_left_waiting_for_input(relay, machine, agents) -> None:
    person = relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = run_a2a(machine, agents.echo)
    bridge.wait("start")
    book = say(person, agent, "book a table")
    bridge.acked([book])
    task = remote(machine, agent)["task"]
    stopped = stop(person, agent)
    bridge.acked([stopped])
    wait_for(lambda: cancelled(agents, task), why="CancelTask")
    assert agents.task_state(task) == "canceled"
    assert remote(machine, agent).keys() == {"context"}

    hi = say(person, agent, "Friday")  # a new task now, not the answer to "Which day?"
    bridge.acked([hi])
    assert replies(person, agent)[-1]["body"] == "echo: Friday"
    (call,) = sent(agents, "yui-" + turn_key([hi]))
    assert "taskId" not in call["params"]["message"] and guide_of(call["params"]["message"])


def test_a_file_from_the_agent_is_a_picture_from_a_signed_link(relay, machine, agents) -> None:
    person = relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = run_a2a(machine, agents.echo)
    bridge.wait("start")
    ask = say(person, agent, "picture")
    bridge.acked([ask])
    (answer,) = replies(person, agent)
    text, bytes_fence, url_fence = answer["body"].split("\n\n")
    assert text == "Here it is."
    for fence in (bytes_fence, url_fence):
        kind, link = fence.removeprefix("```yui\n").removesuffix("\n```").split()
        assert kind == "image" and signed_path(link).endswith(".png")
        assert fetch_signed(link).content == DOT == PNG


def test_the_persons_photo_goes_as_a_file_part(relay, machine, agents, tmp_path: Path) -> None:
    machine.yui("app", "signup", "Pat")
    added = json.loads(machine.yui("app", "add-agent", "Echo", "--json").stdout)
    machine.yui("pair", added["code"], "--ref", "echo")
    bridge = run_a2a(machine, agents.echo)
    bridge.wait("start")
    photo = tmp_path / "dot.png"
    photo.write_bytes(PNG)
    row = json.loads(machine.yui("app", "photo", str(photo), "--json").stdout)
    bridge.acked([row["id"]])
    thread = [json.loads(x) for x in machine.yui("app", "thread", "--json").stdout.splitlines()]
    assert thread[-1]["body"].endswith(f"\nfile: image/png {len(PNG)} bytes")


def test_a_key_from_the_environment_and_one_turned_down(relay, machine, agents) -> None:
    person = relay.person()
    agent = machine.pair(person, "Vault", "vault")["agent"]
    refused = machine.yui("run-a2a", agents.vault, "--try", "hi", check=False)
    assert refused.returncode == 1 and "Vault asks for a key (a bearer token)" in refused.stderr

    bridge = run_a2a(machine, agents.vault, "--key-env", "VAULT_KEY", VAULT_KEY=KEY)
    bridge.wait("start")
    hi = say(person, agent, "hi")
    bridge.acked([hi])
    cmdline = Path(f"/proc/{bridge.process.pid}/cmdline").read_bytes().decode()
    assert bridge.terminate() == 0
    out, err = bridge.output()

    wrong = "wrong-" + uuid.uuid4().hex
    turned_down = run_a2a(machine, agents.vault, "--key-stdin", stdin=wrong + "\n")
    turned_down.wait("start")
    again = say(person, agent, "again")
    turned_down.acked([again])
    assert turned_down.terminate() == 0
    out2, err2 = turned_down.output()

    assert [r["body"] for r in replies(person, agent)] == [
        "echo: hi",
        "Vault couldn't answer: the agent turned the key down (401: a bearer key is needed).",
    ]
    assert agents.calls()[-1]["authorization"] == f"Bearer {wrong}"
    files = "".join(p.read_text(errors="replace") for p in machine.home.rglob("*") if p.is_file())
    for secret in (KEY, wrong):
        assert all(secret not in seen for seen in (cmdline, out, err, out2, err2, files))


def test_polling_instead_of_streaming(relay, machine, agents) -> None:
    person = relay.person()
    agent = machine.pair(person, "Echo", "echo")["agent"]
    bridge = run_a2a(machine, agents.echo, "--no-stream")
    bridge.wait("start")
    for word, said in (("pieces", "One, two, three.\n\nCounted."), ("book", "Which day?")):
        row = say(person, agent, word)
        bridge.acked([row])
        assert replies(person, agent)[-1]["body"] == said
        (call,) = sent(agents, "yui-" + turn_key([row]))
        assert call["method"] == agents.method("send")
    friday = say(person, agent, "Friday")
    bridge.acked([friday])
    assert replies(person, agent)[-1]["body"] == "Booked for Friday."


def test_try_prints_what_yui_would_show(relay, machine, agents) -> None:
    tried = machine.yui("run-a2a", agents.echo, "--try", "pieces")
    *answer, verdict = tried.stdout.rstrip("\n").split("\n")
    assert "\n".join(answer) == "One, two, three.\n\nCounted."
    protocol = "A2A 1.0" if agents.modern else "A2A 0.3"
    assert verdict.startswith(f"-- completed (Echo, {protocol} over JSON-RPC, streamed, ")

    words = f"book {uuid.uuid4().hex[:8]}"
    polled = machine.yui("run-a2a", agents.echo, "--try", words, "--no-stream", "--json")
    got = json.loads(polled.stdout)
    assert (got["text"], got["state"], got["streamed"]) == ("Which day?", "input-required", False)
    (call,) = [
        c
        for c in agents.calls(agents.method("send"))
        if c["params"]["message"]["parts"][-1].get("text") == words
    ]
    assert got["guide"] and guide_of(call["params"]["message"])


def test_try_with_no_agent_listening_exits_75(machine) -> None:
    tried = machine.yui("run-a2a", f"http://127.0.0.1:{free_port()}", "--try", "hi", check=False)
    assert tried.returncode == 75 and "can't reach the agent at 127.0.0.1:" in tried.stderr
