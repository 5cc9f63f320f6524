"""`yui run-webhook` end to end: a real relay, `yui` as real processes, a fake webhook.

Every message the person sends reaches the webhook once, in order, and its answer lands once,
across SIGKILLs, a relay that can't be reached, and a webhook that fails.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid

from standardwebhooks.webhooks import Webhook

from bridges.engine.turns import turn_key
from state.host import HostState
from tests.helpers.bridge import Answer, Call, FakeWebhook, Machine, echo, echo_when, reply
from tests.helpers.faultproxy import DELAY, FaultProxy

GUIDE_HEADING = "## You are talking to someone in Yui"


def replies(person, agent) -> list[dict]:
    return [r for r in person.thread(agent) if r["sender"] == "agent"]


def row(person, agent, row_id: str) -> dict:
    return next(r for r in person.thread(agent) if r["id"] == row_id)


def say(person, agent, body: str) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id).status_code == 201
    return row_id


def test_one_message_one_signed_post_one_reply(relay, machine, webhook) -> None:
    person = relay.person()
    paired = machine.pair(person, "Coach", "coach")
    agent = paired["agent"]
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    bridge = machine.bridge(webhook.url, YUI_WEBHOOK_SECRET=secret)
    bridge.wait("start")
    hi = say(person, agent, "hi")

    (call,) = webhook.wait_calls(1)
    payload = call.payload
    assert payload["agent"] == {
        "id": agent["id"],
        "name": "Coach",
        "handle": agent["handle"],
        "ref": "coach",
    }
    assert payload["turn"] == [hi] and payload["text"] == "hi"
    (message,) = payload["messages"]
    assert {k: message[k] for k in ("id", "kind", "body", "event")} == {
        "id": hi,
        "kind": "text",
        "body": "hi",
        "event": None,
    }
    assert payload["guide"]["version"].startswith("v1+")
    assert payload["guide"]["body"].startswith(GUIDE_HEADING)
    assert call.headers["x-yui-turn"] == turn_key([hi])

    stamp = call.headers["x-yui-timestamp"]
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + call.raw, hashlib.sha256)
    assert call.headers["x-yui-signature"] == "sha256=" + mac.hexdigest()
    Webhook(secret).verify(call.raw, call.headers)  # raises if the signature is wrong
    assert call.headers["webhook-id"] == turn_key([hi])

    bridge.wait("ack")
    (answer,) = replies(person, agent)
    assert answer["body"] == "echo: hi" and answer["meta"] == {"turn": [hi]}
    done = row(person, agent, hi)
    assert done["delivered_at"] and done["handled_at"]
    assert len(webhook.calls) == 1


def test_a_long_turn_is_marked_delivered_while_the_agent_still_thinks(relay, machine) -> None:
    """A quick turn's ✓ (delivered) rides with its ack (one PATCH); a turn still running after
    MARK_AFTER gets it on its own, so the person sees the message was picked up."""
    hold = threading.Event()
    hook = FakeWebhook(echo_when(hold))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    hi = say(person, agent, "think hard")
    hook.wait_calls(1)
    deadline = time.monotonic() + 15
    while not row(person, agent, hi)["delivered_at"] and time.monotonic() < deadline:
        time.sleep(0.05)
    held = row(person, agent, hi)
    assert held["delivered_at"] and not held["handled_at"] and not replies(person, agent)
    hold.set()
    bridge.acked([hi])
    done = row(person, agent, hi)
    assert done["delivered_at"] == held["delivered_at"] < done["handled_at"]
    hook.close()


def test_the_turns_one_read_starts_go_in_flight_in_one_edit(relay, machine) -> None:
    """Rows for several agents found by one read start their turns with one edit of the state
    file (it is fsynced: a pass that started fifty turns paid fifty): one stamp for them all."""
    hold = threading.Event()
    hook = FakeWebhook(echo_when(hold))
    person = relay.person()
    agents = [machine.pair(person, name, name.lower())["agent"] for name in ("Coach", "Sage")]
    rows = [say(person, agent, "hi") for agent in agents]  # before the bridge: one read
    bridge = machine.bridge(hook.url)
    hook.wait_calls(2)
    inflight = machine.state()["inflight"]
    assert {agent: entry["ids"] for agent, entry in inflight.items()} == {
        agent["id"]: [row_id] for agent, row_id in zip(agents, rows, strict=True)
    }
    assert len({entry["started_at"] for entry in inflight.values()}) == 1
    hold.set()
    bridge.acked(rows)
    hook.close()


def test_messages_sent_during_a_turn_go_together_in_order(relay, machine) -> None:
    gate = threading.Event()

    def first_waits(call: Call):
        if call.ids == [first]:
            gate.wait(30)
        return echo(call)

    hook = FakeWebhook(first_waits)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    first = say(person, agent, "one")
    hook.wait_calls(1)
    later = [say(person, agent, text) for text in ("two", "three", "four")]
    gate.set()
    calls = hook.wait_calls(2)
    assert calls[1].ids == later
    assert calls[1].payload["text"] == "two\nthree\nfour"
    bridge.acked(later)
    assert [r["meta"]["turn"] for r in replies(person, agent)] == [[first], later]
    hook.close()


def test_a_read_begun_mid_turn_does_not_split_the_next_turn(relay, tmp_path) -> None:
    """The read woken by "two" is still on a slow network when the first turn ends; it must
    not start a turn of "two" alone while "three" and "four" are already waiting."""
    gate = threading.Event()

    def first_waits(call: Call):
        if call.ids == [first]:
            gate.wait(30)
        return echo(call)

    slow = FaultProxy(relay.port)
    host = Machine(tmp_path / "host", relay, url=slow.url)
    hook = FakeWebhook(first_waits)
    person = relay.person()
    agent = host.pair(person, "Coach", "coach")["agent"]
    host.bridge(hook.url).wait("live", up=True)
    first = say(person, agent, "one")
    hook.wait_calls(1)
    slow.set(DELAY, delay=1.0)
    later = [say(person, agent, "two")]
    # The feed's word of "two" takes 1 s to reach the bridge, its read 1 s to reach the relay
    # and 1 s to come back: in the last of these the others are sent and the turn ends.
    time.sleep(2.3)
    later += [say(person, agent, text) for text in ("three", "four")]
    gate.set()
    calls = hook.wait_calls(2, timeout=60)
    assert calls[1].ids == later
    host.stop_all()
    slow.close()
    hook.close()


def test_sigkill_while_the_webhook_holds_a_turn_replays_it_once(relay, machine) -> None:
    hold = threading.Event()

    def first_hangs(call: Call):
        if len(hook.calls) == 1:
            hold.wait(30)
        return echo(call)

    hook = FakeWebhook(first_hangs)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    hi = say(person, agent, "hi")
    hook.wait_calls(1)
    bridge.kill()
    assert row(person, agent, hi)["handled_at"] is None

    again = machine.bridge(hook.url)
    calls = hook.wait_calls(2)
    assert calls[1].headers["x-yui-turn"] == calls[0].headers["x-yui-turn"]
    assert calls[1].ids == [hi]
    again.acked([hi])
    assert [r["meta"]["turn"] for r in replies(person, agent)] == [[hi]]
    hold.set()
    hook.close()


def answered_then_stopped(relay, machine, webhook) -> tuple[dict, dict, str]:
    """The person's hi, answered by a bridge that then stopped: (person, agent, hi)."""
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(webhook.url)
    bridge.wait("start")
    hi = say(person, agent, "hi")
    bridge.acked([hi])
    assert bridge.terminate() == 0
    return person, agent, hi


