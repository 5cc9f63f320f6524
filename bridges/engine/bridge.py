"""The bridge engine: every message the person sends reaches the agent once, in order, and its
answer lands once, across crashes and restarts. The agent itself is a plug-in.

Per agent, one turn at a time, and everything that waits goes in together as the next turn;
agents run in parallel, so a slow one never holds up another. The engine reads the person's
unfinished rows (`handled_at` is null), never a moving cursor. Before an agent is asked, the
turn's rows are saved as in flight; its replies go to the outbox on disk before the first
send; each reply names the rows it answers (`meta.turn`), so after a crash a row already
answered is only acked. A 409 on a resend means an earlier try landed.

The engine is one state machine, kept in one module on purpose: its lock guards the running
turns, the rows taken and the stops together, and splitting it would scatter that discipline.

Threads: the main loop discovers rows (it waits `interval` between reads, or less when woken:
the live feed and finished turns call `wake()`), a writer flushes the outbox and the acks in
order, a heartbeat keeps the agents online, and each turn runs on a thread of its own.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridges.client.host import FLOOR_MARGIN, REFRESH_MARGIN, HostSession
from bridges.client.live import LiveFeed, feed_url
from bridges.client.relay import next_backoff
from bridges.controls.report import ControlsReporter
from bridges.controls.requests import ControlsState, controls_note, handle_control
from bridges.engine.delivery import Pusher, write_acks, write_outbox
from bridges.engine.mentions import notes_for
from bridges.engine.replies import agent_row, replies_for
from bridges.engine.turns import MAX_BODY, AgentInfo, AgentPlugin, RetryTurn, Turn
from bridges.media.replies import localize
from state.errors import Refused, Unreachable, YuiError
from state.host import HostState, Inflight, OutboxItem
from yuilines.gating import turn_note

log = logging.getLogger("yui.bridge")

Events = Callable[[dict[str, Any]], None]
ROW_COLUMNS = "id,agent_id,user_id,thread_id,body,kind,meta,created_at,delivered_at"
FETCH_LIMIT = 500
AGENT_REFRESH_EVERY = 10.0  # seconds between agent-list refreshes prompted by an unknown agent


@dataclass(eq=False)
class Running:
    """A turn handed to the plug-in, or waiting to be asked again."""

    turn: Turn
    command: bool = False
    abandoned: bool = False
    backoff: float = 0.0
    retry_at: float | None = None  # monotonic time of the next try
    notes_upto: str | None = None  # the mention and group notes read into the turn, up to when


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


def _parse(iso: str) -> dt.datetime:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _is_stop(row: dict[str, Any]) -> bool:
    return row["kind"] == "control" and (row.get("meta") or {}).get("op") == "stop"


def _is_command(row: dict[str, Any]) -> bool:
    return row["kind"] == "text" and row["body"].startswith("/")


@dataclass
class Bridge:
    """One bridge for one paired host, driving one agent plug-in."""

    session: HostSession
    state: HostState
    plugin: AgentPlugin
    events: Events
    options: BridgeOptions = field(default_factory=BridgeOptions)

    def __post_init__(self) -> None:
        self._controls = getattr(self.plugin, "controls", None)  # what it serves of Controls
        self._controls_state = ControlsState()
        # What the plug-in serves in Controls (or that it serves none), told for each agent.
        self._reporter = ControlsReporter(
            self.session, self._controls, self._controls_state, self.emit
        )
        self._pusher = Pusher(self.session)
        bind = getattr(self.plugin, "bind", None)
        if bind is not None:  # a plug-in that reads the relay itself uses the bridge's session
            bind(self.session)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._flush = threading.Event()
        self._lock = threading.RLock()
        self._emit_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.options.parallel)
        self._busy: dict[str, Running] = {}  # agent id → its turn
        self._turns: set[Running] = set()  # every live turn, commands included
        self._taken: set[str] = set()  # row ids this process has handed to a turn or a stop
        self._fatal: YuiError | None = None
        self._agent_refresh = 0.0
        self._woken: set[str] = set()  # agents the live feed says have news
        self._by = "poll"  # what started the read in progress: poll, catch-up or live
        self._feed: LiveFeed | None = None
        self._gated: dict[str, set[str]] = {}  # per agent: presets its last replies lost
        self._next_read = 0.0

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
            url = feed_url(self.session.client.url, self.session.client.apikey)
            self._feed = LiveFeed(url, self.session.current, self._heard, self._feed_state)
            self._feed.start()
        backoff = 0.0
        self._next_read = 0.0  # the next whole read: a catch-up, or every read polling only
        try:
            while not self._stop.is_set():
                try:
                    if time.monotonic() >= self._next_read:
                        self._woken.clear()
                        self._poll(by="catch-up" if self._feed else "poll")
                        self._next_read = time.monotonic() + self._read_every()
                    elif self._woken:
                        woken, self._woken = self._woken, set()
                        self._poll(only=woken, by="live")
                    backoff = 0.0
                    wait = max(0.0, self._next_read - time.monotonic())
                except Unreachable as exc:
                    backoff = next_backoff(backoff)
                    wait = backoff + random.random()
                    self.emit("retry", what="relay", reason=exc.message, wait=round(wait, 1))
                except Refused as exc:
                    self._fail(exc)
                    break
                self._ask_due_retries()
                self._wake.wait(min(wait, self._next_retry_in()))
                self._wake.clear()
        finally:
            self._shutdown(threads)
        if self._fatal is not None:
            raise self._fatal

    def _read_every(self) -> float:
        if self._feed is None:
            return self.options.interval
        return self.options.catch_up if self._feed.up else self.options.catch_up_down

    def _heard(self, record: dict[str, Any]) -> None:
        """The live feed saw a person's row: read that agent's rows now."""
        self._woken.add(str(record.get("agent_id")))
        self._wake.set()

    def _feed_state(self, up: bool, why: str) -> None:
        """Catch up at once on whatever the socket may have missed, then at the pace that
        suits the socket's state (rare while it is up, often while it is down)."""
        self.emit("live", up=up, reason=why)
        self._next_read = time.monotonic() + (self.options.catch_up if up else 0.0)
        if up:
            self._woken.update(self.session.agents)
        self._wake.set()

    def stop(self) -> None:
        """Stop cleanly: unfinished turns are left for the next run, then bye."""
        self._stop.set()
        self._wake.set()
        self._flush.set()

    def wake(self) -> None:
        """Read now instead of at the next interval (the live feed's hook)."""
        self._wake.set()

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
        backoff = 0.0
        self.session.offline()  # the agents of the last run, to report serving them at once
        while True:
            try:
                if self.session.resume(min_left=REFRESH_MARGIN):  # a restart: one call
                    self._learn(self.session.connect("heartbeat", serving=self._refs())["agents"])
                else:
                    sent = self._refs()
                    self.session.open(serving=sent)
                    if sorted(self._refs()) != sorted(sent):
                        self.session.connect("heartbeat", serving=self._refs())
                break
            except Unreachable as exc:
                backoff = next_backoff(backoff)
                self.emit("retry", what="relay", reason=exc.message, wait=backoff)
                if self._stop.wait(backoff + random.random()):
                    return
        self._set_floors(list(self.session.agents.values()))
        self.emit(
            "start",
            connector=self.session.connector.get("name"),
            agents=[a.handle for a in self.session.agents.values()],
        )

    def _set_floors(self, agents: list[AgentInfo]) -> None:
        if agents:
            self.state.setdefault_floors(
                [a.id for a in agents], self.session.relay_now - FLOOR_MARGIN
            )

    def _learn(self, agents: list[dict[str, Any]]) -> None:
        new = self.session.set_agents(agents)
        self._set_floors(new)
        if new:
            self._reporter.wake()
        for agent in new:
            self.emit("agent", agent=agent.handle, id=agent.id)

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
        self._pusher.close()
        if self._fatal is None:
            try:
                self.session.connect("bye", serving=self._refs())
                self.emit("bye")
            except YuiError as exc:
                self.emit("error", reason=f"bye: {exc.message}")

    # --- discovery ---------------------------------------------------------------------

    def _poll(self, only: set[str] | None = None, by: str = "poll") -> None:
        """Read the unfinished rows of the host's agents (or only of `only`) in one request,
        and act on them."""
        self.session.ensure()
        agents = self.session.agents
        wanted = [a for a in (only or agents) if a in agents]
        if not wanted:
            return
        snapshot = self.state.snapshot()
        floors = {a: _parse(snapshot.floors[a]) for a in agents if a in snapshot.floors}
        oldest = min((floors[a] for a in wanted if a in floors), default=None)
        params = [
            ("select", ROW_COLUMNS),
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
            busy_when_read = set(self._busy)
        rows = self.session.rows("yui_messages", params)
        acked = set(snapshot.acks)
        self._by = by
        with self._lock:
            if only is None and len(rows) < FETCH_LIMIT:  # a whole view: forget finished rows
                live = {r["id"] for r in rows} | {i for t in self._turns for i in t.turn.ids}
                self._taken &= live
            by_agent: dict[str, list[dict[str, Any]]] = {}
            unknown = False
            for row in rows:
                agent_id = row["agent_id"]
                if agent_id not in agents or agent_id not in floors:
                    unknown = True
                    continue
                if row["id"] in acked or row["id"] in self._taken:
                    continue
                if _parse(row["created_at"]) <= floors[agent_id]:
                    continue
                by_agent.setdefault(agent_id, []).append(row)
            requests = []
            for agent_id, waiting in by_agent.items():
                inflight = snapshot.inflight.get(agent_id)
                agent = agents[agent_id]
                stale = agent_id in busy_when_read
                requests += [
                    (agent, r) for r in self._consider(agent, waiting, inflight, stale=stale)
                ]
        for agent, request in requests:  # outside the lock: a webhook may take a while
            self._answer_control(agent, request)
        if unknown and time.monotonic() - self._agent_refresh > AGENT_REFRESH_EVERY:
            self._agent_refresh = time.monotonic()
            self._learn(self.session.connect("heartbeat", serving=self._refs())["agents"])

    def _consider(
        self,
        agent: AgentInfo,
        rows: list[dict[str, Any]],
        inflight: Inflight | None,
        *,
        stale: bool = False,
    ) -> list[dict[str, Any]]:
        """Decide what an agent's waiting rows become: a stop, commands, or its next turn
        (not from a `stale` read, begun while its last turn ran). Returns the Controls
        requests among them, to answer once the lock is let go."""
        for stop in [r for r in rows if _is_stop(r)]:
            self._stop_turn(agent, stop, rows)
        rows = [r for r in rows if r["id"] not in self._taken]
        controls = [r for r in rows if r["kind"] == "control"]  # never a turn
        self._taken.update(r["id"] for r in controls)
        rows = [r for r in rows if r["kind"] != "control"]
        for command in [r for r in rows if _is_command(r)]:
            self._command(agent, command)
        rows = [r for r in rows if not _is_command(r)]
        if not rows or stale or agent.id in self._busy:
            return controls
        replay = [r for r in rows if inflight and r["id"] in inflight.ids]
        rows = self._drop_answered(agent, replay or rows)
        if rows:
            self._start(Running(Turn(agent, rows[: self.options.batch], self.session.guide)))
        return controls

    def _answer_control(self, agent: AgentInfo, request: dict[str, Any]) -> None:
        """One Controls request: exactly one answer row naming it (`meta.for`), or just an
        ack when it was answered before a restart; the relay unreachable: read it again."""
        try:
            answer = handle_control(
                request, agent, self._controls, self.session, self._controls_state
            )
        except Unreachable:
            with self._lock:
                self._taken.discard(request["id"])
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

    def _drop_answered(self, agent: AgentInfo, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows an earlier run already answered (the reply waits in the outbox or has landed)
        are only acked, never asked again."""
        answered = []
        for row in rows:
            if row.get("delivered_at") is None:
                continue
            if self.state.answered_in_outbox(row["id"]) or self.session.rows(
                "yui_messages",
                [
                    ("select", "id"),
                    ("agent_id", f"eq.{agent.id}"),
                    ("sender", "eq.agent"),
                    ("meta->turn", f'cs.["{row["id"]}"]'),
                    ("limit", "1"),
                ],
            ):
                answered.append(row["id"])
        if answered:
            self._taken.update(answered)
            self.state.add_acks(answered)
            self.emit("answered", agent=agent.handle, ids=answered)
            self._flush.set()
        return [r for r in rows if r["id"] not in answered]

    def _stop_turn(
        self, agent: AgentInfo, stop: dict[str, Any], rows: list[dict[str, Any]]
    ) -> None:
        """The person's Stop: waiting rows are dropped, the running turn is abandoned (its late
        answer is never written), and one control answer says so."""
        when = _parse(stop["created_at"])
        dropped = [
            r["id"]
            for r in rows
            if r["kind"] != "control"
            and r["id"] not in self._taken
            and _parse(r["created_at"]) <= when
        ]
        running = self._busy.pop(agent.id, None)
        if running is not None:
            running.abandoned = True
            running.turn.cancelled.set()
            self._turns.discard(running)
            dropped = running.turn.ids + dropped
            self._woken.add(agent.id)  # rows sent after the Stop start a turn on a fresh read
            self._wake.set()
        self._taken.update([*dropped, stop["id"]])
        meta = {"op": "stop", "ok": True, "for": stop["id"], "rows": len(dropped)}
        answer = agent_row(self.session.user_id, agent.id, "Stopped.", meta, kind="control")
        self.state.finish_turn(agent.id, [OutboxItem(answer, ack=(*dropped, stop["id"]))])
        self.emit("stop", agent=agent.handle, stop=stop["id"], dropped=len(dropped))
        self._flush.set()

    def _command(self, agent: AgentInfo, row: dict[str, Any]) -> None:
        """A `/command` goes to the agent at once, even mid-turn, and is acked before it is
        asked, so a crash never replays it."""
        self._taken.add(row["id"])
        self.state.add_acks([row["id"]])
        self._flush.set()
        self.emit("command", agent=agent.handle, id=row["id"], body=row["body"])
        self._spawn(Running(Turn(agent, [row], self.session.guide), command=True))

    def _start(self, running: Running) -> None:
        turn = running.turn
        note = turn_note(self.session.app_build, sorted(self._gated.pop(turn.agent.id, ())))
        changed = controls_note(turn.agent.id, self._controls_state)
        turn.notes += [line for line in (note, changed) if line]
        self.state.set_inflight(turn.agent.id, turn.ids)
        self._busy[turn.agent.id] = running
        self._taken.update(turn.ids)
        self.emit("turn", agent=turn.agent.handle, turn=turn.ids, key=turn.key, by=self._by)
        self._spawn(running)

    def _status_line(self, agent: AgentInfo, text: str) -> None:
        """A quiet line from the bridge in the agent's thread (no turn, marked as status)."""
        row = agent_row(self.session.user_id, agent.id, text, {"status": True})
        self.state.enqueue(OutboxItem(row))
        self.emit("status", agent=agent.handle, id=row["id"], body=row["body"])
        self._flush.set()

    def _spawn(self, running: Running) -> None:
        agent = running.turn.agent
        running.turn.status = lambda text: self._status_line(agent, text)
        with self._lock:
            self._turns.add(running)
        threading.Thread(
            target=self._ask, args=(running,), daemon=True, name=f"turn-{running.turn.agent.handle}"
        ).start()

    # --- asking the agent --------------------------------------------------------------

    def _ask(self, running: Running) -> None:
        with self._slots:
            if running.abandoned:
                return
            try:
                self.session.mark(running.turn.ids, "delivered_at")
            except Unreachable as exc:
                log.info("couldn't mark delivered now: %s", exc.message)
            except Refused as exc:
                self._fail(exc)
                return
            try:
                localize(self.session, running.turn)  # the person's photos, as local files
                self._read_notes(running)
            except Unreachable as exc:
                self._retry_later(running, exc.message, None)
                return
            except Refused as exc:
                self._fail(exc)
                return
            try:
                replies = self.plugin.answer(running.turn)
            except RetryTurn as retry:
                self._retry_later(running, retry.reason, retry.after)
                return
            except Exception as exc:  # a plug-in's bug must not kill the bridge
                log.exception("the agent plug-in failed")
                self._retry_later(running, f"{type(exc).__name__}: {exc}", None)
                return
            self._finish(running, replies)

    def _read_notes(self, running: Running) -> None:
        """Before a turn, the mentions and group talk in the agent's thread since its last
        turn, one `[yui] note: …` line each, first (a replayed turn reads the same window)."""
        turn = running.turn
        if running.command or running.notes_upto is not None:
            return
        upto = max(turn.rows, key=lambda r: _parse(r["created_at"]))["created_at"]
        since = self.state.note_floor(turn.agent.id) or self.state.snapshot().floors.get(
            turn.agent.id
        )
        turn.notes[:0] = notes_for(self.session, turn.agent.id, since, upto, turn.rows)
        running.notes_upto = upto

    def _retry_later(self, running: Running, reason: str, after: float | None) -> None:
        with self._lock:
            if running.abandoned:
                return
            running.backoff = next_backoff(running.backoff, first=2.0)
            wait = after if after is not None else running.backoff + random.random()
            running.retry_at = time.monotonic() + wait
        self.emit(
            "retry",
            what="agent",
            agent=running.turn.agent.handle,
            turn=running.turn.ids,
            reason=reason,
            wait=round(wait, 1),
        )
        self._wake.set()

    def _next_retry_in(self) -> float:
        with self._lock:
            due = [r.retry_at for r in self._turns if r.retry_at is not None]
        return max(0.0, min(due) - time.monotonic()) if due else self.options.interval

    def _ask_due_retries(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = [r for r in self._turns if r.retry_at is not None and r.retry_at <= now]
            for running in due:
                running.retry_at = None
        for running in due:
            threading.Thread(
                target=self._ask,
                args=(running,),
                daemon=True,
                name=f"turn-{running.turn.agent.handle}",
            ).start()

    def _finish(self, running: Running, replies: list[str]) -> None:
        """The agent answered: its replies go to the outbox, or its rows straight to the acks."""
        turn = running.turn
        done = replies_for(
            turn, replies, self.session.user_id, self.session.app_build, ack=not running.command
        )
        items = done.items
        for length in done.cut:
            self.emit(
                "error",
                agent=turn.agent.handle,
                reason=f"a reply of {length} characters was cut to {MAX_BODY}",
            )
        if done.gated:  # the agent's next turn is told what the phone can't draw yet
            self._gated.setdefault(turn.agent.id, set()).update(done.gated)
            self.emit("gated", agent=turn.agent.handle, presets=sorted(done.gated))
        with self._lock:
            self._turns.discard(running)
            if running.abandoned:
                self.emit("discarded", agent=turn.agent.handle, turn=turn.ids)
                return
            if running.command:
                self.state.enqueue(*items)
            else:
                acks = () if items else turn.ids
                self.state.finish_turn(turn.agent.id, items, acks, note_floor=running.notes_upto)
                self._busy.pop(turn.agent.id, None)
        self.emit(
            "answer", agent=turn.agent.handle, turn=turn.ids, replies=[item.id for item in items]
        )
        self._flush.set()
        self._woken.add(turn.agent.id)  # rows that came during the turn wait for this read
        self._wake.set()

    # --- writing -----------------------------------------------------------------------

    def _writer(self) -> None:
        """Write the outbox oldest first (a reply that can't go holds the ones behind it),
        then the acks; back off while the relay can't be reached."""
        backoff = 0.0
        while True:
            stopping = self._stop.is_set()
            try:
                write_outbox(self.session, self.state, self.emit, notify=self._pusher.push)
                write_acks(self.session, self.state, self.emit)
                backoff = 0.0
            except Unreachable as exc:
                if stopping:
                    return
                backoff = next_backoff(backoff)
                wait = backoff + random.random()
                self.emit("retry", what="relay", reason=exc.message, wait=round(wait, 1))
                self._stop.wait(wait)
                continue
            except Refused as exc:
                self._fail(exc)
                return
            if stopping:
                return
            self._flush.wait(5.0)
            self._flush.clear()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.options.heartbeat):
            try:
                self._learn(self.session.connect("heartbeat", serving=self._refs())["agents"])
            except Unreachable as exc:
                self.emit(
                    "retry", what="heartbeat", reason=exc.message, wait=self.options.heartbeat
                )
            except Refused as exc:
                self._fail(exc)
                return
