"""A newcomer's host (issue 19), run as the real `yui` on the real relay: a second agent is
found at once, bridges of two kinds share a state file only with `--agent` (and are told so),
a suspended host keeps nothing to send later, `yui status` exits 75 on a relay it can't reach,
and Ctrl-C on a bridge exits 130 without a false "live feed down" before its bye."""

from __future__ import annotations

import json
import signal
import subprocess

from state.errors import ExitStatus
from tests.helpers.bridge import FakeWebhook, Machine
from tests.helpers.http import free_port
from tests.helpers.relay import LocalRelay


def _clean(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr


def _pair(machine: Machine, code: str, ref: str) -> subprocess.CompletedProcess[str]:
    result = machine.yui("pair", code, "--ref", ref)
    _clean(result)
    return result


# --- item 1: a second agent is found at once ------------------------------------------------


def test_an_agent_paired_since_the_saved_session_is_found_at_once(
    relay: LocalRelay, machine: Machine
) -> None:
    person = relay.person()
    _, code = person.add_agent("Coach")
    first = _pair(machine, code, "coach")
    assert "Next, start a bridge for it" in first.stderr
    assert "yui run-model" in first.stderr and "yui run-a2a" in first.stderr
    assert machine.yui("send", "warm-up").returncode == 0  # saves a session naming Coach only

    _, code = person.add_agent("Qwen")
    second = _pair(machine, code, "qwen")
    assert "add --agent qwen" in second.stderr  # not "run-webhook … 8787" for every pairing
    sent = machine.yui("send", "hello qwen", "--agent", "qwen")
    _clean(sent)
    assert " to @qwen" in sent.stdout

    # an agent bound to this host by another program: the saved session can't know it
    saved = (machine.home / "state.json.session").read_text()  # names Coach and Qwen
    _, code = person.add_agent("Third")
    token = json.loads((machine.home / "state.json").read_text())["token"]
    bound = relay.fn("yui-connect", {"action": "pair", "code": code, "remote_ref": "third"}, token)
    assert bound.status_code == 200, bound.text
    sent = machine.yui("send", "hello third", "--agent", "third")
    _clean(sent)
    assert " to @third" in sent.stdout
    assert [r["body"] for r in person.thread(person.agents["Third"])] == ["hello third"]

    typo = machine.yui("send", "hi", "--agent", "nobody", check=False)
    _clean(typo)
    assert typo.returncode == ExitStatus.ERROR
    assert "no agent 'nobody' on this host (agents: coach, qwen, third)" in typo.stderr

    # a bridge whose saved session predates Third reports it served at once, not a heartbeat
    # later (the heartbeat is an hour off here): the app never shows it offline meanwhile
    (machine.home / "state.json.session").write_text(saved)
    hook = FakeWebhook()
    try:
        bridge = machine.bridge(hook.url, YUI_HEARTBEAT="3600")
        bridge.wait("agent", agent="third")  # learned from the heartbeat's answer
        bridge.wait("start")  # ... and reported served before the bridge says it started
        presence = {n: a["presence"] for n, a in person.listing().items()}
        assert presence == {"Coach": "online", "Qwen": "online", "Third": "online"}
    finally:
        machine.stop_all()
        hook.close()


# --- item 4: a bridge per agent, and a refusal that says what to do --------------------------


def test_bridges_of_two_kinds_need_agent_and_are_told_so(
    relay: LocalRelay, machine: Machine
) -> None:
    person = relay.person()
    for name, ref in (("Coach", "coach"), ("Qwen", "qwen")):
        _, code = person.add_agent(name)
        _pair(machine, code, ref)
    hook = FakeWebhook()
    try:
        every = machine.bridge(hook.url)
        every.wait("start")
        model = ("run-model", "--model-url", "http://127.0.0.1:9/v1", "--model", "m")
        refused = machine.yui(*model, "--agent", "qwen", check=False)
        _clean(refused)
        assert refused.returncode == ExitStatus.BUSY
        assert f"run-webhook (pid {every.process.pid}) serves every agent of" in refused.stderr
        assert "start it again with --agent" in refused.stderr
        assert "start this bridge with --agent qwen" in refused.stderr

        every.process.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop, then 130
        assert every.process.wait(timeout=30) == ExitStatus.INTERRUPTED
        out, err = every.output()
        assert "Traceback" not in err
        events = [json.loads(line) for line in out.splitlines()]
        assert events[-1]["event"] == "bye"
        assert not [e for e in events if e["event"] == "live" and not e["up"]]  # no false alarm

        coach = machine.bridge(hook.url, "--agent", "coach")
        coach.wait("start", agents=["coach"])
        twice = machine.yui("run-webhook", "--webhook", hook.url, "--agent", "@coach", check=False)
        _clean(twice)
        assert twice.returncode == ExitStatus.BUSY
        assert f"run-webhook (pid {coach.process.pid}) already serves @coach" in twice.stderr
        whole = machine.yui("run-webhook", "--webhook", hook.url, check=False)
        _clean(whole)
        assert whole.returncode == ExitStatus.BUSY
        assert "serves @coach from" in whole.stderr and "--agent" in whole.stderr
        typo = machine.yui(*model, "--agent", "qwne", check=False)
        _clean(typo)
        assert typo.returncode == ExitStatus.ERROR
        assert "no agent 'qwne' on this host (agents: coach, qwen)" in typo.stderr

        person.say(person.agents["Qwen"], "for the model")
        person.say(person.agents["Coach"], "for the webhook")
        [call] = hook.wait_calls(1)
        assert call.payload["agent"]["handle"] == "coach"  # never Qwen's message
        assert coach.terminate() == 0  # SIGTERM: 0, as systemd expects
        assert len(hook.calls) == 1
    finally:
        machine.stop_all()
        hook.close()


# --- item 10: a suspended host keeps nothing to send later ----------------------------------


def test_send_on_a_suspended_host_refuses_and_queues_nothing(
    relay: LocalRelay, machine: Machine
) -> None:
    person = relay.person()
    _, code = person.add_agent("Coach")
    _pair(machine, code, "coach")
    assert machine.yui("send", "before").returncode == 0  # a saved session: no token trade
    host_id = json.loads((machine.home / "state.json").read_text())["connector"]["id"]
    machine.yui("kill-switch", "suspend", "connector", host_id, "--relay", relay.url)
    try:
        refused = machine.yui("send", "during", check=False)
        _clean(refused)
        assert refused.returncode == ExitStatus.SUSPENDED
        assert "suspended" in refused.stderr
        assert machine.state().get("outbox", []) == []
    finally:
        machine.yui("kill-switch", "restore", "connector", host_id, "--relay", relay.url)
    assert machine.yui("send", "after").returncode == 0
    bodies = [r["body"] for r in person.thread(person.agents["Coach"])]
    assert bodies == ["before", "after"]  # "during" never lands, not even after the restore


# --- item 9: `yui status` of a relay it can't reach exits 75 --------------------------------


def test_status_of_an_unreachable_relay_exits_75(relay: LocalRelay, machine: Machine) -> None:
    person = relay.person()
    _, code = person.add_agent("Coach")
    _pair(machine, code, "coach")
    gone = f"http://127.0.0.1:{free_port()}"
    result = machine.yui("status", "--relay", gone, check=False)
    _clean(result)
    assert result.returncode == ExitStatus.UNREACHABLE
    assert f"can't reach the relay at {gone}: presence unknown" in result.stderr
    assert "[unreachable]" in result.stdout  # what the last session knew is still shown
