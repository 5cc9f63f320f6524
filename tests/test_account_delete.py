"""Account deletion, as a person does it: `yui app delete-account` on a relay where they have an
agent, a paired host with a running bridge, messages and a photo. Everything of theirs goes
(media first, then the rows), their bridge stops with exit 4 at its next call, and the sweep
finds nothing of them afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.bridge import FakeWebhook, Machine
from tests.helpers.cli import ROOT
from tests.helpers.media import JPEG
from tests.helpers.relay import LocalRelay

# Every table a person's rows live in, and how a row names them.
OWNED = {
    "yui_users": "id",
    "yui_agents": "user_id",
    "yui_connectors": "user_id",
    "yui_sessions": "user_id",
    "yui_devices": "user_id",
    "yui_messages": "user_id",
    "yui_notifications": "user_id",
    "yui_passwords": "user_id",
}


def person_yui(
    home: Path, relay: LocalRelay, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "YUI_HOME": str(home),
        "YUI_URL": relay.url,
        "YUI_SERVICE_KEY": relay.service_key,
        "NO_COLOR": "1",
        "PATH": "/usr/bin:/bin",
    }
    command = [sys.executable, str(ROOT / "bin" / "yui"), *args]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, input=stdin or "", timeout=120
    )


def left_of(relay: LocalRelay, user_id: str) -> dict[str, int]:
    """Rows anywhere that still name the person, by table (objects by their folder)."""
    found = {
        table: relay.sql(f"select count(*) from public.{table} where {column} = %s", (user_id,))[0][
            0
        ]
        for table, column in OWNED.items()
    }
    found["storage.objects"] = relay.sql(
        "select count(*) from storage.objects where starts_with(name, %s)", (f"{user_id}/",)
    )[0][0]
    found["yui_rate_buckets"] = relay.sql(
        "select count(*) from public.yui_rate_buckets where key like %s", (f"%:u:{user_id}",)
    )[0][0]
    return found


def test_a_deleted_account_leaves_nothing_and_its_bridge_stops_with_exit_4(
    relay: LocalRelay, machine: Machine, webhook: FakeWebhook, tmp_path: Path
) -> None:
    home = tmp_path / "person"
    signed = json.loads(person_yui(home, relay, "app", "signup", "Dee", "--json").stdout)
    user_id = signed["user_id"]
    added = person_yui(home, relay, "app", "add-agent", "Helper", "--json")
    code = json.loads(added.stdout)["code"]
    machine.yui("pair", code, "--ref", "helper")
    bridge = machine.bridge(webhook.url, YUI_HEARTBEAT="1")
    assert person_yui(home, relay, "app", "say", "hi").returncode == 0
    webhook.wait_calls(1)
    photo = tmp_path / "dinner.jpg"
    photo.write_bytes(JPEG)
    assert person_yui(home, relay, "app", "photo", str(photo)).returncode == 0
    before = left_of(relay, user_id)
    assert before["storage.objects"] == 1 and before["yui_connectors"] == 1
    assert before["yui_messages"] >= 2  # hi, the echo, the photo's event
    object_id = relay.sql(
        "select id from storage.objects where starts_with(name, %s)", (f"{user_id}/",)
    )[0][0]
    media_file = Path(relay.home) / "relay" / "media" / str(object_id)
    assert media_file.exists()

    token = json.loads((home / "app.json").read_text())["people"]["Dee"]["access_token"]
    unasked = person_yui(home, relay, "app", "delete-account")
    assert unasked.returncode == 2, unasked.stderr
    assert "needs --yes" in unasked.stderr and "Traceback" not in unasked.stderr
    kept = left_of(relay, user_id)  # nothing went without a yes (the bridge may still answer)
    assert kept.pop("yui_messages") >= before.pop("yui_messages") and kept == before

    deleted = person_yui(home, relay, "app", "delete-account", "--yes", "--json")
    assert deleted.returncode == 0, deleted.stderr
    gone = json.loads(deleted.stdout)
    assert gone["deleted"] is True and gone["user_id"] == user_id
    assert gone["objects"] == 1 and gone["hosts"] == 1 and gone["agents"] == 1
    assert gone["messages"] >= 3  # hi, its echo, the photo's event
    assert set(left_of(relay, user_id).values()) == {0}
    assert not media_file.exists()

    # The host is refused at its next call: the running bridge's heartbeat, a new command.
    assert bridge.process.wait(timeout=30) == 4
    assert "Traceback" not in bridge.stderr
    sent = machine.yui("status", check=False)
    assert sent.returncode == 4, sent.stderr
    assert "pair again" in sent.stderr and "Traceback" not in sent.stderr

    # This machine forgot the person; the sweep finds nothing of theirs.
    again = person_yui(home, relay, "app", "agents")
    assert again.returncode == 1 and "Dee" not in again.stdout
    sweep = person_yui(home, relay, "sweep", "--grace", "1s", "--json")
    assert sweep.returncode == 0, sweep.stderr
    assert not [name for name in json.loads(sweep.stdout)["names"] if user_id in name]
    # And the token they had names nobody now.
    assert relay.fn("yui-delete", {}, token=token).status_code == 401
