"""The host's state file (DESIGN §4.1), shared by the bridge and every other `yui` command.

It holds the relay `url`, the connector `token` and `connector`, a `floors` entry per agent (the
oldest time its rows are read from), the `outbox` of replies not yet written, the `acks` (person
rows whose `handled_at` is still to be written), the `inflight` turn of each agent, and the
`remote` side of a thread a plug-in keeps (an A2A agent's context and task). Each change
below is one small locked edit of the file, so a bridge and any number of `yui send` runs share it
without losing an update. The token only ever leaves as a `Secret`, which prints redacted.

What an edit costs, and why each is kept: every edit is a rename of a fresh file, with two
fsyncs, one of the file (else a power cut can leave the new name on an empty file) and one of
its folder (else it can undo the rename). A bridge's turn makes two, each shared with the other
turns that start or end at once: `set_inflight`, before the agent is asked, so a crash asks it
again for exactly those rows under the same key; and `finish_turns`, so the reply is on disk
before its first send and a crash never asks the agent again for an answer it gave. What
follows the send, the reply gone from the outbox and the acks the relay took (`landed`,
`handled`), is kept in memory and rides on the next edit (or `settle`): losing it to a crash
only resends the reply, which the relay answers 409 (it landed before), and writes the same
`handled_at` again.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from state.errors import BadInput, NotPaired
from state.jsonfile import JsonFile
from state.paths import yui_home

STATE_ENV = ("YUI_STATE", "YUI_WEBHOOK_STATE")  # the second is the reference bridge's name
# meaningless under another connector
PER_CONNECTOR = ("floors", "outbox", "acks", "inflight", "notes", "remote")
CONNECTOR_KEYS = ("id", "name", "kind")


def state_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--state PATH`, else `$YUI_STATE`, else `$YUI_WEBHOOK_STATE`, else `~/.yui/state.json`."""
    for candidate in (explicit, *(os.environ.get(name) for name in STATE_ENV)):
        if candidate:
            return Path(candidate).expanduser()
    return yui_home() / "state.json"


def utc_iso(when: datetime | None = None) -> str:
    """`when` (default now) as `2025-01-31T12:00:00.000000Z`: a `Z`, not `+00:00`, so it can go
    in a PostgREST query string without escaping."""
    when = when or datetime.now(UTC)
    if when.tzinfo is None:
        raise ValueError("a floor needs a timezone-aware datetime")
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def redact(token: str) -> str:
    """What may be shown of a token: its kind prefix (`yui_ct_…`), never a character of the key."""
    kind = re.match(r"[A-Za-z]+_[A-Za-z]+_", token)
    return (kind.group(0) if kind else "") + "…"


