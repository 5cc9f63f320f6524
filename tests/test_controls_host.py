"""The host's side of Controls against the real relay, before the engine calls it: requests
written by `yui app controls`, answered by `handle_control` exactly as the engine's hook will
(`serve_controls`, in tests/helpers/controls.py, is that hook), with `run-model`'s provider
on a real `--system` file.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from bridges.client.host import HostSession, pair
from bridges.controls.requests import controls_note, handle_control
from bridges.controls.store import ControlsState
from bridges.controls.text import HIDDEN, looks_like_key
from bridges.engine.delivery import write_outbox
from bridges.model.client import ChatClient
from bridges.model.controls import ModelControls
from bridges.model.plugin import ModelAgent, ModelOptions
from people.person import PersonApp
from state.host import HostState, OutboxItem
from tests.helpers.controls import serve_controls
from tests.helpers.relay import LocalRelay
from yui_cli.main import cli

SOUL = "# Scout\n\nYou are Scout, a calm guide.\n\n## Style\nShort answers.\n"
SECRET = "sk-proj-Zx81Qw7Lm2Nb5Vc4Xz3As6Df"
MODEL_URL = "http://127.0.0.1:9/v1"


@dataclass
class Scene:
    relay: LocalRelay
    session: HostSession
    state: HostState
    agent: ModelAgent
    provider: ModelControls
    cs: ControlsState
    system: Path

    def serve(self) -> int:
        return serve_controls(self.session, self.state, self.provider, self.cs)


def yui(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def scene(relay_env: LocalRelay, tmp_path: Path) -> Scene:
    assert yui("app", "signup", "owner").exit_code == 0
    code = json.loads(yui("app", "add-agent", "Scout", "--json").stdout)["code"]
    state = HostState(tmp_path / "host" / "state.json")
    pair(code, ref="scout", host_name="Test host", url=relay_env.url, state=state)
    session = HostSession(state)
    session.open(serving=["scout"])
    system = tmp_path / "soul.md"
    system.write_text(SOUL + f"OPENAI_API_KEY={SECRET}\n", encoding="utf-8")
    system.chmod(0o640)
    options = ModelOptions(system=system.read_text())
    agent = ModelAgent(ChatClient(MODEL_URL, "qwen-tiny"), options, session)
    provider = ModelControls(agent, system, "ollama")
    cs = ControlsState(Path(os.environ["YUI_HOME"]))
    return Scene(relay_env, session, state, agent, provider, cs, system)


@pytest.fixture
def served(scene: Scene) -> Iterator[Scene]:
    """The host answering in the background, as a running bridge would."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(0.2):
            scene.serve()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield scene
    stop.set()
    thread.join(timeout=10)


def controls(*args: str) -> tuple[int, dict[str, Any]]:
    result = yui("app", "controls", "--json", *args)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def no_keys_in_the_thread(relay: LocalRelay, user_id: str) -> None:
    """Nothing key-shaped in any of the person's rows, body or meta. (The end-to-end test
    checks the whole table, on a relay of its own.)"""
    rows = relay.sql("select body, meta::text from yui_messages where user_id = %s", (user_id,))
    assert rows
    for body, meta in rows:
        for text in (body, meta):
            assert SECRET not in text and not looks_like_key(text), text[:200]


# --- run-model's sections, driven by `yui app controls` -----------------------------------------


def test_the_personality_round_trip(served: Scene) -> None:
    code, listed = controls("list", "soul")
    assert code == 0 and listed["ok"]
    (item,) = listed["items"]
    assert item["id"] == "SOUL.md" and item["title"] == "Scout" and item["read_only"] is True

    code, got = controls("get", "soul", "SOUL.md")
    text = got["item"]["text"]
    assert SECRET not in text and text.endswith(f"{HIDDEN}\n")
    assert [h["text"] for h in got["item"]["outline"]] == ["Scout", "Style"]

    # read only (it holds a key): the placeholder can never be written back over it
    code, refused = controls("put", "soul", "SOUL.md", "--text", text, "--rev", got["rev"])
    assert code == 1 and refused["error"] == "read_only"
    assert SECRET in served.system.read_text()

    served.system.write_text(SOUL, encoding="utf-8")  # the key moves out, on the host
    code, got = controls("get", "soul", "SOUL.md")
    assert got["item"]["read_only"] is False
    new = SOUL.replace("calm", "cheerful")
    code, saved = controls("put", "soul", "SOUL.md", "--text", new, "--rev", got["rev"])
    assert code == 0 and saved["ok"] and saved["item"]["text"] == new
    assert served.system.read_text() == new and served.agent.options.system == new
    assert stat.S_IMODE(served.system.stat().st_mode) == 0o640

    code, stale = controls("put", "soul", "SOUL.md", "--text", "# Old", "--rev", got["rev"])
    assert code == 1 and stale["error"] == "conflict"
    assert stale["rev"] == saved["rev"] and stale["item"]["text"] == new
    no_keys_in_the_thread(served.relay, served.session.user_id)


