"""`bridges/controls/` on its own: each op, the host's checks in the seed's order, secrets,
the trash, the log and the agent's note, with an in-memory provider and a fake clock."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from bridges.client.rows import AgentInfo
from bridges.controls.provider import SOUL_ID, ControlError, ControlsProvider, report_of, rev_of
from bridges.controls.requests import MAX_TEXT, controls_note, respond
from bridges.controls.store import WRITES_PER_MINUTE, ControlsState
from bridges.controls.text import HIDDEN, looks_like_key, redact_text

OWNER = "11111111-1111-1111-1111-111111111111"
AGENT = AgentInfo(id="a1", name="Scout", handle="scout", ref="scout")
SOUL = "# Scout\n\nYou are Scout, a calm guide.\n\n## Style\nShort answers."
KEY_LINE = "OPENAI_API_KEY=sk-proj-a8F3kQ9zL2mX7vB4nT6yR1wE5"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class Memory(ControlsProvider):
    """An in-memory provider: a personality, memories, schedules and a read-only model."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, dict[str, Any]]] = {
            "soul": {SOUL_ID: {"id": SOUL_ID, "text": SOUL}},
            "memory": {
                "mem-1": {"id": "mem-1", "text": "Likes short runs"},
                "mem-2": {"id": "mem-2", "text": f"Keys for the garage\n{KEY_LINE}"},
            },
            "schedules": {"morning": {"id": "morning", "title": "morning", "paused": False}},
            "model": {"model": {"id": "model", "title": "tiny", "text": "tiny on this computer"}},
        }
        self.calls: list[tuple[str, ...]] = []

    def sections(self) -> dict[str, str]:
        return {"soul": "rw", "memory": "rwd", "schedules": "rwd", "model": "r"}

    def list(self, agent: AgentInfo, section: str) -> list[dict[str, Any]]:
        return list(self.items[section].values())

    def get(self, agent: AgentInfo, section: str, item_id: str) -> dict[str, Any] | None:
        found = self.items[section].get(item_id)
        return dict(found) if found else None

    def put(self, agent, section, item_id, value, rev) -> dict[str, Any]:
        self.calls.append(("put", section, item_id))
        self.items[section][item_id] = {**self.items[section][item_id], "text": value["text"]}
        return self.items[section][item_id]

    def act(self, agent, section, item_id, verb) -> dict[str, Any]:
        self.calls.append(("act", section, item_id, verb))
        self.items[section][item_id]["paused"] = verb == "pause"
        return self.items[section][item_id]

    def delete(self, agent, section, item_id, rev) -> None:
        self.calls.append(("delete", section, item_id))
        del self.items[section][item_id]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def state(tmp_path: Path, clock: Clock) -> ControlsState:
    return ControlsState(tmp_path / "yui", clock=clock)


@pytest.fixture
def memory() -> Memory:
    return Memory()


def ask(provider: Any, state: ControlsState, **meta: Any) -> dict[str, Any]:
    row = {"id": "r1", "sender": meta.pop("sender", "user"), "user_id": meta.pop("who", OWNER)}
    row["meta"] = {"v": 1, "req": "c-1", **meta}
    return respond(row, AGENT, provider, state, owner=OWNER)


def log_lines(state: ControlsState) -> list[dict[str, Any]]:
    if not state.log_path.exists():
        return []
    return [json.loads(line) for line in state.log_path.read_text().splitlines()]


def trash(state: ControlsState) -> list[Path]:
    return sorted(state.trash.iterdir()) if state.trash.exists() else []


# --- each op ------------------------------------------------------------------------------------


def test_list_gives_titles_and_revs_without_the_text(memory, state) -> None:
    answer = ask(memory, state, op="list", section="memory")
    assert answer["ok"] and answer["req"] == "c-1" and answer["section"] == "memory"
    first, second = answer["items"]
    assert first == {
        "id": "mem-1",
        "title": "Likes short runs",
        "rev": rev_of({"text": "Likes short runs"}),
        "read_only": False,
    }
    assert second["title"] == "Keys for the garage" and second["read_only"] is True


def test_get_gives_the_item_its_rev_and_whether_it_is_read_only(memory, state) -> None:
    answer = ask(memory, state, op="get", section="soul", id=SOUL_ID)
    assert answer["ok"] and answer["id"] == SOUL_ID
    assert answer["item"]["text"] == SOUL and answer["item"]["read_only"] is False
    assert answer["rev"] == answer["item"]["rev"] == rev_of({"text": SOUL})
    assert len(answer["rev"]) == 12
    assert log_lines(state) == [] and trash(state) == []


