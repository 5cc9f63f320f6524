"""The engine's decisions, as pure functions: what a read of the person's rows becomes.

Given the rows read and what the engine holds (each agent's floor, the acks waiting, the rows
already taken, the turns running, the rows an earlier run left in flight, and what was looked
up), `plan` says what to do, agent by agent: a Stop ends the running turn and drops what waits
before it; a Controls request is answered on its own, never a turn; a `/command` goes at once,
even mid-turn; everything else waits while the agent's turn runs and then goes in together as
its next turn, the replay of a crashed turn first and alone, so its key is the same. A row an
earlier run answered is only acked; one it asked (in flight, or marked delivered) must be
looked up before it is asked again. No lock, no I/O: the engine holds its lock around `plan`
and what it does with it, and looks rows up between two plans, with the lock let go.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridges.engine.turns import Turn
from bridges.retry import Backoff

Row = dict[str, Any]

# Asks of one turn that may raise something unexpected (a plug-in's bug, an answer no reader
# can take) before the engine gives the turn up: the person is told, the rows are let go.
MAX_TURN_FAILURES = 3


def stamp(iso: str) -> dt.datetime:
    """A row's `created_at` as a time."""
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))


def is_stop(row: Row) -> bool:
    return row["kind"] == "control" and (row.get("meta") or {}).get("op") == "stop"


def is_command(row: Row) -> bool:
    return row["kind"] == "text" and row["body"].startswith("/")


@dataclass(frozen=True)
class Read:
    """One read of the person's unfinished rows, oldest first."""

    rows: Sequence[Row]
    whole: bool = True  # every unfinished row of every agent (not one agent's, not cut short)
    stale: frozenset[str] = frozenset()  # agents whose turn ran when the read began


@dataclass(frozen=True)
class Ledger:
    """What the engine holds when it decides (a copy: `plan` never changes it)."""

    floors: Mapping[str, dt.datetime]  # per served agent: rows at or before it aren't its
    acks: frozenset[str] = frozenset()  # rows whose handled mark waits to be written
    taken: frozenset[str] = frozenset()  # rows handed to a turn, a command, a stop or a control
    running: Mapping[str, Sequence[str]] = field(default_factory=dict)  # agent → its turn's rows
    live: frozenset[str] = frozenset()  # rows of every live turn, commands included
    inflight: Mapping[str, Sequence[str]] = field(default_factory=dict)  # an earlier run's turns
    replied: frozenset[str] = frozenset()  # rows a reply waiting in the outbox answers
    looked_up: frozenset[str] = frozenset()  # delivered rows looked up since the read
    answered: frozenset[str] = frozenset()  # ... and found answered already
    batch: int = 200  # rows in one turn at most


@dataclass(frozen=True)
class Stop:
    """The person's Stop: the running turn abandoned (its late answer never written) and the
    rows dropped, its own first, then those that waited before the Stop."""

    row: Row
    dropped: tuple[str, ...]
    abandons: bool


@dataclass
class AgentPlan:
    """What one agent's rows become, in the order it is to be done."""

    agent: str
    stops: list[Stop] = field(default_factory=list)
    controls: list[Row] = field(default_factory=list)  # answered once the lock is let go
    commands: list[Row] = field(default_factory=list)  # acked first, then asked at once
    answered: list[str] = field(default_factory=list)  # answered before a restart: only acked
    turn: list[Row] = field(default_factory=list)  # the next turn's rows, if any
    look_up: list[Row] = field(default_factory=list)  # delivered before: look for answers first


@dataclass
class Plan:
    agents: list[AgentPlan]
    taken: frozenset[str]  # the ledger's taken rows once this plan is done
    unknown: bool  # a row names an agent not served yet: learn the agents again
    # Agents whose rows in this read are left waiting (on a running turn, a look-up, a full
    # batch): they are read again once that is over, and nothing is read for the others.
    behind: frozenset[str] = frozenset()