def restart_only_acks(machine, webhook, person, agent, hi) -> None:
    """A new run finds the hi answered: acked, the webhook not called again, one reply."""
    again = machine.bridge(webhook.url)
    again.wait("answered", ids=[hi])
    again.acked([hi])
    assert len(webhook.calls) == 1
    assert len(replies(person, agent)) == 1
    assert row(person, agent, hi)["handled_at"] is not None


def test_a_row_answered_before_a_crash_is_only_acked(relay, machine, webhook) -> None:
    person, agent, hi = answered_then_stopped(relay, machine, webhook)
    # the state a crash between writing the reply and the handled ack leaves
    relay.sql("update yui_messages set handled_at = null where id = %s", (hi,))
    restart_only_acks(machine, webhook, person, agent, hi)


def test_a_turn_answered_before_its_delivered_mark_landed_is_only_acked(
    relay, machine, webhook
) -> None:
    """The delivered mark is written after the ask, so a crash can leave a turn asked and
    answered with no mark: its in-flight record makes the next run look for the answer."""
    person, agent, hi = answered_then_stopped(relay, machine, webhook)
    relay.sql("update yui_messages set delivered_at = null, handled_at = null where id = %s", (hi,))
    HostState(machine.home / "state.json").set_inflight({agent["id"]: [hi]})
    restart_only_acks(machine, webhook, person, agent, hi)
    assert machine.state().get("inflight") == {}


