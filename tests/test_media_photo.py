"""The person's photo, end to end: `yui app photo` stores it and writes the camera event as the
app does; the bridge downloads it into a private cache and the agent reads a local file."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.helpers.media import GIF, JPEG, MP4, objects
from yuilines.events import event_meta


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_photo_reaches_the_agent_as_a_local_file(relay, machine, webhook, tmp_path) -> None:
    machine.yui("app", "signup", "Pat")
    added = json.loads(machine.yui("app", "add-agent", "Coach", "--json").stdout)
    machine.yui("pair", added["code"], "--ref", "coach")
    bridge = machine.bridge(webhook.url)
    bridge.wait("start")
    photos = tmp_path / "camera"
    photos.mkdir()
    (photos / "IMG_0001.PNG").write_bytes(JPEG)  # the bytes decide: a jpeg
    (photos / "IMG_0002.gif").write_bytes(GIF)
    first = json.loads(machine.yui("app", "photo", str(photos / "IMG_0001.PNG"), "--json").stdout)
    agent_id = added["agent"]["id"]
    user = first["user_id"]
    assert first["path"].startswith(f"{user}/{agent_id}/user/") and first["path"].endswith(".jpg")
    assert first["body"] == f"[yui] c1 camera photo={first['path']}"
    assert first["meta"] == event_meta("c1", "camera", {"photo": first["path"]})

    (call,) = webhook.wait_calls(1)
    (message,) = call.payload["messages"]
    local = message["event"]["value"]["photo"]
    assert call.payload["text"] == message["body"] == f"[yui] c1 camera photo={local}"
    file = Path(local)
    assert file.read_bytes() == JPEG and mode(file) == 0o600
    assert file.parent.parent == machine.home / "cache" and mode(file.parent) == 0o700
    assert mode(file.parent.parent) == 0o700
    bridge.acked([first["id"]])

    second = json.loads(
        machine.yui("app", "photo", str(photos / "IMG_0002.gif"), "--id", "c2", "--json").stdout
    )
    (_, call) = webhook.wait_calls(2)
    local = call.payload["messages"][0]["event"]["value"]["photo"]
    assert call.payload["text"] == f"[yui] c2 camera photo={local}"
    assert Path(local).read_bytes() == GIF
    bridge.acked([second["id"]])

    rows = [json.loads(line) for line in machine.yui("app", "thread", "--json").stdout.splitlines()]
    assert [r["body"] for r in rows if r["sender"] == "user"] == [first["body"], second["body"]]
    assert [o[0] for o in objects(relay, f"{user}/")] == sorted([first["path"], second["path"]])


def test_a_video_is_not_a_photo_and_nothing_is_stored(relay, machine, tmp_path) -> None:
    user = json.loads(machine.yui("app", "signup", "Pat", "--json").stdout)["user_id"]
    machine.yui("app", "add-agent", "Coach")
    clip = tmp_path / "clip.jpg"
    clip.write_bytes(MP4)
    refused = machine.yui("app", "photo", str(clip), check=False)
    assert refused.returncode == 1 and "video" in refused.stderr
    refused = machine.yui("app", "photo", __file__, check=False)
    assert refused.returncode == 1 and "not a picture or video" in refused.stderr
    assert objects(relay, f"{user}/") == []