def plan(read: Read, ledger: Ledger) -> Plan:
    """What to do with `read`, given `ledger`."""
    taken = set(ledger.taken)
    if read.whole:  # a whole view: forget rows that are done
        taken &= {r["id"] for r in read.rows} | ledger.live
    waiting: dict[str, list[Row]] = {}
    unknown = False
    for row in read.rows:
        floor = ledger.floors.get(row["agent_id"])
        if floor is None:
            unknown = True
        elif (
            row["id"] not in ledger.acks
            and row["id"] not in taken
            and stamp(row["created_at"]) > floor
        ):
            waiting.setdefault(row["agent_id"], []).append(row)
    running = {agent: list(ids) for agent, ids in ledger.running.items()}
    agents = [_plan_agent(a, rows, read, ledger, taken, running) for a, rows in waiting.items()]
    behind = {a for a, rows in waiting.items() if any(r["id"] not in taken for r in rows)}
    return Plan(agents, frozenset(taken), unknown, frozenset(behind))


def _plan_agent(
    agent: str,
    rows: list[Row],
    read: Read,
    ledger: Ledger,
    taken: set[str],
    running: dict[str, list[str]],
) -> AgentPlan:
    """One agent's part of the plan; adds what it takes to `taken` and ends its entry in
    `running` on a Stop."""
    decided = AgentPlan(agent)
    for stop in [r for r in rows if is_stop(r)]:
        when = stamp(stop["created_at"])
        dropped = [
            r["id"]
            for r in rows
            if r["kind"] != "control" and r["id"] not in taken and stamp(r["created_at"]) <= when
        ]
        ended = running.pop(agent, None)
        dropped = [*(ended or []), *dropped]
        decided.stops.append(Stop(stop, tuple(dropped), abandons=ended is not None))
        taken.update([*dropped, stop["id"]])
    rows = [r for r in rows if r["id"] not in taken]
    decided.controls = [r for r in rows if r["kind"] == "control"]
    decided.commands = [r for r in rows if r["kind"] != "control" and is_command(r)]
    taken.update(r["id"] for r in decided.controls + decided.commands)
    rows = [r for r in rows if r["kind"] != "control" and not is_command(r)]
    if not rows or agent in read.stale or agent in running:
        return decided
    inflight = set(ledger.inflight.get(agent, ()))
    asked = [r for r in rows if r["id"] in inflight] or rows  # a crashed turn, alone and whole
    # Asked before: in flight when a run ended (saved before the ask; the delivered mark is
    # written after it and may not have landed), answered by a reply still in the outbox (the
    # mark waits to ride with the ack, which waits for that reply), or marked delivered.
    delivered = [
        r
        for r in asked
        if r["id"] in inflight or r["id"] in ledger.replied or r.get("delivered_at") is not None
    ]
    decided.look_up = [r for r in delivered if r["id"] not in ledger.looked_up]
    if decided.look_up:
        return decided
    decided.answered = [r["id"] for r in delivered if r["id"] in ledger.answered]
    decided.turn = [r for r in asked if r["id"] not in ledger.answered][: ledger.batch]
    taken.update([*decided.answered, *(r["id"] for r in decided.turn)])
    return decided


# --- turns asked again --------------------------------------------------------------------------


@dataclass(eq=False)
class Running:
    """A turn handed to the plug-in, or waiting to be asked again."""

    turn: Turn
    command: bool = False
    abandoned: bool = False
    backoff: Backoff = field(default_factory=lambda: Backoff(first=2.0))
    retry_at: float | None = None  # monotonic time of the next try
    notes_upto: str | None = None  # the mention and group notes read into the turn, up to when
    failures: int = 0  # asks that raised something unexpected (not "try again later")

    def failed(self, after: float | None, now: float | None = None) -> float:
        """The turn failed: when it is asked again, the very same turn (same rows, same key),
        after `after` seconds when the agent said so, else a growing wait. Returns the wait."""
        wait = self.backoff.next(after)
        self.retry_at = (time.monotonic() if now is None else now) + wait
        return wait

    def crashed(self, now: float | None = None) -> float | None:
        """The ask raised something unexpected: the wait before the same turn is asked again,
        as after any failure, or None once it has failed so MAX_TURN_FAILURES times (give up)."""
        self.failures += 1
        if self.failures >= MAX_TURN_FAILURES:
            return None
        return self.failed(None, now)


def due(turns: Iterable[Running], now: float) -> list[Running]:
    """The failed turns whose wait is over."""
    return [r for r in turns if r.retry_at is not None and r.retry_at <= now]


def next_due(turns: Iterable[Running], now: float) -> float | None:
    """Seconds until the next failed turn is due, or None when none waits."""
    waits = [r.retry_at - now for r in turns if r.retry_at is not None]
    return max(0.0, min(waits)) if waits else None
