"""The host's commands as real processes: pair, status, guide, send; their exit codes; and no
token or secret in anything they print."""

from __future__ import annotations

import json
import os
import stat

from state.errors import ExitStatus
from tests.helpers.bridge import FakeWebhook
from tests.helpers.faultproxy import FaultProxy


def test_pair_keeps_a_private_state_and_a_second_pairing_reuses_the_host(relay, machine) -> None:
    person = relay.person()
    first = machine.pair(person, "One", "one")
    state_file = machine.home / "state.json"
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
    state = machine.state()
    assert state["token"].startswith("yui_ct_") and state["connector"]["kind"] == "http"
    assert first["agent"]["id"] in state["floors"]
    second = machine.pair(person, "Two", "two")
    assert machine.state()["token"] == state["token"]
    assert second["agent"]["id"] in machine.state()["floors"]
    hosts = relay.rest("GET", "yui_connectors", person.token, params={"select": "id"}).json()
    assert len(hosts) == 1


def test_pair_refuses_a_bad_code_clearly(relay, machine) -> None:
    wrong = machine.yui("pair", "000000", check=False)
    assert wrong.returncode == 1 and "wrong, used or expired" in wrong.stderr
    short = machine.yui("pair", "12", check=False)
    assert short.returncode == 1 and "6 digits" in short.stderr
    with relay.limits(pair_attempts_per_10min=0):  # this address has used up its wrong codes
        throttled = machine.yui("pair", "000000", check=False)
    assert throttled.returncode == 1
    assert "too many wrong pairing codes" in throttled.stderr and "10 minutes" in throttled.stderr


def test_the_same_ref_twice_is_refused_with_advice(relay, machine) -> None:
    person = relay.person()
    machine.pair(person, "One", "same")
    _, code = person.add_agent("Two")
    clash = machine.yui("pair", code, "--ref", "same", check=False)
    assert clash.returncode == 1 and "--ref" in clash.stderr


def test_status_shows_the_host_agents_and_queues(relay, machine) -> None:
    person = relay.person()
    machine.pair(person, "Coach", "coach")
    report = json.loads(machine.yui("status", "--json").stdout)
    assert report["relay"] == "reachable"
    assert [(a["name"], a["presence"]) for a in report["agents"]] == [("Coach", "not_listening")]
    assert report["outbox"] == 0 and report["acks"] == 0
    human = machine.yui("status").stdout
    assert "Coach (@coach) not_listening" in human and "outbox 0" in human


def test_status_does_not_count_as_a_heartbeat(relay, machine) -> None:
    person = relay.person()
    paired = machine.pair(person, "Quiet", "quiet")
    connector = machine.state()["connector"]["id"]
    relay.sql(
        "update yui_connectors set last_seen_at = now() - interval '5 minutes',"
        " serving_at = null where id = %s",
        (connector,),
    )
    machine.yui("status")
    assert person.listing()["Quiet"]["presence"] == "asleep"
    assert paired["agent"]["id"]


def test_guide_prints_the_version_and_the_text(relay, machine) -> None:
    out = machine.yui("guide").stdout
    assert out.startswith("Yui channel guide v1+")
    assert "## You are talking to someone in Yui" in out
    guide = json.loads(machine.yui("guide", "--json").stdout)
    assert out.splitlines()[0].endswith(guide["version"])


def test_send_reads_lines_from_stdin(relay, machine) -> None:
    person = relay.person()
    coach = machine.pair(person, "Coach", "coach")["agent"]
    helper = machine.pair(person, "Helper", "helper")["agent"]
    lines = "first\n\n" + json.dumps({"text": "to helper", "agent": "helper"}) + "\nthird\n"
    results = [
        json.loads(x) for x in machine.yui("send", "-", "--json", input=lines).stdout.splitlines()
    ]
    assert [(r["agent"], r["queued"]) for r in results] == [
        ("coach", False),
        ("helper", False),
        ("coach", False),
    ]
    assert [r["body"] for r in person.thread(coach)] == ["first", "third"]
    assert [r["body"] for r in person.thread(helper)] == ["to helper"]