def test_refusals_reach_the_person_with_their_codes(served: Scene) -> None:
    assert controls("delete", "soul", "SOUL.md", "--yes")[1]["error"] == "keep_soul"
    assert controls("get", "soul", "../soul.md")[1]["error"] == "bad_id"
    assert controls("--protocol", "2", "list", "soul")[1]["error"] == "version"
    assert controls("list", "memory")[1]["error"] == "bad_section"  # no notes kept here
    assert controls("act", "soul", "SOUL.md", "pause")[1]["error"] == "bad_verb"
    served.system.write_text(SOUL, encoding="utf-8")
    got = controls("get", "soul", "SOUL.md")[1]
    code, empty = controls("put", "soul", "SOUL.md", "--text", "  \n", "--rev", got["rev"])
    assert code == 1 and empty["error"] == "empty"
    big = "x" * (33 * 1024)
    assert controls("put", "soul", "SOUL.md", "--text", big, "--rev", got["rev"])[1]["error"] == (
        "too_big"
    )
    human = yui("app", "controls", "delete", "soul", "SOUL.md")
    assert human.exit_code == 1 and "personality" in human.stderr


def test_the_model_and_channels_are_words_without_the_url(served: Scene) -> None:
    _, got = controls("get", "model", "model")
    item = got["item"]
    assert item["title"] == "qwen-tiny" and item["provider"] == "Ollama"
    assert item["where"] == "on this computer" and item["read_only"] is False
    raw = json.dumps(got)
    assert "127.0.0.1" not in raw and ":9" not in raw and "http" not in raw
    assert controls("put", "model", "model", "--text", "gpt", "--rev", got["rev"])[1]["error"] == (
        "not_allowed"
    )
    _, channels = controls("list", "channels")
    assert [c["id"] for c in channels["items"]] == ["yui"]


def test_each_write_is_in_the_trash_the_log_and_the_next_turns_note(served: Scene) -> None:
    served.system.write_text(SOUL, encoding="utf-8")
    got = controls("get", "soul", "SOUL.md")[1]
    controls("put", "soul", "SOUL.md", "--text", SOUL + "More.\n", "--rev", got["rev"])
    (kept,) = sorted(served.cs.trash.iterdir())
    assert kept.read_text() == SOUL
    (line,) = [json.loads(x) for x in served.cs.log_path.read_text().splitlines()]
    assert (
        line["op"] == "put" and line["old"] == got["rev"] and line["who"] == served.session.user_id
    )
    assert stat.S_IMODE(served.cs.log_path.stat().st_mode) == 0o600
    agent_id = next(iter(served.session.agents))
    note = controls_note(agent_id, served.cs)
    assert note and "personality edited" in note
    assert controls_note(agent_id, served.cs) is None


def test_human_output_and_a_host_that_doesnt_answer(scene: Scene) -> None:
    result = yui("app", "controls", "--timeout", "1", "list", "soul")
    assert result.exit_code == 75 and "didn't answer" in result.stderr
    assert scene.serve() == 1  # answered late: the app has moved on, the answer still lands
    report = yui("app", "controls", "report")
    assert report.exit_code == 0 and report.stdout.strip() == "no Controls"


# --- exactly once -------------------------------------------------------------------------------


def test_a_request_is_answered_once_across_a_crash(scene: Scene) -> None:
    app = PersonApp()
    meta = {"v": 1, "req": "c-x", "op": "list", "section": "soul"}
    row = app._insert(app.agent(None), "controls: list soul", "control", meta)
    (request,) = scene.session.rows(
        "yui_messages", [("id", f"eq.{row['id']}"), ("select", "id,user_id,sender,meta")]
    )
    agent = next(iter(scene.session.agents.values()))
    first = handle_control(request, agent, scene.provider, scene.session, scene.cs)
    assert first is not None and first["meta"]["for"] == row["id"]
    assert first["body"] == "controls: list soul" and first["kind"] == "control"
    scene.state.enqueue(OutboxItem(first))  # queued; the bridge dies before the ack
    replayed = {**request, "delivered_at": "2030-01-01T00:00:00Z"}
    assert handle_control(replayed, agent, scene.provider, scene.session, scene.cs) is None
    write_outbox(scene.session, scene.state)
    assert handle_control(replayed, agent, scene.provider, scene.session, scene.cs) is None
    answers = scene.relay.sql(
        "select count(*) from yui_messages where meta->>'for' = %s", (row["id"],)
    )
    assert answers == [(1,)]
    stop = {"id": row["id"], "sender": "user", "meta": {"op": "stop"}}
    assert handle_control(stop, agent, scene.provider, scene.session, scene.cs) is None