def test_a_reply_waits_in_the_outbox_while_the_relay_is_unreachable(relay, machine) -> None:
    proxy = FaultProxy(relay.port)
    machine.url = proxy.url
    gate = threading.Event()
    hook = FakeWebhook(echo_when(gate))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    hi = say(person, agent, "hi")
    hook.wait_calls(1)
    proxy.down()
    gate.set()
    bridge.wait("answer")
    bridge.wait("retry", what="relay")
    later = machine.yui("send", "a later message", "--json")
    assert json.loads(later.stdout)["queued"] is True
    assert len(machine.state()["outbox"]) == 2
    assert replies(person, agent) == []

    proxy.restore()
    bridge.acked([hi], timeout=90)
    landed = replies(person, agent)
    assert [r["body"] for r in landed] == ["echo: hi", "a later message"]
    assert landed[0]["created_at"] < landed[1]["created_at"]
    deadline = time.monotonic() + 10  # a written reply leaves the file with the next edit
    while machine.state()["outbox"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert machine.state()["outbox"] == []
    proxy.close()
    hook.close()


def test_sigkill_with_the_reply_only_on_disk(relay, machine) -> None:
    proxy = FaultProxy(relay.port)
    machine.url = proxy.url
    gate = threading.Event()
    hook = FakeWebhook(echo_when(gate))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    hi = say(person, agent, "hi")
    hook.wait_calls(1)
    proxy.down()
    gate.set()
    bridge.wait("answer")
    bridge.kill()
    (queued,) = machine.state()["outbox"]
    assert queued["row"]["meta"]["turn"] == [hi]

    proxy.restore()
    again = machine.bridge(hook.url)
    again.acked([hi], timeout=60)
    assert [r["id"] for r in replies(person, agent)] == [queued["row"]["id"]]
    assert len(hook.calls) == 1
    proxy.close()
    hook.close()


def test_a_failing_webhook_is_retried_with_growing_waits_and_answered_once(relay, machine) -> None:
    def too_late() -> Answer:
        time.sleep(2)
        return reply("too late")

    answers = iter(
        [
            lambda: (500, {}, b"boom"),
            too_late,
            lambda: (200, {"content-type": "application/json"}, b"{not json"),
            lambda: reply("finally"),
        ]
    )
    hook = FakeWebhook(lambda call: next(answers)())
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url, "--timeout", "1")
    bridge.wait("start")
    hi = say(person, agent, "hi")
    waits = [bridge.wait("retry", what="agent", timeout=60) for _ in range(3)]
    assert "500" in waits[0]["reason"]
    assert "timed out" in waits[1]["reason"]
    assert "JSON" in waits[2]["reason"]
    assert waits[0]["wait"] < waits[1]["wait"] < waits[2]["wait"]
    bridge.acked([hi], timeout=60)
    calls = hook.wait_calls(4)
    assert len({c.headers["x-yui-turn"] for c in calls}) == 1
    assert [r["body"] for r in replies(person, agent)] == ["finally"]
    hook.close()


def test_a_slow_agent_does_not_hold_up_another(relay, machine) -> None:
    fast_done = threading.Event()

    def slow_one_waits(call: Call):
        if call.payload["agent"]["ref"] == "slow":
            assert fast_done.wait(30), "the fast agent was never answered"
        return echo(call)

    hook = FakeWebhook(slow_one_waits)
    person = relay.person()
    slow = machine.pair(person, "Slow", "slow")["agent"]
    fast = machine.pair(person, "Fast", "fast")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    slow_row = say(person, slow, "take your time")
    hook.wait_calls(1)
    fast_row = say(person, fast, "quick one")
    bridge.acked([fast_row])
    assert row(person, slow, slow_row)["handled_at"] is None
    fast_done.set()
    bridge.acked([slow_row])
    hook.close()