def test_send_refuses_bad_input_before_sending_anything(relay, machine) -> None:
    person = relay.person()
    coach = machine.pair(person, "Coach", "coach")["agent"]
    bad = machine.yui("send", "-", input='ok\n{"txt": "typo"}\n', check=False)
    assert bad.returncode == 1 and "line 2" in bad.stderr
    huge = machine.yui("send", "x" * 32_001, check=False)
    assert huge.returncode == 1 and "32,001 characters" in huge.stderr
    nobody = machine.yui("send", "hi", "--agent", "nobody", check=False)
    assert nobody.returncode == 1 and "no agent 'nobody'" in nobody.stderr
    assert person.thread(coach) == []


def test_exit_status_not_paired(machine) -> None:
    for args in (("status",), ("send", "hi"), ("run-webhook", "--webhook", "http://x")):
        result = machine.yui(*args, check=False)
        assert result.returncode == ExitStatus.NOT_PAIRED, (args, result.stderr)
        assert "yui pair" in result.stderr


def test_exit_status_refused_or_revoked(relay, machine) -> None:
    person = relay.person()
    machine.pair(person, "Coach", "coach")
    host_id = machine.state()["connector"]["id"]
    relay.fn("yui-agents", {"action": "connector_revoke", "id": host_id}, person.token)
    for args in (("status",), ("run-webhook", "--webhook", "http://127.0.0.1:9")):
        result = machine.yui(*args, check=False)
        assert result.returncode == ExitStatus.REFUSED, (args, result.stderr)
        assert "401" in result.stderr


def test_exit_status_relay_unreachable(relay, machine) -> None:
    proxy = FaultProxy(relay.port)
    machine.url = proxy.url
    person = relay.person()
    machine.pair(person, "Coach", "coach")
    proxy.down()
    result = machine.yui("guide", check=False)
    assert result.returncode == ExitStatus.UNREACHABLE and "can't reach" in result.stderr
    status = machine.yui("status", "--json", check=False)
    assert status.returncode == ExitStatus.UNREACHABLE  # what the last session knew, then 75
    assert json.loads(status.stdout)["relay"] == "unreachable"
    no_session = machine.yui("send", "hi", check=False)
    assert no_session.returncode == ExitStatus.UNREACHABLE
    proxy.close()


def test_a_second_bridge_on_one_state_is_refused_naming_the_pid(relay, machine) -> None:
    person = relay.person()
    machine.pair(person, "Coach", "coach")
    hook = FakeWebhook()
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    second = machine.yui("run-webhook", "--webhook", hook.url, check=False)
    assert second.returncode == ExitStatus.BUSY
    assert f"pid {bridge.process.pid}" in second.stderr
    assert machine.yui("status").returncode == 0  # other commands work beside it
    hook.close()


def test_no_token_or_secret_appears_in_any_output(relay, machine) -> None:
    secret = "webhook-secret-" + os.urandom(8).hex()
    person = relay.person()
    machine.pair(person, "Coach", "coach")
    agent = person.listing()["Coach"]
    hook = FakeWebhook()
    bridge = machine.bridge(hook.url, YUI_WEBHOOK_SECRET=secret)
    bridge.wait("start")
    person.say(agent, "hi")
    bridge.wait("ack")
    bridge.terminate()
    printed = list(bridge.output())
    for json_flag in ((), ("--json",)):
        for args in (("status",), ("guide",), ("send", "a handoff"), ("pair", "000000")):
            result = machine.yui(*args, *json_flag, check=False)
            printed += [result.stdout, result.stderr]
    state = machine.state()
    secrets = [
        state["token"],
        json.loads((machine.home / "state.json.session").read_text())["access_token"],
        secret,
        relay.anon_key,
        relay.service_key,
        relay.jwt_secret,
    ]
    logs = (relay.home / "relay" / "logs" / "gateway.log").read_text()
    for text in [*printed, logs]:
        for value in secrets:
            assert value not in text
    assert printed and any("ack" in text for text in printed)
    hook.close()
