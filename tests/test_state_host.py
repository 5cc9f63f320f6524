"""HostState: where the file lives, pairing, floors, the outbox and acks, and many writers."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from state.errors import BadInput, NotPaired
from state.host import HostState, OutboxItem, Secret, state_path, utc_iso
from state.paths import real_path

TOKEN = "yui_ct_9f8e7d6c5b4a39281706f5e4d3c2b1a0"
CONNECTOR = {"id": "c1", "name": "laptop", "kind": "http"}


@pytest.fixture
def state(tmp_path: Path) -> HostState:
    return HostState(tmp_path / "state.json")


def reply(row_id: str, turn: list[str] | None = None, ack: tuple[str, ...] = ()) -> OutboxItem:
    row: dict[str, object] = {"id": row_id, "agent_id": "a1", "sender": "agent", "body": "hi"}
    if turn is not None:
        row["meta"] = {"turn": turn}
    return OutboxItem(row=row, ack=ack)


def test_state_path_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YUI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("YUI_STATE", raising=False)
    monkeypatch.delenv("YUI_WEBHOOK_STATE", raising=False)
    assert state_path() == tmp_path / "home" / "state.json"
    monkeypatch.setenv("YUI_WEBHOOK_STATE", "/w.json")
    assert state_path() == Path("/w.json")
    monkeypatch.setenv("YUI_STATE", "/s.json")
    assert state_path() == Path("/s.json")
    assert state_path("~/x.json") == Path.home() / "x.json"
    monkeypatch.setenv("YUI_STATE", "")  # set but empty counts as unset
    assert state_path() == Path("/w.json")
    assert HostState().path == real_path("/w.json")


def test_unpaired_file(state: HostState) -> None:
    snap = state.snapshot()
    assert (snap.token, snap.url, snap.outbox, snap.acks) == (None, None, (), ())
    with pytest.raises(NotPaired) as caught:
        state.pairing()
    assert str(state.path) in caught.value.message
    assert not state.path.exists()


def test_pairing_is_stored_private(state: HostState) -> None:
    assert state.set_pairing(token=TOKEN, connector={**CONNECTOR, "extra": 1}, url="http://r")
    pairing = state.pairing()
    assert pairing.token.reveal() == TOKEN
    assert pairing.url == "http://r"
    assert pairing.connector == CONNECTOR  # only id, name and kind are kept
    assert stat.S_IMODE(state.path.stat().st_mode) == 0o600


def fill(state: HostState) -> None:
    state.setdefault_floors(["a1"])
    state.enqueue(reply("r1", ["p1"], ack=("p1",)))
    state.add_acks(["p0"])
    state.set_inflight({"a1": ["p2"]})


def test_new_token_for_same_connector_keeps_its_work(state: HostState) -> None:
    state.set_pairing(token=TOKEN, connector=CONNECTOR, url="http://r")
    fill(state)
    before = state.snapshot()
    assert not state.set_pairing(token=TOKEN + "x", connector=CONNECTOR, url="http://r2")
    after = state.snapshot()
    assert after.token is not None and after.token.reveal() == TOKEN + "x"
    assert after.url == "http://r2"
    assert (after.floors, after.outbox, after.acks) == (before.floors, before.outbox, before.acks)
    assert after.inflight == before.inflight


def test_other_connector_starts_clean(state: HostState) -> None:
    state.set_pairing(token=TOKEN, connector=CONNECTOR, url="http://r")
    fill(state)
    with state._file.edit() as doc:
        doc["tables"] = {"a1": {}}  # a key we don't own survives
    assert state.set_pairing(token="yui_ct_other", connector={"id": "c2"}, url="http://r")
    snap = state.snapshot()
    assert (snap.floors, snap.outbox, snap.acks, snap.inflight) == ({}, (), (), {})
    assert snap.connector == {"id": "c2"}
    assert state._file.read()["tables"] == {"a1": {}}


def test_pairing_needs_token_and_connector(state: HostState) -> None:
    with pytest.raises(BadInput):
        state.set_pairing(token="", connector=CONNECTOR, url="http://r")
    with pytest.raises(BadInput):
        state.set_pairing(token=TOKEN, connector={"name": "x"}, url="http://r")


def test_floors_are_set_once(state: HostState) -> None:
    first = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)
    assert state.setdefault_floors(["a1"], first) == {"a1": "2025-01-31T12:00:00.000000Z"}
    later = first + timedelta(days=1)
    floors = state.setdefault_floors(["a1", "a2"], later)
    assert floors == {"a1": "2025-01-31T12:00:00.000000Z", "a2": "2025-02-01T12:00:00.000000Z"}
    assert state.snapshot().floors == floors


def test_utc_iso() -> None:
    tokyo = datetime(2025, 1, 1, 9, 0, 0, 5, tzinfo=timezone(timedelta(hours=9)))
    assert utc_iso(tokyo) == "2025-01-01T00:00:00.000005Z"
    assert utc_iso().endswith("Z")
    with pytest.raises(ValueError):
        utc_iso(datetime(2025, 1, 1))


def test_outbox_order_pop_and_acks(state: HostState) -> None:
    assert state.head(1) == []
    assert state.enqueue(reply("r1", ["p1", "p2"]), reply("r2", ["p1", "p2"], ("p1", "p2"))) == 2
    assert state.enqueue(reply("r1", ["p1", "p2"]), reply("r3")) == 3  # r1 is not queued twice
    assert [item.id for item in state.snapshot().outbox] == ["r1", "r2", "r3"]
    (head,) = state.head(1)
    assert head.id == "r1"

    popped = state.pop("r2")
    assert popped is not None and (popped.id, popped.ack) == ("r2", ("p1", "p2"))
    snap = state.snapshot()
    assert [item.id for item in snap.outbox] == ["r1", "r3"]
    assert snap.acks == ("p1", "p2")
    assert state.pop("r2") is None  # already gone: a second flusher got there first

    state.add_acks(["p2", "p3"])
    assert state.snapshot().acks == ("p1", "p2", "p3")
    state.remove_acks(["p1", "p3", "zz"])
    assert state.snapshot().acks == ("p2",)
    assert state.snapshot().redacted()["outbox"] == 2
    assert state.snapshot().redacted()["acks"] == 1


def test_pop_returns_the_item(state: HostState) -> None:
    item = OutboxItem(row={"id": "r1", "meta": {"turn": ["p1"]}}, ack=("p1",), queued_at=5.0)
    state.enqueue(item)
    assert state.pop("r1") == item


def test_answered_in_outbox(state: HostState) -> None:
    state.enqueue(reply("r1", ["p1", "p2"]), reply("r2"), reply("r3", ["p4"]))
    assert state.answered_in_outbox("p2")
    assert state.answered_in_outbox("p4")
    assert not state.answered_in_outbox("p3")
    assert not state.answered_in_outbox("r1")  # a reply's own id isn't a person row it answers
    state.pop("r1")
    assert not state.answered_in_outbox("p2")


def test_inflight(state: HostState) -> None:
    state.set_inflight({"a1": ["p1", "p2"]})
    turn = state.snapshot().inflight["a1"]
    assert turn.ids == ("p1", "p2")
    assert turn.started_at.endswith("Z")
    assert state.snapshot().redacted()["inflight"] == {"a1": 2}
    state.finish_turn("a1", [])  # the turn ended with no reply
    state.finish_turn("a1", [])
    assert state.snapshot().inflight == {}


def test_outbox_row_needs_an_id() -> None:
    with pytest.raises(ValueError):
        OutboxItem(row={"body": "no id"})


def test_reads_the_reference_bridges_file(tmp_path: Path) -> None:
    path = tmp_path / "webhook.json"
    path.write_text(
        json.dumps(
            {
                "token": TOKEN,
                "connector": CONNECTOR,
                "floors": {"a1": "2025-01-01T00:00:00Z"},
                "outbox": [
                    {
                        "row": {"id": "r1", "meta": {"turn": ["p1"]}},
                        "ack": ["p1"],
                        "handoff": False,
                        "queued_at": 1.5,
                    }
                ],
                "acks": ["p0"],
                "tables": {},
            }
        )
    )
    state = HostState(path)
    assert state.pairing().url is None
    assert state.answered_in_outbox("p1")
    state.pop("r1")
    assert state.snapshot().acks == ("p0", "p1")


@pytest.mark.parametrize(
    "doc",
    [
        {"outbox": {}},
        {"outbox": [{"ack": []}]},
        {"outbox": [{"row": {"id": "r"}, "ack": "p1"}]},
        {"acks": [1]},
        {"token": 5},
        {"floors": []},
        {"inflight": {"a1": {"ids": ["p"]}}},
    ],
)
def test_malformed_sections_are_refused(tmp_path: Path, doc: dict[str, object]) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInput) as caught:
        HostState(path).snapshot()
    assert str(path) in caught.value.message


def test_token_never_printed(state: HostState) -> None:
    state.set_pairing(token=TOKEN, connector=CONNECTOR, url="http://r")
    fill(state)
    snap = state.snapshot()
    pairing = state.pairing()
    secret = pairing.token
    shown = [show(thing) for thing in (state, snap, pairing, secret) for show in (repr, str)]
    shown += [f"{secret}", f"{secret!r}", json.dumps(snap.redacted())]
    for text in shown:
        assert TOKEN not in text
        assert TOKEN[7:15] not in text
    assert snap.redacted()["token"] == "yui_ct_…"
    assert isinstance(secret, Secret)


def _append(path: str, index: int, go: multiprocessing.synchronize.Event) -> None:
    go.wait()
    HostState(path).enqueue(reply(f"r{index}", [f"p{index}"]))


def test_fifty_processes_append_at_once(state: HostState) -> None:
    state.set_pairing(token=TOKEN, connector=CONNECTOR, url="http://r")
    fork = multiprocessing.get_context("fork")
    go = fork.Event()
    workers = [fork.Process(target=_append, args=(str(state.path), i, go)) for i in range(50)]
    for worker in workers:
        worker.start()
    go.set()
    for worker in workers:
        worker.join(timeout=30)
    assert [worker.exitcode for worker in workers] == [0] * 50
    ids = [item.id for item in state.snapshot().outbox]
    assert sorted(ids) == sorted(f"r{i}" for i in range(50))
    assert state.pairing().token.reveal() == TOKEN
    assert sorted(os.listdir(state.path.parent)) == ["state.json", "state.json.lock"]