def test_fifty_sends_at_once_beside_a_running_bridge(relay, machine, webhook) -> None:
    import subprocess
    import sys

    from tests.helpers.cli import ROOT

    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(webhook.url)
    bridge.wait("start")
    senders = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "bin" / "yui"), "send", f"n{i}"],
            env=machine.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(50)
    ]
    errors = [p.communicate(timeout=120)[1] for p in senders]  # waits, and closes the pipes
    codes = [p.returncode for p in senders]
    assert codes == [0] * 50, [e for e, code in zip(errors, codes, strict=True) if code]
    deadline = time.monotonic() + 30
    while machine.state()["outbox"] and time.monotonic() < deadline:
        time.sleep(0.2)
    bodies = sorted(r["body"] for r in replies(person, agent))
    assert bodies == sorted(f"n{i}" for i in range(50))


def test_sigterm_says_bye_and_the_agent_reads_offline_at_once(relay, machine, webhook) -> None:
    person = relay.person()
    machine.pair(person, "Coach", "coach")
    bridge = machine.bridge(webhook.url)
    bridge.wait("start")
    assert person.listing()["Coach"]["presence"] == "online"
    assert bridge.terminate() == 0
    assert any(e["event"] == "bye" for e in bridge.seen) or bridge.wait("bye")
    assert person.listing()["Coach"]["presence"] == "offline"


def test_a_tap_reaches_the_webhook_as_an_event(relay, machine, webhook) -> None:
    machine.yui("app", "signup", "pat")
    added = json.loads(machine.yui("app", "add-agent", "Coach", "--json").stdout)
    machine.yui("pair", added["code"], "--ref", "coach")
    bridge = machine.bridge(webhook.url)
    bridge.wait("start")
    machine.yui("app", "tap", "n1", "choose", "choice=Walk", "--echo", "Walk")
    (call,) = webhook.wait_calls(1)
    (message,) = call.payload["messages"]
    assert message["kind"] == "event"
    assert message["body"] == "[yui] n1 choose choice=Walk"
    assert message["event"] == {
        "id": "n1",
        "preset": "choose",
        "value": {"choice": "Walk"},
        "echo": "Walk",
    }
    assert call.payload["text"] == "[yui] n1 choose choice=Walk"
    bridge.wait("ack")


def test_stop_while_the_webhook_holds_a_turn(relay, machine) -> None:
    hold = threading.Event()

    def first_hangs(call: Call):
        if len(hook.calls) == 1:
            hold.wait(30)
        return echo(call)

    hook = FakeWebhook(first_hangs)
    machine.yui("app", "signup", "pat")
    added = json.loads(machine.yui("app", "add-agent", "Coach", "--json").stdout)
    machine.yui("pair", added["code"], "--ref", "coach")
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    first = json.loads(machine.yui("app", "say", "write me an essay", "--json").stdout)["id"]
    hook.wait_calls(1)
    waiting = json.loads(machine.yui("app", "say", "and a poem", "--json").stdout)["id"]
    machine.yui("app", "stop")
    stopped = bridge.wait("stop")
    assert stopped["dropped"] == 2
    bridge.wait("ack")
    hold.set()
    bridge.wait("discarded")

    thread = json.loads(
        "[" + ",".join(machine.yui("app", "thread", "--json").stdout.splitlines()) + "]"
    )
    answers = [r for r in thread if r["sender"] == "agent"]
    assert [(r["kind"], r["body"]) for r in answers] == [("control", "Stopped.")]
    assert all(r["handled_at"] for r in thread if r["id"] in (first, waiting))
    assert "Coach: Stopped." in machine.yui("app", "thread").stdout

    after = json.loads(machine.yui("app", "say", "hello again", "--json").stdout)["id"]
    calls = hook.wait_calls(2)
    assert calls[1].ids == [after]
    bridge.acked([after])
    hook.close()


def test_a_command_goes_at_once_and_is_never_replayed(relay, machine) -> None:
    hold = threading.Event()

    hook = FakeWebhook(echo_when(hold))
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    essay = say(person, agent, "write me an essay")
    hook.wait_calls(1)
    command = say(person, agent, "/new")
    calls = hook.wait_calls(2)  # mid-turn
    assert calls[1].ids == [command]
    bridge.acked([command])
    assert row(person, agent, command)["handled_at"] is not None
    bridge.kill()

    hold.set()
    again = machine.bridge(hook.url)
    again.acked([essay])
    assert [c.ids for c in hook.calls] == [[essay], [command], [essay]]
    hook.close()