class Secret:
    """A credential that shows as `yui_ct_…` in repr, str, f-strings and logs; `reveal()` gives
    the value, so every use of the real token is an explicit call that is easy to audit."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The token itself, for an Authorization header and nothing else."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({redact(self._value)!r})"

    def __str__(self) -> str:
        return redact(self._value)


@dataclass(frozen=True)
class OutboxItem:
    """A reply row saved before its first send, and the person rows to ack once it is written."""

    row: dict[str, Any]
    ack: tuple[str, ...] = ()
    handoff: bool = False  # `yui send` pushes as a hand-over; a reply in a turn doesn't
    queued_at: float = field(default_factory=time.time)  # unix seconds, as the reference writes

    def __post_init__(self) -> None:
        if not isinstance(self.row.get("id"), str) or not self.row["id"]:
            raise ValueError("an outbox row needs the id it will be inserted with")

    @property
    def id(self) -> str:
        """The row's client-made id: the key a resend collides on (409), so nothing lands twice."""
        return self.row["id"]

    @property
    def turn(self) -> list[str]:
        """The person rows this reply answers (its `meta.turn`)."""
        meta = self.row.get("meta")
        turn = meta.get("turn") if isinstance(meta, dict) else None
        return [str(row_id) for row_id in turn] if isinstance(turn, list) else []

    def answers(self, row_id: str) -> bool:
        """Whether this reply names person row `row_id` in its `meta.turn`."""
        return row_id in self.turn

    def to_json(self) -> dict[str, Any]:
        """The item as stored in the file."""
        return {
            "row": self.row,
            "ack": list(self.ack),
            "handoff": self.handoff,
            "queued_at": self.queued_at,
        }

    @classmethod
    def from_json(cls, raw: Any, path: Path) -> OutboxItem:
        """An item read from `path`; a hand-edited item we can't send raises BadInput."""
        try:
            return cls(
                row=dict(raw["row"]),
                ack=tuple(_strings(raw.get("ack", []), "an outbox item's ack", path)),
                handoff=bool(raw.get("handoff", False)),
                queued_at=float(raw.get("queued_at", 0.0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise BadInput(f"{path} has a malformed outbox item") from None


@dataclass(frozen=True)
class TurnEnd:
    """How an agent's turn ends in the file: `items` join the outbox, `acks` wait to be
    written, the in-flight record goes, and `note_floor` (if any) moves the agent's notes."""

    agent_id: str
    items: tuple[OutboxItem, ...] = ()
    acks: tuple[str, ...] = ()
    note_floor: str | None = None


@dataclass(frozen=True)
class Inflight:
    """The rows an agent is answering right now, saved before it is asked, so a restart re-asks
    exactly those rows."""

    ids: tuple[str, ...]
    started_at: str


@dataclass(frozen=True)
class Pairing:
    """What a bridge needs to open a session. `url` is None in a reference bridge's file."""

    url: str | None
    token: Secret
    connector: dict[str, Any]


@dataclass(frozen=True)
class HostSnapshot:
    """The whole state file at one moment, read without a lock."""

    path: Path
    url: str | None
    token: Secret | None
    connector: dict[str, Any]
    floors: dict[str, str]
    outbox: tuple[OutboxItem, ...]
    acks: tuple[str, ...]
    inflight: dict[str, Inflight]

    def redacted(self) -> dict[str, Any]:
        """A view safe to print (`yui status`): counts for the queues, and no token."""
        return {
            "path": str(self.path),
            "url": self.url,
            "token": redact(self.token.reveal()) if self.token else None,
            "connector": self.connector,
            "floors": self.floors,
            "outbox": len(self.outbox),
            "acks": len(self.acks),
            "inflight": {agent: len(turn.ids) for agent, turn in self.inflight.items()},
        }


class HostState:
    """The state file at `state_path(path)`; every method is one atomic read or locked edit."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._file = JsonFile(state_path(path))
        self.path = self._file.path
        # The last session (JWT, agents, guide) sits beside the state, not in it: it is large
        # and rarely changes, while the state is rewritten several times a turn.
        self._session = JsonFile(self.path.with_name(self.path.name + ".session"))
        # Written to the relay, not yet out of the file: replies that landed, acks it took.
        self._later = threading.Lock()
        self._landed: set[str] = set()
        self._handled: set[str] = set()
        self._unsettled_at: float | None = None  # monotonic time the oldest of them came

    def __repr__(self) -> str:
        return f"HostState({str(self.path)!r})"

    def snapshot(self) -> HostSnapshot:
        """Everything in the file, as it is now."""
        doc = self._read()
        token = _text(doc, "token", self.path)
        return HostSnapshot(
            path=self.path,
            url=_text(doc, "url", self.path),
            token=Secret(token) if token else None,
            connector=_section(doc, "connector", dict, self.path),
            floors=_section(doc, "floors", dict, self.path),
            outbox=tuple(_outbox(doc, self.path)),
            acks=tuple(_acks(doc, self.path)),
            inflight=_inflight(doc, self.path),
        )

    def pairing(self) -> Pairing:
        """The pairing, or NotPaired when this file has no token yet."""
        snap = self.snapshot()
        if snap.token is None:
            raise NotPaired(
                f"{self.path} has no connector token", hint="pair this machine: yui pair <code>"
            )
        return Pairing(url=snap.url, token=snap.token, connector=snap.connector)

    def set_pairing(self, *, token: str, connector: Mapping[str, Any], url: str) -> bool:
        """Store a pairing's result. A different connector starts clean, since the old one's
        floors, outbox and acks mean nothing to it; a new token for the same connector keeps
        them. Returns whether it started clean."""
        if not token or not connector.get("id"):
            raise BadInput("the pairing answer has no connector token or connector id")
        with self._edit() as doc:
            old = doc.get("connector")
            reset = not isinstance(old, dict) or old.get("id") != connector["id"]
            if reset:
                for key in PER_CONNECTOR:
                    doc.pop(key, None)
                if self._session.path.exists():
                    with self._session.edit() as session:
                        session.clear()
            doc["url"] = url
            doc["token"] = token
            doc["connector"] = {k: connector[k] for k in CONNECTOR_KEYS if k in connector}
            return reset

    def setdefault_floors(
        self, agent_ids: Iterable[str], when: datetime | None = None
    ) -> dict[str, str]:
        """Give each agent not seen before the floor `when` (default now) and keep every floor
        already set: a floor is a lower bound that never moves. Returns these agents' floors."""
        stamp = utc_iso(when)
        with self._edit() as doc:
            floors = _section(doc, "floors", dict, self.path)
            return {agent: floors.setdefault(agent, stamp) for agent in agent_ids}

    def enqueue(self, *items: OutboxItem) -> int:
        """Append replies to the outbox in one write, before any send is tried. A row id already
        queued is skipped, so queueing again after a crash is harmless. Returns the depth."""
        with self._edit() as doc:
            outbox = _outbox(doc, self.path)
            queued = {item.id for item in outbox}
            for item in items:
                if item.id not in queued:
                    outbox.append(item)
                    queued.add(item.id)
            doc["outbox"] = [item.to_json() for item in outbox]
            return len(outbox)

    def replace(self, item: OutboxItem) -> bool:
        """Put a rewritten reply (its media hosted) in place of the queued one with its id,
        keeping its place, so a retry sends what was prepared instead of preparing it again.
        False when it has already left the outbox (another writer sent it)."""
        with self._edit() as doc:
            outbox = _outbox(doc, self.path)
            at = next((n for n, queued in enumerate(outbox) if queued.id == item.id), None)
            if at is not None:
                outbox[at] = item
                doc["outbox"] = [queued.to_json() for queued in outbox]
            return at is not None

    def pop(self, row_id: str) -> OutboxItem | None:
        """Remove a reply once written (or refused for good) and move its ack ids into `acks` in
        the same write, so a crash can't lose them in between. None if it was already gone."""
        with self._edit() as doc:
            outbox = _outbox(doc, self.path)
            item = next((item for item in outbox if item.id == row_id), None)
            if item is not None:
                doc["outbox"] = [other.to_json() for other in outbox if other is not item]
                doc["acks"] = _union(_acks(doc, self.path), item.ack)
            return item

    def head(self, count: int) -> list[OutboxItem]:
        """The oldest `count` replies not yet written, in order."""
        return _outbox(self._read(), self.path)[:count]

    def pop_many(self, row_ids: Iterable[str]) -> list[OutboxItem]:
        """`pop` for several written replies in one write; returns those that were there."""
        wanted = set(row_ids)
        with self._edit() as doc:
            gone = [item for item in _outbox(doc, self.path) if item.id in wanted]
            _settled(doc, {item.id for item in gone}, set(), self.path)
            return gone

    def add_acks(self, row_ids: Iterable[str]) -> None:
        """Remember person rows whose `handled_at` is still to be written (kept until it is)."""
        with self._edit() as doc:
            doc["acks"] = _union(_acks(doc, self.path), row_ids)

    def remove_acks(self, row_ids: Iterable[str]) -> None:
        """Forget acks whose `handled_at` the relay has taken."""
        with self._edit() as doc:
            _settled(doc, set(), set(row_ids), self.path)

    def landed(self, row_ids: Iterable[str]) -> None:
        """`pop_many` without an edit of its own: the replies leave the outbox (their acks
        join `acks`) for every read of this state at once, and in the file with its next edit."""
        with self._later:
            self._landed.update(row_ids)
            self._unsettled_at = self._unsettled_at or time.monotonic()

    def handled(self, row_ids: Iterable[str]) -> None:
        """`remove_acks` without an edit of its own, as `landed`."""
        with self._later:
            self._handled.update(row_ids)
            self._unsettled_at = self._unsettled_at or time.monotonic()

    def unsettled_for(self) -> float | None:
        """Seconds since the oldest `landed`/`handled` still out of the file; None: none is."""
        with self._later:
            at = self._unsettled_at
        return None if at is None else time.monotonic() - at

    def settle(self) -> None:
        """Put what `landed` and `handled` keep in memory into the file now."""
        if self.unsettled_for() is not None:
            with self._edit():
                pass

    def _read(self) -> dict[str, Any]:
        """The file as it is now, with what `landed` and `handled` keep in memory."""
        doc = self._file.read()
        with self._later:
            _settled(doc, self._landed, self._handled, self.path)
        return doc

    @contextlib.contextmanager
    def _edit(self) -> Iterator[dict[str, Any]]:
        """A locked edit of the file, which also writes what `landed` and `handled` kept."""
        with self._later:
            landed, handled = set(self._landed), set(self._handled)
        with self._file.edit() as doc:
            if landed or handled:
                _settled(doc, landed, handled, self.path)
            yield doc
        if landed or handled:
            with self._later:
                self._landed -= landed
                self._handled -= handled
                if not (self._landed or self._handled):
                    self._unsettled_at = None

    def answered_in_outbox(self, row_id: str) -> bool:
        """Whether a reply to person row `row_id` waits in the outbox, so a restarted bridge
        only acks that row instead of asking the agent again."""
        return any(item.answers(row_id) for item in _outbox(self._read(), self.path))

    def set_inflight(self, turns: Mapping[str, Iterable[str]]) -> None:
        """Record the rows each agent is about to be asked (agent id → row ids), before any
        is asked: one edit for every turn a bridge starts at once."""
        started = utc_iso()
        with self._edit() as doc:
            inflight = _section(doc, "inflight", dict, self.path)
            for agent_id, row_ids in turns.items():
                inflight[agent_id] = {"ids": list(row_ids), "started_at": started}

    def finish_turn(
        self,
        agent_id: str,
        items: Iterable[OutboxItem],
        acks: Iterable[str] = (),
        note_floor: str | None = None,
    ) -> None:
        """End an agent's turn in one write: its replies join the outbox (the last carrying the
        turn's acks), or, for a turn with no reply, its rows go straight to `acks`; the notes
        it read move the agent's note floor."""
        self.finish_turns([TurnEnd(agent_id, tuple(items), tuple(acks), note_floor)])

    def finish_turns(self, ends: Iterable[TurnEnd]) -> None:
        """`finish_turn` for several agents' turns in one write (turns that ended at once)."""
        with self._edit() as doc:
            inflight = _section(doc, "inflight", dict, self.path)
            outbox = _outbox(doc, self.path)
            queued = {item.id for item in outbox}
            acks = _acks(doc, self.path)
            for end in ends:
                if end.note_floor is not None:
                    _section(doc, "notes", dict, self.path)[end.agent_id] = end.note_floor
                fresh = [item for item in end.items if item.id not in queued]
                outbox += fresh
                queued.update(item.id for item in fresh)
                acks = _union(acks, end.acks)
                inflight.pop(end.agent_id, None)
            doc["outbox"] = [item.to_json() for item in outbox]
            doc["acks"] = acks

    def save_session(self, session: Mapping[str, Any]) -> None:
        """Keep the relay's last session answer (its JWT, person and agents), so a `yui send`
        beside a running bridge needs no token trade of its own, and can still queue while the
        relay is unreachable."""
        with self._session.edit() as doc:
            doc.clear()
            doc.update(session)

    def save_session_agents(self, agents: list[Mapping[str, Any]]) -> None:
        """Replace the agents of the saved session (none saved: nothing to do)."""
        with self._session.edit() as doc:
            if doc:
                doc["agents"] = [dict(agent) for agent in agents]

    def remember_session_agent(self, agent: Mapping[str, Any]) -> None:
        """Add an agent just paired to the saved session, so the next command finds it
        without a token trade (none saved: the next command trades one anyway)."""
        keys = ("id", "name", "handle", "remote_ref")
        with self._session.edit() as doc:
            if doc and isinstance(doc.get("agents"), list):
                known = [a for a in doc["agents"] if str(a.get("id")) != str(agent["id"])]
                doc["agents"] = [*known, {k: agent.get(k) for k in keys}]

    def load_session(self) -> dict[str, Any] | None:
        """The last session saved, if any."""
        return self._session.read() or None

    def note_floor(self, agent_id: str) -> str | None:
        """Up to when the agent has read its thread's mention and group notes."""
        return _section(self._file.read(), "notes", dict, self.path).get(agent_id)

    def remote(self, agent_id: str) -> dict[str, Any]:
        """What a plug-in keeps of the agent's own side of the thread (an A2A agent's context
        and the task it works on), or {}."""
        found = _section(self._file.read(), "remote", dict, self.path).get(agent_id)
        return dict(found) if isinstance(found, dict) else {}

    def update_remote(self, agent_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Change what a plug-in keeps of the agent's side in one locked edit (a None value
        removes its key); returns the record as it now is."""
        with self._edit() as doc:
            remotes = _section(doc, "remote", dict, self.path)
            found = remotes.get(agent_id)
            record = dict(found) if isinstance(found, dict) else {}
            record.update(changes)
            record = {key: value for key, value in record.items() if value is not None}
            remotes[agent_id] = record
            return dict(record)


def _section(doc: dict[str, Any], key: str, kind: type, path: Path) -> Any:
    """`doc[key]`, created empty if missing; a value of the wrong type raises BadInput."""
    value = doc.setdefault(key, kind())
    if not isinstance(value, kind):
        raise BadInput(f"{path}: {key!r} should be a JSON {'object' if kind is dict else 'array'}")
    return value


def _text(doc: dict[str, Any], key: str, path: Path) -> str | None:
    """`doc[key]` as a string, or None if absent."""
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise BadInput(f"{path}: {key!r} should be a string")
    return value


def _strings(value: Any, what: str, path: Path) -> list[str]:
    """A JSON array of strings, or BadInput naming the file."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadInput(f"{path}: {what} should be an array of strings")
    return value


def _outbox(doc: dict[str, Any], path: Path) -> list[OutboxItem]:
    """The outbox, oldest first."""
    return [OutboxItem.from_json(raw, path) for raw in _section(doc, "outbox", list, path)]


def _acks(doc: dict[str, Any], path: Path) -> list[str]:
    """The person row ids still waiting for a `handled_at` write."""
    return _strings(doc.get("acks", []), "'acks'", path)


def _inflight(doc: dict[str, Any], path: Path) -> dict[str, Inflight]:
    """Each agent's unfinished turn."""
    turns = {}
    for agent, raw in _section(doc, "inflight", dict, path).items():
        if not isinstance(raw, dict) or not isinstance(raw.get("started_at"), str):
            raise BadInput(f"{path} has a malformed inflight turn for agent {agent}")
        ids = _strings(raw.get("ids"), "an inflight turn's ids", path)
        turns[agent] = Inflight(ids=tuple(ids), started_at=raw["started_at"])
    return turns


def _settled(doc: dict[str, Any], landed: set[str], handled: set[str], path: Path) -> None:
    """`doc` with the replies `landed` out of its outbox, their acks in `acks`, and the acks
    `handled` gone."""
    if not (landed or handled):
        return
    outbox = _outbox(doc, path)
    acks = _acks(doc, path)
    for item in outbox:
        if item.id in landed:
            acks = _union(acks, item.ack)
    doc["outbox"] = [item.to_json() for item in outbox if item.id not in landed]
    doc["acks"] = [row_id for row_id in acks if row_id not in handled]


def _union(old: list[str], new: Iterable[str]) -> list[str]:
    """`old` then whatever of `new` it lacks, in order: an ack id is kept once."""
    merged = dict.fromkeys(old)
    merged.update(dict.fromkeys(new))
    return list(merged)
