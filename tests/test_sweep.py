"""`yui sweep` against the real relay: retention and orphaned media are counted in a dry run,
removed with --delete, and nothing a message still points at is touched."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import requests

from tests.helpers.cli import yui
from tests.helpers.media import PNG, objects
from tests.helpers.relay import Host, LocalRelay, Person


def store(relay: LocalRelay, person: Person, agent: dict[str, Any]) -> str:
    """A photo uploaded by the person into the agent's thread; its path."""
    path = f"{person.id}/{agent['id']}/user/{uuid.uuid4()}.png"
    answer = requests.post(
        f"{relay.url}/storage/v1/object/yui-media/{path}",
        data=PNG,
        headers={
            "apikey": relay.anon_key,
            "authorization": f"Bearer {person.token}",
            "content-type": "image/png",
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return path


def said(person: Person, agent: dict[str, Any], body: str, **row: Any) -> str:
    row_id = str(uuid.uuid4())
    answer = person.say(agent, body, id=row_id, **row)
    assert answer.status_code == 201, answer.text
    return row_id


def sweep(relay: LocalRelay, *args: str) -> dict[str, Any]:
    """`yui sweep --json` run where the local relay lives: it finds the service key itself."""
    result = yui("sweep", "--json", "--url", relay.url, *args, home=Path(relay.home))
    return json.loads(result.stdout)


def rows_left(relay: LocalRelay, ids: list[str]) -> set[str]:
    found = relay.sql("select id::text from yui_messages where id::text = any(%s)", (ids,))
    return {row[0] for row in found}


def test_dry_run_counts_and_delete_removes_only_what_is_due(relay: LocalRelay) -> None:
    person = relay.person("Sweeper")
    agent, _ = person.add_agent("Kept")
    gone_agent, _ = person.add_agent("Gone")
    old = [said(person, agent, "from last season"), said(person, agent, "also old")]
    stop_old = said(person, agent, "stop", kind="control", meta={"op": "stop"})
    stop_new = said(person, agent, "stop", kind="control", meta={"op": "stop"})
    orphan, fresh, referenced, only_old = (store(relay, person, agent) for _ in range(4))
    gone = store(relay, person, gone_agent)
    old.append(said(person, agent, f"```yui\nimage {only_old}\n```"))
    keep = [said(person, agent, "today"), said(person, agent, f"photo={referenced}"), stop_new]
    assert relay.fn("yui-agents", {"action": "delete", "id": gone_agent["id"]}, person.token).ok
    relay.sql(
        "update yui_messages set created_at = now() - interval '100 days' where id::text = any(%s)",
        (old,),
    )
    relay.sql(
        "update yui_messages set created_at = now() - interval '8 days' where id = %s", (stop_old,)
    )
    relay.sql(
        "update storage.objects set created_at = now() - interval '3 days' where name = any(%s)",
        ([orphan, referenced, only_old],),
    )
    everything = sorted([orphan, fresh, referenced, only_old, gone])

    dry = sweep(relay)
    assert not dry["deleted"] and dry["removed"] == 0
    assert dry["retention"]["messages"] >= 3 and dry["retention"]["control_rows"] >= 1
    assert {orphan, gone} <= set(dry["names"])
    assert not {fresh, referenced, only_old} & set(dry["names"])  # only_old: its message is there
    assert rows_left(relay, [*old, stop_old, *keep]) == {*old, stop_old, *keep}
    assert [o[0] for o in objects(relay, f"{person.id}/")] == everything

    assert gone in sweep(relay, "--grace", "4d")["names"]  # no agent: an orphan at once
    assert orphan not in sweep(relay, "--grace", "4d")["names"]  # younger than the grace

    done = sweep(relay, "--delete")
    assert done["deleted"] and done["retention"]["messages"] >= 3
    assert {orphan, gone, only_old} <= set(done["names"])  # only_old lost its message first
    assert done["removed"] == done["orphans"]
    assert rows_left(relay, [*old, stop_old, *keep]) == set(keep)
    assert [o[0] for o in objects(relay, f"{person.id}/")] == sorted([fresh, referenced])
    for path in (fresh, referenced):
        read = requests.get(
            f"{relay.url}/storage/v1/object/authenticated/yui-media/{path}",
            headers={"apikey": relay.anon_key, "authorization": f"Bearer {person.token}"},
            timeout=30,
        )
        assert read.status_code == 200 and read.content == PNG
    again = sweep(relay)
    assert not {fresh, referenced} & set(again["names"])


def test_the_report_reads_as_counts(relay: LocalRelay) -> None:
    result = yui("sweep", "--url", relay.url, home=Path(relay.home))
    assert "rows due:" in result.stdout and "orphaned media due:" in result.stdout
    assert "dry run" in result.stderr


def test_only_the_service_role_may_sweep(relay: LocalRelay, tmp_path: Path) -> None:
    person = relay.person()
    _, code = person.add_agent("Bot")
    host = Host.pair(relay, code)
    for token in (person.token, host.jwt, relay.anon_key):
        answer = relay.rest("POST", "rpc/yui_retention", token, body={"dry": False})
        assert answer.status_code in (401, 403, 404), answer.text
    away = yui(
        "sweep",
        "--url",
        relay.url,
        home=tmp_path / "elsewhere",
        env={"YUI_SERVICE_KEY": ""},
        check=False,
    )
    assert away.returncode == 4 and "YUI_SERVICE_KEY" in away.stderr
    bad = yui("sweep", "--grace", "soon", home=tmp_path, check=False)
    assert bad.returncode == 2 and "--grace" in bad.stderr
