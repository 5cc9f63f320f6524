"""`yui run-model` end to end: a real relay, `yui` as real processes, fake OpenAI-compatible
servers on loopback (real HTTP, real server-sent events).

A turn gives one reply made of the streamed text; the model reads the guide and the thread in
order within its window; the answer is cleaned; a SIGKILL mid-stream, a server that is away,
one that says no, and Stop all end the way the person expects; the key never shows.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridges.model.history import short_guide, tokens
from bridges.model.plugin import UNREACHABLE
from tests.helpers.bridge import Machine, run_model
from tests.helpers.faultproxy import FaultProxy
from tests.helpers.http import free_port
from tests.helpers.model import Call, FakeModel, Sse, error, says


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    server = FakeModel()
    yield server
    server.close()


def say(person, agent, body: str) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id).status_code == 201
    return row_id


def replies(person, agent) -> list[dict]:
    return [r for r in person.thread(agent) if r["sender"] == "agent"]


def bodies(person, agent) -> list[str]:
    return [r["body"] for r in replies(person, agent)]


def guide_body(machine: Machine) -> str:
    return json.loads(machine.yui("guide", "--json").stdout)["body"]


# --- a turn -------------------------------------------------------------------------------------


def test_a_turn_is_one_reply_of_the_streamed_text(relay, machine, fake, tmp_path) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    system = tmp_path / "system.txt"
    system.write_text("You are Coach, a running coach.\n")
    bridge = run_model(machine, fake.url, "--context", "32768", "--system", str(system))
    bridge.wait("start")
    hi = say(person, agent, "hi")

    (call,) = fake.wait_calls(1)
    bridge.acked([hi])
    (answer,) = replies(person, agent)
    assert answer["body"] == "Hello there" and answer["meta"] == {"turn": [hi]}
    assert call.body.keys() == {"model", "messages", "stream"} and call.stream
    assert call.messages == [
        {
            "role": "system",
            "content": guide_body(machine).strip() + "\n\nYou are Coach, a running coach.",
        },
        {"role": "user", "content": "hi"},
    ]
    done = next(r for r in person.thread(agent) if r["id"] == hi)
    assert done["delivered_at"] and done["handled_at"]


def test_a_small_window_and_a_server_that_wont_stream(relay, machine) -> None:
    server = FakeModel(
        lambda call: error(400, "stream is not supported") if call.stream else says("Plain")(call)
    )
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = run_model(machine, server.url + "/chat/completions")
    bridge.wait("start")
    first = say(person, agent, "one")
    bridge.acked([first])
    second = say(person, agent, "two")
    bridge.acked([second])
    assert [c.stream for c in server.calls] == [True, False, False]
    assert server.calls[0].messages[0] == {"role": "system", "content": short_guide().strip()}
    assert server.calls[2].messages[1:] == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "Plain"},
        {"role": "user", "content": "two"},
    ]
    assert bodies(person, agent) == ["Plain", "Plain"]
    server.close()


def test_the_thread_goes_in_order_and_is_cut_at_its_oldest_rows(relay, machine, fake) -> None:
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    seeded: list[tuple[str, str, str, dict[str, Any]]] = []
    for n in range(40):
        sender = "agent" if n % 2 else "user"
        seeded.append((sender, f"row-{n:02d} " + ("a" if n % 2 else "p") * 90, "text", {}))
        if n == 37:
            seeded.append(("agent", UNREACHABLE, "text", {"status": True}))
            seeded.append(("agent", "Stopped.", "control", {"op": "stop"}))
    for n, (sender, body, kind, meta) in enumerate(seeded):
        relay.sql(
            "insert into yui_messages (user_id, agent_id, sender, body, kind, meta, created_at,"
            " delivered_at, handled_at) values (%s, %s, %s, %s, %s, %s,"
            " now() - interval '1 hour' + %s * interval '1 second', now(), now())",
            (person.id, agent["id"], sender, body, kind, json.dumps(meta), n),
        )
    bridge = run_model(machine, fake.url, "--context", "1536", "--max-tokens", "256", "--poll-only")
    bridge.wait("start")
    now = say(person, agent, "now")
    (call,) = fake.wait_calls(1)
    bridge.acked([now])

    conversation = [body for _, body, kind, meta in seeded if kind == "text" and not meta]
    system = call.messages[0]["content"]
    room = 1536 - 256 - tokens(system) - tokens("now")
    fit = room // tokens(conversation[0])
    assert 0 < fit < len(conversation)
    window = conversation[-fit:]
    if window[0].endswith("a"):  # the chat starts with the person
        window = window[1:]
    assert call.body["max_tokens"] == 256
    assert [m["content"] for m in call.messages[1:]] == [*window, "now"]
    assert [m["role"] for m in call.messages[1:]] == ["user", "assistant"] * (len(window) // 2) + [
        "user"
    ]


def test_each_cleaning_rule_reaches_the_person(relay, machine) -> None:
    answers = {
        "think": "<think>they want tea</think>\nTea it is.",
        "yaml": "Pick one.\n```yaml\nchoose Tea|Coffee\n```",
        "echo": "[yui] n1 choose choice=Tea\nTea, then.",
        "open": "Ready?\n```yui\nask Ready?",
    }
    empties: list[Call] = []

    def script(call: Call) -> Sse:
        if call.last == "nothing" or (call.last == "empty" and not empties):
            empties.append(call)
            return Sse([])
        return Sse([answers.get(call.last, "Second try.")])

    server = FakeModel(script)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = run_model(machine, server.url)
    bridge.wait("start")
    for word in [*answers, "empty"]:
        bridge.acked([say(person, agent, word)])
    assert bodies(person, agent) == [
        "Tea it is.",
        "Pick one.\n```yui\nchoose Tea|Coffee\n```",
        "Tea, then.",
        "Ready?\n```yui\nask Ready?\n```",
        "Second try.",
    ]
    assert [c.last for c in server.calls][-2:] == ["empty", "empty"]

    nothing = say(person, agent, "nothing")  # empty twice: one status line, no reply
    bridge.acked([nothing])
    last = replies(person, agent)[-1]
    assert (last["body"], last["meta"]) == ("The model gave no answer.", {"status": True})
    assert [c.last for c in server.calls][-2:] == ["nothing", "nothing"]
    server.close()


# --- crashes, a server away, a server that says no ---------------------------------------------


def test_a_sigkill_mid_stream_ends_in_exactly_one_answer(relay, machine) -> None:
    server = FakeModel(
        lambda call: Sse(["Half an"], then="hold") if len(server.calls) == 1 else Sse(["Whole"])
    )
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = run_model(machine, server.url)
    bridge.wait("start")
    hi = say(person, agent, "hi")
    server.wait_calls(1)
    time.sleep(0.3)  # the first piece is on its way
    assert machine.state()["inflight"][agent["id"]]["ids"] == [hi]
    bridge.kill()
    assert replies(person, agent) == []

    again = run_model(machine, server.url)
    again.acked([hi])
    calls = server.wait_calls(2)
    assert calls[0].messages == calls[1].messages
    (answer,) = replies(person, agent)
    assert answer["body"] == "Whole" and answer["meta"] == {"turn": [hi]}
    time.sleep(1)
    assert len(server.calls) == 2 and len(replies(person, agent)) == 1
    server.close()


def test_a_server_away_gets_one_status_line_then_the_answer(relay, machine, fake) -> None:
    proxy = FaultProxy(fake.port)
    proxy.down()
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = run_model(machine, proxy.url + "/v1", "--note-after", "1.5")
    bridge.wait("start")
    hi = say(person, agent, "hi")
    first = bridge.wait("retry", what="agent")
    assert "can't reach the model server" in first["reason"]
    status = bridge.wait("status")
    assert status["body"] == UNREACHABLE
    bridge.wait("retry", what="agent")  # asked again after the status line: no second one
    proxy.restore()
    bridge.acked([hi], timeout=60)

    rows = replies(person, agent)
    assert [(r["body"], r["meta"]) for r in rows] == [
        (UNREACHABLE, {"status": True}),
        ("Hello there", {"turn": [hi]}),
    ]
    later = say(person, agent, "and now?")
    bridge.acked([later])
    assert all(UNREACHABLE not in m["content"] for m in fake.calls[-1].messages[1:])
    proxy.close()


def test_an_unknown_model_gets_one_short_reply_and_the_turn_is_done(relay, machine) -> None:
    server = FakeModel(lambda call: error(404, f"model '{call.body['model']}' not found"))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = run_model(machine, server.url, "--model", "nope")
    bridge.wait("start")
    hi = say(person, agent, "hi")
    bridge.acked([hi])
    (answer,) = replies(person, agent)
    assert answer["body"] == (
        "Coach couldn't answer: the model server doesn't know the model nope "
        "(404: model 'nope' not found)."
    )
    assert answer["meta"] == {"turn": [hi]}
    time.sleep(2)
    assert len(server.calls) == 1
    assert bridge.terminate() == 0
    logged = " ".join(bridge.output()[1].split())  # the log wraps at the terminal's width
    assert "@coach: the model server doesn't know the model nope" in logged
    assert "said so to the person, turn done" in logged
    server.close()


def test_stop_mid_stream_hangs_up_on_the_server_and_writes_nothing(relay, machine) -> None:
    server = FakeModel(
        lambda call: Sse(["Once upon"], then="hold") if call.last == "a story" else Sse(["Hi!"])
    )
    machine.yui("app", "signup", "pat")
    added = json.loads(machine.yui("app", "add-agent", "Coach", "--json").stdout)
    machine.yui("pair", added["code"], "--ref", "coach")
    bridge = run_model(machine, server.url)
    bridge.wait("start")
    story = json.loads(machine.yui("app", "say", "a story", "--json").stdout)["id"]
    (call,) = server.wait_calls(1)
    time.sleep(0.3)
    machine.yui("app", "stop")
    assert bridge.wait("stop")["dropped"] == 1
    assert call.closed.wait(10), "the model server never saw the request closed"
    bridge.acked([story])

    after = json.loads(machine.yui("app", "say", "hello again", "--json").stdout)["id"]
    bridge.acked([after])
    thread = [
        json.loads(line) for line in machine.yui("app", "thread", "--json").stdout.splitlines()
    ]
    answers = [(r["kind"], r["body"]) for r in thread if r["sender"] == "agent"]
    assert answers == [("control", "Stopped."), ("text", "Hi!")]
    assert next(r for r in thread if r["id"] == story)["handled_at"]
    assert [c.last for c in server.calls] == ["a story", "hello again"]
    server.close()


# --- the key ------------------------------------------------------------------------------------


def test_the_key_never_shows(relay, machine) -> None:
    key = "sk-yui-" + uuid.uuid4().hex
    wrong = "sk-wrong-" + uuid.uuid4().hex
    server = FakeModel(key=key)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = run_model(machine, server.url, "--key-stdin", stdin=key + "\n")
    bridge.wait("start")
    hi = say(person, agent, "hi")
    bridge.acked([hi])
    cmdline = Path(f"/proc/{bridge.process.pid}/cmdline").read_bytes().decode()
    assert "--key-stdin" in cmdline and key not in cmdline
    assert server.calls[0].headers["authorization"] == f"Bearer {key}"
    assert bridge.terminate() == 0
    stdout, stderr = bridge.output()

    turned_down = run_model(machine, server.url, "--key-env", "MY_MODEL_KEY", MY_MODEL_KEY=wrong)
    turned_down.wait("start")
    again = say(person, agent, "again")
    turned_down.acked([again])
    cmdline2 = Path(f"/proc/{turned_down.process.pid}/cmdline").read_bytes().decode()
    assert turned_down.terminate() == 0
    stdout2, stderr2 = turned_down.output()

    assert bodies(person, agent) == [
        "Hello there",
        "Coach couldn't answer: the model server turned the key down "
        "(401: Incorrect API key provided: [key]).",
    ]
    files = "".join(p.read_text(errors="replace") for p in machine.home.rglob("*") if p.is_file())
    for secret in (key, wrong):
        for seen in (
            stdout,
            stderr,
            stdout2,
            stderr2,
            cmdline2,
            files,
            json.dumps(person.thread(agent)),
        ):
            assert secret not in seen
    server.close()


def test_a_key_variable_that_is_not_set_stops_at_once(machine) -> None:
    missing = machine.yui(
        "run-model",
        "--server",
        "openai",
        "--model",
        "m",
        "--try",
        "hi",
        check=False,
        OPENAI_API_KEY="",
    )
    assert missing.returncode == 1 and "$OPENAI_API_KEY is not set" in missing.stderr
    both = machine.yui(
        "run-model",
        "--url",
        "http://127.0.0.1:1/v1",
        "--model",
        "m",
        "--key-env",
        "K",
        "--key-stdin",
        "--try",
        "hi",
        check=False,
    )
    assert both.returncode == 2


def test_the_relays_url_is_not_taken_for_the_models(relay, machine) -> None:
    mixed = machine.yui("run-model", "--url", relay.url, "--model", "m", "--try", "hi", check=False)
    assert mixed.returncode == 2 and "--relay" in mixed.stderr


# --- --try --------------------------------------------------------------------------------------


def test_try_streams_one_answer_and_says_whether_it_drew_a_screen(relay, machine) -> None:
    server = FakeModel(says("Pick one.\n```yui\nchoose Tea|Coffee\n```"))
    tried = machine.yui(
        "run-model", "--try", "tea?", "--url", server.url, "--model", "tiny", "--context", "32768"
    )
    *answer, verdict = tried.stdout.rstrip("\n").split("\n")
    assert "\n".join(answer) == "Pick one.\n```yui\nchoose Tea|Coffee\n```"
    assert verdict.startswith("-- drew a Yui screen (tiny, ") and "streamed, full guide" in verdict
    (call,) = server.calls
    assert call.messages == [
        {"role": "system", "content": guide_body(machine).strip()},
        {"role": "user", "content": "tea?"},
    ]
    server.close()


def test_try_offline_uses_the_short_guide_and_reports_what_cleaning_did(machine) -> None:
    server = FakeModel(says("<think>hm</think>Pick one.\n```yaml\nchoose Tea|Coffee\n```"))
    relay = f"http://127.0.0.1:{free_port()}"
    tried = machine.yui(
        "run-model",
        "--try",
        "tea?",
        "--url",
        server.url,
        "--model",
        "tiny",
        "--relay",
        relay,
        "--json",
    )
    result = json.loads(tried.stdout)
    assert result["verdict"] == "drew a Yui screen once cleaned" and result["screen"] is True
    assert result["text"] == "Pick one.\n```yui\nchoose Tea|Coffee\n```"
    assert result["guide"] == "short" and result["streamed"] is True
    assert "short guide" in tried.stderr
    assert server.calls[0].messages[0]["content"] == short_guide().strip()
    server.close()


def test_try_with_nothing_listening_exits_75(machine) -> None:
    tried = machine.yui(
        "run-model",
        "--try",
        "hi",
        "--url",
        f"http://127.0.0.1:{free_port()}/v1",
        "--model",
        "tiny",
        "--relay",
        f"http://127.0.0.1:{free_port()}",
        check=False,
    )
    assert tried.returncode == 75 and "can't reach the model server" in tried.stderr


def test_an_unpaired_machine_exits_3(machine, fake) -> None:
    unpaired = machine.yui("run-model", "--url", fake.url, "--model", "tiny", check=False)
    assert unpaired.returncode == 3 and "yui pair" in unpaired.stderr
