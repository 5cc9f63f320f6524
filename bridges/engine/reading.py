"""How the bridge learns of the person's rows: a read of the relay, or the row as the live feed
carried it.

The live feed carries every row of the host's agents' threads as it is inserted: a person's
unfinished row is planned as it came, with no read; a mention row marks its thread's notes as
worth a read (`NoteWatch`). The relay is read whole every `catch_up` seconds (or every
`interval` without the feed), and one agent's rows are read when the plan left some of them
waiting (on a running turn, a look-up, a full batch: `_behind`), when a turn ends without the
feed to tell of rows that came meanwhile, or when the feed cut a row short. A carried row never
goes ahead of rows not planned yet: its agent is read instead.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bridges.client.host import HostSession
from bridges.client.live import LiveFeed
from bridges.client.rows import ROW_COLUMNS, AgentInfo, carried_row, is_mention
from bridges.engine.delivery import answered
from bridges.engine.mentions import NoteWatch
from bridges.engine.plan import Ledger, Plan, Read, Row, Running, stamp
from state.host import HostSnapshot, HostState

if TYPE_CHECKING:
    from bridges.engine.bridge import BridgeOptions

FETCH_LIMIT = 500
AGENT_REFRESH_EVERY = 10.0  # seconds between agent-list refreshes prompted by an unknown agent


class Reading:
    """The main loop's reads of a `Bridge`, which holds everything named here."""

    session: HostSession
    state: HostState
    options: BridgeOptions
    _lock: threading.RLock
    _wake: threading.Event
    _feed: LiveFeed | None
    _notes: NoteWatch
    _busy: dict[str, Running]
    _woken: set[str]  # agents whose rows are to be read now
    _carried: list[Row]  # the person's rows the live feed carried, not planned yet
    _carried_lock: threading.Lock
    _behind: set[str]  # agents with rows left waiting: read at the turn's end
    _cut: bool  # the last whole read was cut short: there are rows it didn't see
    _next_read: float
    _by: str
    _agent_refresh: float
    _read_every: Callable[[], float]
    _refs: Callable[[], list[str]]
    _learn: Callable[[list[dict[str, Any]], list[str]], None]
    _answer_control: Callable[[AgentInfo, Row], None]
    _carry_out: Callable[
        [Read, Ledger, dict[str, AgentInfo], frozenset[str]],
        tuple[Plan, list[tuple[AgentInfo, Row]]],
    ]

    def _heard(self, record: dict[str, Any]) -> None:
        """The live feed carried a row. A mention marks its thread's notes as worth a read; a
        person's unfinished row is planned as the feed carried it (no read), or, when the feed
        cut it short, read."""
        agent = record.get("agent_id")
        if is_mention(record) and agent is not None:
            self._notes.mark(str(agent))
        if record.get("sender") != "user" or record.get("handled_at") is not None:
            return
        row = carried_row(record)
        if row is not None:
            with self._carried_lock:
                self._carried.append(row)
        elif agent is not None:
            self._woken.add(str(agent))
        else:
            self._next_read = 0.0
        self._wake.set()

    def _read(self) -> None:
        """The whole read when it is due, else the agents woken, then the rows the live feed
        carried since the last pass (those a read just had are skipped as taken). What a
        failed pass took in hand waits for the next."""
        with self._carried_lock:  # heard before the read below: it reads them, or they go next
            carried, self._carried = self._carried, []
        woken: set[str] = set()
        try:
            if time.monotonic() >= self._next_read:
                self._woken.clear()
                self._poll(by="catch-up" if self._feed else "poll")
                self._next_read = time.monotonic() + self._read_every()
                carried = []  # a whole read had them
            elif self._woken:
                woken, self._woken = self._woken, set()
                self._poll(only=woken, by="live")
            if carried:
                self._plan_carried(carried)
        except Exception:
            with self._carried_lock:
                self._carried[:0] = carried
            self._woken.update(woken)
            raise

    def _poll(self, only: set[str] | None = None, by: str = "poll") -> None:
        """Read the unfinished rows of the host's agents (or only of `only`) in one request,
        and do what the plan says of them."""
        self.session.ensure()
        agents = self.session.agents
        wanted = [a for a in (only or agents) if a in agents]
        if not wanted:
            return
        snapshot = self.state.snapshot()
        floors = {a: stamp(snapshot.floors[a]) for a in agents if a in snapshot.floors}
        oldest = min((floors[a] for a in wanted if a in floors), default=None)
        params = [
            ("select", ",".join(ROW_COLUMNS)),
            ("sender", "eq.user"),
            ("handled_at", "is.null"),
            ("order", "created_at.asc,id.asc"),
            ("limit", str(FETCH_LIMIT)),
        ]
        if only is not None:
            params.append(("agent_id", f"in.({','.join(wanted)})"))
        if oldest is not None:
            params.append(("created_at", f"gt.{oldest.isoformat()}"))
        with self._lock:
            # A read begun mid-turn may miss rows sent since; the turn's end reads again.
            stale = frozenset(self._busy)
        rows = self.session.rows("yui_messages", params)
        self._by = by
        cut = len(rows) >= FETCH_LIMIT
        if cut or only is None:  # rows past a cut read: the feed's can't go ahead of them
            self._cut = cut
        read = Read(rows, whole=only is None and not cut, stale=stale)
        self._plan_read(read, frozenset() if cut else frozenset(wanted), snapshot)

    def _plan_carried(self, rows: list[Row]) -> None:
        """Plan the rows the live feed carried, as a read of them alone. None goes ahead of
        rows not planned yet: an agent with rows left waiting is read again instead, and so is
        every agent while the last whole read was cut short (there are rows it didn't see)."""
        served = self.session.agents  # another bridge's agents: theirs (as a read's `only`)
        rows = [row for row in rows if row["agent_id"] in served]
        if self._cut:
            self._woken.update(row["agent_id"] for row in rows)
            return
        with self._lock:
            rows = [row for row in rows if row["agent_id"] not in self._behind]
        if rows:
            rows.sort(key=lambda row: (stamp(row["created_at"]), row["id"]))
            self._by = "live"
            self._plan_read(Read(rows, whole=False), frozenset(), self.state.snapshot())

    def _plan_read(self, read: Read, seen: frozenset[str], snapshot: HostSnapshot) -> None:
        """Do what the plan says of `read`, whose rows of the agents `seen` are all of theirs."""
        agents = self.session.agents
        floors = {a: stamp(snapshot.floors[a]) for a in agents if a in snapshot.floors}
        ledger = Ledger(
            floors=floors,
            acks=frozenset(snapshot.acks),
            inflight={agent: turn.ids for agent, turn in snapshot.inflight.items()},
            replied=frozenset(row_id for item in snapshot.outbox for row_id in item.turn),
            batch=self.options.batch,
        )
        decided, requests = self._carry_out(read, ledger, agents, seen)
        look_up = [row for part in decided.agents for row in part.look_up]
        if look_up:  # rows an earlier run delivered: were they answered? (no lock held)
            ids = frozenset(row["id"] for row in look_up)
            looked = dataclasses.replace(
                ledger, looked_up=ids, answered=answered(self.session, self.state, look_up)
            )
            requests += self._carry_out(read, looked, agents, seen)[1]
        for agent, request in requests:  # outside the lock: a webhook may take a while
            self._answer_control(agent, request)
        if decided.unknown and time.monotonic() - self._agent_refresh > AGENT_REFRESH_EVERY:
            self._agent_refresh = time.monotonic()
            sent = self._refs()
            self._learn(self.session.connect("heartbeat", serving=sent)["agents"], sent)
