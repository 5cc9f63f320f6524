"""`yui kill-switch` against the real relay: reversible, deletes nothing, logged; a running
bridge whose host is suspended stops with exit 5 and a message naming the kill switch, and a
new run after restore answers what waited."""

from __future__ import annotations

import json
import stat
import threading
import uuid
from pathlib import Path
from typing import Any

from state.errors import ExitStatus
from tests.helpers.bridge import Bridge, Call, FakeWebhook, Machine, echo
from tests.helpers.cli import yui
from tests.helpers.relay import Host, Person


def switch(machine: Machine, *args: str, check: bool = True) -> Any:
    """`yui kill-switch …` as an operator with $YUI_SERVICE_KEY (the machine's environment)."""
    return machine.yui("kill-switch", *args, "--url", machine.relay.url, check=check)


def say(person: Person, agent: dict[str, Any], body: str) -> str:
    row_id = str(uuid.uuid4())
    assert person.say(agent, body, id=row_id).status_code == 201
    return row_id


def suspended_ids(machine: Machine) -> set[str]:
    out = switch(machine, "status", "--json").stdout
    return {json.loads(line)["id"] for line in out.splitlines()}


def test_suspend_and_restore_a_host_logged_and_reversible(relay, machine) -> None:
    person = relay.person()
    _, code = person.add_agent("Bot")
    host = Host.pair(relay, code)
    host_id = host.connector["id"]
    done = json.loads(
        switch(machine, "suspend", "connector", host_id, "--reason", "abuse", "--json").stdout
    )
    assert done["action"] == "suspend" and done["suspended_at"] and done["reason"] == "abuse"
    try:
        assert host_id in suspended_ids(machine)
        refused = host.call("heartbeat")
        assert (refused.status_code, refused.json()) == (403, {"error": "suspended"})
        human = switch(machine, "status", "--table").stdout
        assert f"connector  {host_id}" in human and "abuse" in human
    finally:
        restored = switch(machine, "restore", "connector", host_id).stdout
    assert restored.strip() == f"connector {host_id} restored"
    assert host_id not in suspended_ids(machine)
    assert host.call("heartbeat").status_code == 200  # the same token works again

    log = machine.home / "kill-switch.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["action"], e["kind"], e["id"], e["reason"]) for e in entries] == [
        ("suspend", "connector", host_id, "abuse"),
        ("restore", "connector", host_id, None),
    ]
    assert all(e["url"] == relay.url and e["at"] and e["by"] for e in entries)


def test_a_suspended_person_and_nothing_deleted(relay, machine) -> None:
    person = relay.person()
    agent, _ = person.add_agent("Bot")
    kept = say(person, agent, "before")
    switch(machine, "suspend", "user", person.id)
    try:
        assert person.say(agent, "during").status_code == 403
    finally:
        switch(machine, "restore", "user", person.id)
    assert [r["id"] for r in person.thread(agent)] == [kept]
    assert person.say(agent, "after").status_code == 201


def test_refusals(relay, machine, tmp_path) -> None:
    bad_id = switch(machine, "suspend", "connector", "nope", check=False)
    assert bad_id.returncode == 1 and "uuid" in bad_id.stderr
    nobody = switch(machine, "restore", "user", str(uuid.uuid4()), check=False)
    assert nobody.returncode == 1 and "no user" in nobody.stderr
    bad_kind = switch(machine, "suspend", "agent", str(uuid.uuid4()), check=False)
    assert bad_kind.returncode == ExitStatus.USAGE
    assert not (machine.home / "kill-switch.log").exists()
    no_key = machine.yui("kill-switch", "status", check=False, YUI_SERVICE_KEY="")
    assert no_key.returncode == ExitStatus.REFUSED and "YUI_SERVICE_KEY" in no_key.stderr


def test_the_local_relay_key_is_found_without_the_environment(relay) -> None:
    result = yui("kill-switch", "status", "--url", relay.url, "--table", home=Path(relay.home))
    assert result.stdout.split()[1] == "suspended"


def stopped(bridge: Bridge) -> tuple[int, str, str]:
    """The exit code, events and stderr of a bridge that is expected to stop on its own."""
    code = bridge.process.wait(timeout=120)
    events, stderr = bridge.output()
    return code, events, stderr


def test_a_bridge_stops_mid_turn_and_a_new_run_answers_after_restore(relay, machine) -> None:
    gate = threading.Event()

    def held(call: Call):
        gate.wait(60)
        return echo(call)

    hook = FakeWebhook(held)
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    host_id = machine.state()["connector"]["id"]
    bridge = machine.bridge(hook.url)
    bridge.wait("start")
    first = say(person, agent, "hi")
    hook.wait_calls(1)
    switch(machine, "suspend", "connector", host_id, "--reason", "test")
    try:
        gate.set()  # the answer's write is refused, and the bridge asks why
        code, events, stderr = stopped(bridge)
        assert code == ExitStatus.SUSPENDED, stderr
        assert "kill switch" in stderr and "kill switch" in events
        (waiting,) = machine.state()["outbox"]
        assert waiting["row"]["body"] == "echo: hi"  # kept, not dropped
        second = say(person, agent, "are you there?")  # the person can still write
    finally:
        switch(machine, "restore", "connector", host_id)
    again = machine.bridge(hook.url)
    again.acked([first, second])
    answers = [r["body"] for r in person.thread(agent) if r["sender"] == "agent"]
    assert answers == ["echo: hi", "echo: are you there?"]
    hook.close()


def test_an_idle_bridge_stops_at_its_next_heartbeat(relay, machine) -> None:
    hook = FakeWebhook()
    person = relay.person()
    agent = machine.pair(person, "Coach", "coach")["agent"]
    host_id = machine.state()["connector"]["id"]
    bridge = machine.bridge(hook.url, YUI_HEARTBEAT="3")
    bridge.wait("start")
    switch(machine, "suspend", "connector", host_id)
    try:
        waiting = say(person, agent, "while suspended")  # the host reads nothing now
        code, _, stderr = stopped(bridge)  # the next heartbeat is refused
        assert code == ExitStatus.SUSPENDED and "kill switch" in stderr
        assert hook.calls == []
        refused = machine.bridge(hook.url)
        code, _, stderr = stopped(refused)  # a new run is refused at once
        assert code == ExitStatus.SUSPENDED and "kill switch" in stderr
    finally:
        switch(machine, "restore", "connector", host_id)
    machine.bridge(hook.url).acked([waiting])
    assert [r["body"] for r in person.thread(agent) if r["sender"] == "agent"] == [
        "echo: while suspended"
    ]
    hook.close()