def test_put_with_the_right_rev_is_saved_kept_in_the_trash_and_logged(memory, state) -> None:
    rev = rev_of({"text": SOUL})
    new = "# Scout\n\nYou are Scout, a cheerful guide."
    answer = ask(memory, state, op="put", section="soul", id=SOUL_ID, rev=rev, value={"text": new})
    assert answer["ok"], answer
    assert answer["item"]["text"] == new and answer["rev"] == rev_of({"text": new})
    assert memory.items["soul"][SOUL_ID]["text"] == new
    (kept,) = trash(state)
    assert kept.read_text() == SOUL and kept.name.endswith("-scout-soul-SOUL.md")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    (line,) = log_lines(state)
    assert {k: line[k] for k in ("who", "agent", "op", "section", "id", "old", "new")} == {
        "who": OWNER,
        "agent": "a1",
        "op": "put",
        "section": "soul",
        "id": SOUL_ID,
        "old": rev,
        "new": answer["rev"],
    }
    assert stat.S_IMODE(state.log_path.stat().st_mode) == 0o600
    note = controls_note("a1", state)
    assert note is not None and "personality edited" in note
    assert note.startswith("[yui] ") and "\n" not in note
    assert controls_note("a1", state) is None  # once


def test_a_stale_rev_is_a_conflict_with_the_current_item(memory, state) -> None:
    answer = ask(
        memory, state, op="put", section="soul", id=SOUL_ID, rev="b41c09000000", value={"text": "x"}
    )
    assert not answer["ok"] and answer["error"] == "conflict" and answer["message"]
    assert answer["rev"] == rev_of({"text": SOUL}) and answer["item"]["text"] == SOUL
    assert memory.calls == [] and trash(state) == [] and log_lines(state) == []


def test_act_pauses_a_schedule(memory, state) -> None:
    answer = ask(memory, state, op="act", section="schedules", id="morning", verb="pause")
    assert answer["ok"] and answer["item"]["paused"] is True
    (kept,) = trash(state)
    assert json.loads(kept.read_text())["paused"] is False
    assert log_lines(state)[0]["verb"] == "pause"
    assert 'schedule "morning" paused' in (controls_note("a1", state) or "")


def test_delete_needs_a_yes_then_forgets(memory, state) -> None:
    rev = rev_of({"text": "Likes short runs"})
    refused = ask(memory, state, op="delete", section="memory", id="mem-1", rev=rev)
    assert refused["error"] == "confirm" and "mem-1" in memory.items["memory"]
    done = ask(memory, state, op="delete", section="memory", id="mem-1", rev=rev, confirmed=True)
    assert done["ok"] and done["deleted"] is True and "mem-1" not in memory.items["memory"]
    assert [p.read_text() for p in trash(state)] == ["Likes short runs"]
    assert log_lines(state)[0]["new"] is None
    assert "a memory forgotten" in (controls_note("a1", state) or "")


# --- refusals, in the seed's order --------------------------------------------------------------


@pytest.mark.parametrize(
    ("meta", "error"),
    [
        ({"v": 2, "op": "list", "section": "soul"}, "version"),
        ({"v": None, "op": "bogus"}, "version"),
        ({"v": True, "op": "list", "section": "soul"}, "version"),
        ({"who": "22222222-2222-2222-2222-222222222222", "op": "list"}, "not_owner"),
        ({"sender": "agent", "op": "list", "section": "soul"}, "not_owner"),
        ({"op": "rename", "section": "soul"}, "bad_op"),
        ({"op": ["list"], "section": "soul"}, "bad_op"),
        ({"op": "list", "section": "skills"}, "bad_section"),  # not served here
        ({"op": "list", "section": "secrets"}, "bad_section"),
        ({"op": "list", "section": ["soul"]}, "bad_section"),
        ({"op": "delete", "section": "soul", "id": SOUL_ID, "confirmed": True}, "keep_soul"),
        ({"op": "put", "section": "model", "id": "model", "value": {"text": "x"}}, "not_allowed"),
        ({"op": "delete", "section": "soul", "id": "../etc/passwd"}, "keep_soul"),
        ({"op": "get", "section": "memory", "id": "../../.env"}, "bad_id"),
        ({"op": "get", "section": "memory", "id": "a/b"}, "bad_id"),
        ({"op": "get", "section": "memory", "id": ".env"}, "bad_id"),
        ({"op": "get", "section": "memory", "id": "mem..1"}, "bad_id"),
        ({"op": "get", "section": "memory", "id": "m" * 101}, "bad_id"),
        ({"op": "get", "section": "memory", "id": 3}, "bad_id"),
        ({"op": "get", "section": "memory", "id": "mem-9"}, "not_found"),
        ({"op": "act", "section": "schedules", "id": "morning", "verb": "explode"}, "bad_verb"),
        ({"op": "delete", "section": "memory", "id": "bad/id"}, "bad_id"),
        ({"op": "delete", "section": "memory", "id": "mem-1", "rev": "stale"}, "confirm"),
    ],
)
def test_each_refusal_in_order(memory, state, meta: dict, error: str) -> None:
    answer = ask(memory, state, **meta)
    assert answer["ok"] is False and answer["error"] == error, answer
    assert answer["message"] and answer["v"] == 1
    assert memory.calls == [] and log_lines(state) == []


