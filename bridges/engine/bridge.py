"""The bridge engine: every message the person sends reaches the agent once, in order, and its
answer lands once, across crashes and restarts. The agent itself is a plug-in.

Per agent, one turn at a time, and everything that waits goes in together as the next turn;
agents run in parallel, so a slow one never holds up another. The engine reads the person's
unfinished rows (`handled_at` is null), never a moving cursor. Before an agent is asked, the
turn's rows are saved as in flight; its replies go to the outbox on disk before the first
send; each reply names the rows it answers (`meta.turn`), so after a crash a row already
answered is only acked. A 409 on a resend means an earlier try landed.

What a read becomes is decided by `plan` (pure, in `bridges.engine.plan`); this module holds
the state it decides on, under one lock, and does what it says. No network call happens while
that lock is held.

Threads: the main loop discovers rows (it waits `interval` between reads, or less when woken:
the live feed and finished turns set `_wake`), a writer flushes the outbox and the acks in
order (`bridges.engine.writing`), a heartbeat keeps the agents online, and each turn runs on a
thread of a pool (`bridges.engine.asking`, which also says what happens when a turn keeps
failing). The live feed's rows are planned as it carried them; an agent is read again only
when rows of its were left waiting, or when nothing would tell of them (no feed). The loops
that talk to the relay go through `bridges.retry`; the writer, which every reply waits on,
backs off on a bug as it does on a relay it can't reach.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridges.client.host import FLOOR_MARGIN, REFRESH_MARGIN, HostSession
from bridges.client.live import LiveFeed
from bridges.client.rows import (
    AgentInfo,
    agent_row,
    mention_asker,
)
from bridges.controls.report import ControlsReporter
from bridges.controls.requests import controls_note, handle_control
from bridges.controls.store import ControlsState
from bridges.engine.asking import Asking
from bridges.engine.delivery import Pusher
from bridges.engine.endings import Endings
from bridges.engine.marks import DeliveredMarks
from bridges.engine.mentions import NoteWatch
from bridges.engine.plan import Ledger, Plan, Read, Row, Running, Stop, next_due, plan
from bridges.engine.plugin import AgentPlugin
from bridges.engine.reading import Reading
from bridges.engine.turns import Turn
from bridges.engine.workers import Workers
from bridges.engine.writing import Writing
from bridges.retry import retry_loop
from state.errors import BadInput, Refused, Unreachable, YuiError
from state.host import HostState, OutboxItem
from yuilines.gating import turn_note

Events = Callable[[dict[str, Any]], None]
MAX_ASKED_BY = 10_000  # mention copies whose answer is awaited, remembered at most

# Seconds between the host's heartbeats to the relay: they keep its agents online and are how
# an idle bridge learns it was revoked or suspended. `$YUI_HEARTBEAT` tunes it.
HEARTBEAT_EVERY = float(os.environ.get("YUI_HEARTBEAT", "45"))


@dataclass
class BridgeOptions:
    interval: float = 2.0  # seconds between reads when polling only
    live: bool = True  # a Realtime subscription wakes the bridge; reads only catch up
    catch_up: float = 20.0  # seconds between catch-up reads while the live feed is up
    catch_up_down: float = 3.0  # ... and while it is down
    heartbeat: float = HEARTBEAT_EVERY
    parallel: int = 256  # turns asked at once, across agents (each mostly waits on I/O)
    batch: int = 200  # rows in one turn at most


@dataclass
class Bridge(Reading, Asking, Writing):
    """One bridge for one paired host, driving one agent plug-in."""

    session: HostSession
    state: HostState
    plugin: AgentPlugin
    events: Events
    options: BridgeOptions = field(default_factory=BridgeOptions)

    def __post_init__(self) -> None:
        self._controls = self.plugin.controls()
        self._controls_state = ControlsState()
        # What the plug-in serves in Controls (or that it serves none), told for each agent.
        self._reporter = ControlsReporter(
            self.session, self._controls, self._controls_state, self.emit
        )
        self._pusher = Pusher(self.session)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._flush = threading.Event()
        self._lock = threading.RLock()
        self._emit_lock = threading.Lock()
        self._workers = Workers(self.options.parallel, "turn")  # the turns being asked
        self._busy: dict[str, Running] = {}  # agent id → its turn
        self._turns: set[Running] = set()  # every live turn, commands included
        self._taken: set[str] = set()  # row ids this process has handed to a turn or a stop
        self._fatal: YuiError | None = None
        self._agent_refresh = 0.0
        self._woken: set[str] = set()  # agents whose rows are to be read now
        self._carried: list[Row] = []  # the person's rows the live feed carried, not planned
        self._carried_lock = threading.Lock()
        self._behind: set[str] = set()  # agents with rows left waiting: read at the turn's end
        self._cut = False  # the last whole read was cut short: there are rows it didn't see
        self._notes = NoteWatch()  # which agents' threads may hold mention notes
        self._asked_by: dict[str, str] = {}  # a mention's copy (row id) → the agent who asked
        self._marks = DeliveredMarks()  # rows handed to agents, their ✓ not written
        self._endings = Endings()  # turns ended, waiting for the lock to be written together
        self._by = "poll"  # what started the read in progress: poll, catch-up or live
        self._feed: LiveFeed | None = None
        self._gated: dict[str, set[str]] = {}  # per agent: presets its last replies lost
        self._next_read = 0.0
        self._retry_said: dict[str, tuple[str, float]] = {}  # per loop: the reason, until when

    # --- lifecycle -----------------------------------------------------------------------

    def run(self) -> None:
        """Serve until `stop()` or a refusal; a refusal (revoked, suspended) is raised."""
        self._open()
        threads = [
            threading.Thread(target=self._writer, name="writer", daemon=True),
            threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True),
        ]
        for thread in threads:
            thread.start()
        self._reporter.start()
        if self.options.live and not self._stop.is_set():
            url = self.session.client.realtime_url
            self._feed = LiveFeed(url, self.session.current, self._heard, self._feed_state)
            self._feed.start()
        self._next_read = 0.0  # the next whole read: a catch-up, or every read polling only
        try:
            retry_loop(self._pass, stop=self._stop, wake=self._wake, on_retry=self._relay_retry)
        except Refused as exc:
            self._fail(exc)
        finally:
            self._shutdown(threads)
        if self._fatal is not None:
            raise self._fatal

    def _pass(self) -> float:
        """One turn of the main loop: ask the failed turns that are due, read what is due to
        be read; returns how long to sleep unless woken."""
        self._ask_due_retries()
        self._read()
        now = time.monotonic()
        with self._lock:
            retry_in = next_due(self._turns, now)
        wait = max(0.0, self._next_read - now)
        return min(wait, self.options.interval if retry_in is None else retry_in)

    def _relay_retry(self, exc: Exception, wait: float) -> None:
        """Say a loop waits for the relay, once per wait: a loop woken early (the live feed
        trying again) tries again without saying the same thing every few seconds."""
        reason = exc.message if isinstance(exc, YuiError) else str(exc)
        loop, now = threading.current_thread().name, time.monotonic()
        said = self._retry_said.get(loop)
        if said is not None and said[0] == reason and now < said[1]:
            return
        self._retry_said[loop] = (reason, now + wait)
        self.emit("retry", what="relay", reason=reason, wait=round(wait, 1))

    def _read_every(self) -> float:
        if self._feed is None:
            return self.options.interval
        return self.options.catch_up if self._feed.up else self.options.catch_up_down

    def _feed_state(self, up: bool, why: str) -> None:
        """Catch up at once on whatever the socket may have missed, then at the pace that
        suits the socket's state (rare while it is up, often while it is down). The feed
        closing as the bridge stops is no news."""
        if self._stop.is_set():
            return
        self.emit("live", up=up, reason=why)
        self._notes.mark()  # rows may have gone by unheard
        self._next_read = time.monotonic() + (self.options.catch_up if up else 0.0)
        if up:
            self._woken.update(self.session.agents)
        self._wake.set()

    def stop(self) -> None:
        """Stop cleanly: unfinished turns are left for the next run, then bye."""
        self._stop.set()
        self._wake.set()
        self._flush.set()

    def emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, "at": dt.datetime.now(dt.UTC).isoformat(), **fields}
        with self._emit_lock:
            self.events(record)

    def _fail(self, exc: YuiError) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = exc
                self.emit("error", reason=exc.message, fatal=True)
        self.stop()

    def _refs(self) -> list[str]:
        return [a.ref for a in self.session.agents.values() if a.ref]

    def _open(self) -> None:
        """The first session, retried while the relay is unreachable (it may be starting)."""
        self.session.offline()  # the agents of the last run, to report serving them at once
        retry_loop(self._open_session, stop=self._stop, on_retry=self._relay_retry)
        if self._stop.is_set():
            return
        self._set_floors(list(self.session.agents.values()))
        self.emit(
            "start",
            connector=self.session.connector.get("name"),
            agents=[a.handle for a in self.session.agents.values()],
        )

    def _open_session(self) -> None:
        if self.session.resume(min_left=REFRESH_MARGIN):  # a restart: one call
            sent = self._refs()
            self._learn(self.session.connect("heartbeat", serving=sent)["agents"], sent)
        else:
            sent = self._refs()
            self.session.open(serving=sent)
            if sorted(self._refs()) != sorted(sent):
                self.session.connect("heartbeat", serving=self._refs())
        if self.session.only:
            self._check_named()

    def _check_named(self) -> None:
        """`--agent` names an agent this host has: else a typo would serve nothing, quietly."""
        every = self.session.every_agent.values()
        for name in self.session.only:
            if not any(agent.named(name) for agent in every):
                listed = ", ".join(a.handle for a in every) or "none"
                self._fatal = BadInput(f"no agent {name!r} on this host (agents: {listed})")
                self.stop()

    def _set_floors(self, agents: list[AgentInfo]) -> None:
        if agents:
            self.state.setdefault_floors(
                [a.id for a in agents], self.session.relay_now - FLOOR_MARGIN
            )

    def _learn(self, agents: list[dict[str, Any]], sent: list[str]) -> None:
        """Take the host's agents as a heartbeat answered; an agent served now that the
        heartbeat (`sent`) didn't name is reported at once, not a heartbeat later: until
        then the app would show it offline, and a mention of it would say so."""
        new = self.session.set_agents(agents)
        self._set_floors(new)
        if new:
            self._reporter.wake()
        for agent in new:
            self.emit("agent", agent=agent.handle, id=agent.id)
        if sorted(self._refs()) != sorted(sent):
            self.session.connect("heartbeat", serving=self._refs())

    def _shutdown(self, threads: list[threading.Thread]) -> None:
        self._stop.set()
        self._flush.set()
        if self._feed is not None:
            self._feed.stop()
        with self._lock:
            for running in self._turns:  # left in flight: the next run asks again
                running.abandoned = True
                running.turn.cancelled.set()
        for thread in threads:
            thread.join(timeout=30)
        self._reporter.stop()
        try:
            self.state.settle()  # else the next run resends what landed (409) and acks again
        except YuiError as exc:
            self.emit("error", reason=f"saving the state: {exc.message}")
        if not self._pusher.close():
            self.emit("error", reason="some pushes were still being sent at exit")
        if self._fatal is None:
            try:
                self.session.connect("bye", serving=self._refs())
                self.emit("bye")
            except YuiError as exc:
                self.emit("error", reason=f"bye: {exc.message}")

    # --- doing what the plan says ---------------------------------------------------------

    def _carry_out(
        self, read: Read, ledger: Ledger, agents: dict[str, AgentInfo], seen: frozenset[str]
    ) -> tuple[Plan, list[tuple[AgentInfo, Row]]]:
        """Plan under the lock and do it; returns the plan and the Controls requests to answer
        once the lock is let go. An agent left with rows waiting is read again when its turn
        ends, or at once when none runs."""
        requests: list[tuple[AgentInfo, Row]] = []
        starting: list[Running] = []
        with self._lock:
            decided = plan(
                read,
                dataclasses.replace(
                    ledger,
                    taken=frozenset(self._taken),
                    running={a: r.turn.ids for a, r in self._busy.items()},
                    live=frozenset(i for r in self._turns for i in r.turn.ids),
                ),
            )
            self._taken = set(decided.taken)
            self._behind = (self._behind - seen) | decided.behind
            for part in decided.agents:
                agent = agents[part.agent]
                for stop in part.stops:
                    self._stop_turn(agent, stop)
                for command in part.commands:
                    self._command(agent, command)
                if part.answered:  # an earlier run's turn, ended: acked, no longer in flight
                    self.state.finish_turn(agent.id, (), acks=part.answered)
                    self.emit("answered", agent=agent.handle, ids=part.answered)
                    self._flush.set()
                if part.turn:
                    starting.append(Running(Turn(agent, part.turn, self.session.guide)))
                requests += [(agent, row) for row in part.controls]
            self._start(starting)
            if idle := [agent for agent in decided.behind if agent not in self._busy]:
                self._woken.update(idle)
                self._wake.set()
        return decided, requests

    def _answer_control(self, agent: AgentInfo, request: Row) -> None:
        """One Controls request: exactly one answer row naming it (`meta.for`), or just an
        ack when it was answered before a restart; the relay unreachable: read it again."""
        try:
            answer = handle_control(
                request, agent, self._controls, self.session, self._controls_state
            )
        except Unreachable:
            with self._lock:
                self._taken.discard(request["id"])
                self._woken.add(agent.id)
            return
        except Refused as exc:
            self._fail(exc)
            return
        if answer is None:
            self.state.add_acks([request["id"]])
        else:
            self.state.enqueue(OutboxItem(answer, ack=(request["id"],)))
            meta = answer["meta"]
            self.emit(
                "control",
                agent=agent.handle,
                id=request["id"],
                op=meta.get("op"),
                section=meta.get("section"),
                ok=meta["ok"],
                error=meta.get("error"),
            )
        self._flush.set()

    def _stop_turn(self, agent: AgentInfo, stop: Stop) -> None:
        """The person's Stop: waiting rows are dropped, the running turn is abandoned (its late
        answer is never written), and one control answer says so."""
        running = self._busy.pop(agent.id, None)
        if running is not None:
            running.abandoned = True
            running.turn.cancelled.set()
            self._turns.discard(running)
            self._woken.add(agent.id)  # rows sent after the Stop start a turn on a fresh read
            self._wake.set()
        stop_id = stop.row["id"]
        meta = {"op": "stop", "ok": True, "for": stop_id, "rows": len(stop.dropped)}
        answer = agent_row(self.session.user_id, agent.id, "Stopped.", meta, kind="control")
        self.state.finish_turn(agent.id, [OutboxItem(answer, ack=(*stop.dropped, stop_id))])
        self.emit("stop", agent=agent.handle, stop=stop_id, dropped=len(stop.dropped))
        self._flush.set()
        name = f"stop-{agent.handle}"  # the plug-in's part, off the lock: it may call out
        threading.Thread(target=self._plugin_stop, args=(agent,), daemon=True, name=name).start()

    def _command(self, agent: AgentInfo, row: Row) -> None:
        """A `/command` goes to the agent at once, even mid-turn, and is acked before it is
        asked, so a crash never replays it."""
        self.state.add_acks([row["id"]])
        self._flush.set()
        self.emit("command", agent=agent.handle, id=row["id"], body=row["body"])
        self._spawn(Running(Turn(agent, [row], self.session.guide), command=True))

    def _start(self, starting: list[Running]) -> None:
        """Start a pass's turns: all in flight in one edit of the state, then each asked."""
        if not starting:
            return
        for running in starting:
            turn = running.turn
            note = turn_note(self.session.app_build, sorted(self._gated.pop(turn.agent.id, ())))
            changed = controls_note(turn.agent.id, self._controls_state)
            turn.notes += [line for line in (note, changed) if line]
            for row in turn.rows:  # its answer is mirrored into the asker's thread: a note there
                asker = mention_asker(row)
                if asker is not None and len(self._asked_by) < MAX_ASKED_BY:
                    self._asked_by[row["id"]] = asker
        self.state.set_inflight({running.turn.agent.id: running.turn.ids for running in starting})
        for running in starting:
            turn = running.turn
            self._busy[turn.agent.id] = running
            self.emit("turn", agent=turn.agent.handle, turn=turn.ids, key=turn.key, by=self._by)
            self._spawn(running)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.options.heartbeat):
            try:
                sent = self._refs()
                self._learn(self.session.connect("heartbeat", serving=sent)["agents"], sent)
            except Unreachable as exc:
                self.emit(
                    "retry", what="heartbeat", reason=exc.message, wait=self.options.heartbeat
                )
            except Refused as exc:
                self._fail(exc)
                return