def test_a_bridge_without_controls_answers_bad_section(state) -> None:
    answer = ask(None, state, op="list", section="soul")
    assert answer["error"] == "bad_section"
    assert report_of(None) is None


def test_the_31st_write_in_a_minute_is_too_fast(memory, state, clock) -> None:
    for _ in range(WRITES_PER_MINUTE):
        assert ask(memory, state, op="act", section="schedules", id="morning", verb="run")["ok"]
    refused = ask(memory, state, op="act", section="schedules", id="morning", verb="run")
    assert refused["error"] == "too_fast"
    stale = ask(memory, state, op="put", section="soul", id=SOUL_ID, rev="x", value={"text": "y"})
    assert stale["error"] == "too_fast"  # the rate is checked before the rev
    assert ask(memory, state, op="get", section="soul", id=SOUL_ID)["ok"]  # reads are free
    assert len(log_lines(state)) == WRITES_PER_MINUTE
    clock.now += 61
    assert ask(memory, state, op="act", section="schedules", id="morning", verb="run")["ok"]
    assert "(31 times)" in (controls_note("a1", state) or "")


def test_33_kb_is_too_big_and_32_kb_fits(memory, state) -> None:
    rev = rev_of({"text": SOUL})
    big = {"text": "é" * (33 * 1024 // 2)}
    answer = ask(memory, state, op="put", section="soul", id=SOUL_ID, rev=rev, value=big)
    assert answer["error"] == "too_big"
    fits = {"text": "a" * MAX_TEXT}
    assert ask(memory, state, op="put", section="soul", id=SOUL_ID, rev=rev, value=fits)["ok"]


@pytest.mark.parametrize("text", ["", "   \n\t\n"])
def test_an_empty_personality_is_refused(memory, state, text: str) -> None:
    rev = rev_of({"text": SOUL})
    answer = ask(memory, state, op="put", section="soul", id=SOUL_ID, rev=rev, value={"text": text})
    assert answer["error"] == "empty" and memory.items["soul"][SOUL_ID]["text"] == SOUL


@pytest.mark.parametrize("value", [None, "text", {"text": 3}, {"text": ["a"]}])
def test_a_value_must_hold_text(memory, state, value: Any) -> None:
    rev = rev_of({"text": "Likes short runs"})
    answer = ask(memory, state, op="put", section="memory", id="mem-1", rev=rev, value=value)
    assert answer["error"] == "bad_value"


# --- secrets ------------------------------------------------------------------------------------


def test_a_key_shaped_line_goes_out_whole_as_the_placeholder(memory, state) -> None:
    answer = ask(memory, state, op="get", section="memory", id="mem-2")
    text = answer["item"]["text"]
    assert text == f"Keys for the garage\n{HIDDEN}" and answer["item"]["read_only"] is True
    assert "sk-proj" not in json.dumps(answer)
    assert answer["rev"] == rev_of({"text": f"Keys for the garage\n{KEY_LINE}"})


def test_a_read_only_item_cant_be_saved_and_a_key_cant_be_sent(memory, state) -> None:
    rev = rev_of(memory.items["memory"]["mem-2"])
    back = {"text": f"Keys for the garage\n{HIDDEN}"}
    answer = ask(memory, state, op="put", section="memory", id="mem-2", rev=rev, value=back)
    assert answer["error"] == "read_only"
    rev1 = rev_of(memory.items["memory"]["mem-1"])
    keyed = {"text": f"Likes short runs\n{KEY_LINE}"}
    assert ask(memory, state, op="put", section="memory", id="mem-1", rev=rev1, value=keyed)[
        "error"
    ] == ("unsafe")
    placeholder = {"text": f"Likes {HIDDEN}"}
    assert ask(memory, state, op="put", section="memory", id="mem-1", rev=rev1, value=placeholder)[
        "error"
    ] == ("unsafe")
    assert memory.calls == []


@pytest.mark.parametrize(
    "line",
    [
        KEY_LINE,
        "sk-ant-api03-abcdefghijklmnopqrstu",
        "stripe: sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "github_pat_11ABCDEFG0abcdefghijklmnop",
        "xoxb-123456789012-1234567890123-abcdefghij",
        "AKIAIOSFODNN7EXAMPLE",
        "AIzaSyA-1234567890abcdefghijklmnopqrstu",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig",
        "yui_ct_9f8e7d6c5b4a39281706",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "password = correcthorsebattery",
        '"api_key": "0123456789abcdef0123"',
        "Authorization: Bearer abcdef0123456789abcdef",
    ],
)
def test_key_shapes(line: str) -> None:
    assert looks_like_key(line)
    assert redact_text(f"before\n  {line}  \nafter") == (f"before\n{HIDDEN}\nafter", True)


@pytest.mark.parametrize(
    "line",
    [
        "# Scout",
        "You are Scout, a calm guide who keeps a secret recipe.",
        "Ask for a token of thanks, never a password.",
        "The bearer of good news speaks first.",
        "Task: summarise the meeting at 14:30 in two lines.",
        "Use sk-learn for models.",
    ],
)
def test_prose_is_not_a_key(line: str) -> None:
    assert not looks_like_key(line)


# --- a provider's mistakes ----------------------------------------------------------------------


class Broken(Memory):
    def list(self, agent, section):
        raise KeyError("a bug")

    def get(self, agent, section, item_id):
        return (
            {"id": "../../x", "text": "?"}
            if item_id == "weird"
            else super().get(agent, section, item_id)
        )


def test_a_providers_bug_is_a_failed_answer_never_a_crash(state) -> None:
    answer = ask(Broken(), state, op="list", section="memory")
    assert answer["error"] == "failed" and answer["detail"] == "KeyError"
    shape = ask(Broken(), state, op="get", section="memory", id="weird")
    assert shape["error"] == "failed"


def test_a_provider_refusal_passes_through(memory, state) -> None:
    def refuse(*args: Any) -> None:
        raise ControlError("bundled")

    memory.delete = refuse
    rev = rev_of({"text": "Likes short runs"})
    answer = ask(memory, state, op="delete", section="memory", id="mem-1", rev=rev, confirmed=True)
    assert answer["error"] == "bundled" and "mem-1" in memory.items["memory"]
    assert log_lines(state) == []


def test_an_answer_too_long_for_the_relay_is_refused_whole(memory, state) -> None:
    memory.items["memory"] = {
        f"m{n}": {"id": f"m{n}", "when": "t" * 400, "text": "x"} for n in range(200)
    }
    answer = ask(memory, state, op="list", section="memory")
    assert answer["error"] == "too_long" and "items" not in answer


def test_the_report_keeps_known_sections_within_their_limits() -> None:
    class Greedy(Memory):
        def sections(self) -> dict[str, str]:
            return {"soul": "rw", "model": "rwd", "secrets": "rw", "memory": "dr"}

    assert report_of(Greedy()) == {"v": 1, "sections": {"soul": "rw"}}
    report = report_of(Memory())
    assert report is not None and report["sections"] == Memory().sections()


# --- the note, the trash ------------------------------------------------------------------------


def test_the_note_survives_a_restart_and_names_at_most_twelve(tmp_path, clock) -> None:
    state = ControlsState(tmp_path / "yui", clock=clock)
    for n in range(14):
        state.changed("a1", f'schedule "s{n}" paused')
    state.changed("a1", 'schedule "s0" paused')
    again = ControlsState(tmp_path / "yui", clock=clock)
    note = again.take_note("a1")
    assert note is not None and note.count(";") == 12
    assert 's0" paused (2 times)' in note and "2 more" in note
    assert again.take_note("a1") is None and again.take_note("other") is None


def test_trash_older_than_thirty_days_is_swept(memory, state, clock) -> None:
    rev = rev_of({"text": "Likes short runs"})
    ask(memory, state, op="put", section="memory", id="mem-1", rev=rev, value={"text": "Runs"})
    (old,) = trash(state)
    month_ago = clock.now - 31 * 86400
    os.utime(old, (month_ago, month_ago))
    rev = rev_of({"text": "Runs"})
    ask(memory, state, op="put", section="memory", id="mem-1", rev=rev, value={"text": "Walks"})
    assert [p.read_text() for p in trash(state)] == ["Runs"]
