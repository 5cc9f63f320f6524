"""The A2A plug-in: any agent that speaks A2A (1.0 or 0.3, JSON-RPC) as an agent in Yui.

The engine owns delivery; this plug-in maps a turn onto A2A and back:
- each Yui agent thread is one A2A context (`contextId`, kept in the state file; `/new` starts
  a fresh one), and each turn is one message whose `messageId` is `yui-<turn key>`, so a replay
  is recognisable; its parts are the channel guide (first part of a new task's first message,
  A2A having no system prompt), the turn's text, each tap again as a data part, and the
  person's photos as file parts when the card takes their type;
- the task's id is saved at its first event, so a turn asked again after a crash or a timeout
  resumes that task (`SubscribeToTask`, else `GetTask` polling) and never sends it twice;
- a task that waits for input or a sign-in is kept, and the next turn continues it;
- Stop hangs up at once and cancels the task (`CancelTask`), also one left waiting for input
  when no turn runs; an agent that won't be cancelled is said to the person.

What a failure becomes: the agent unreachable, busy or silent past `--timeout`: the engine asks
again later (resuming); a 401/403, or an answer that isn't A2A: one reply naming why, and the
turn is done; the agent's own JSON-RPC error: one reply quoting it (an internal error is asked
again).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from bridges.a2a.card import Card, fetch_card
from bridges.a2a.client import (
    INTERNAL,
    TASK_NOT_FOUND,
    UNSUPPORTED,
    A2AClient,
    AgentRefused,
    AgentUnavailable,
    HungUp,
    RpcError,
)
from bridges.a2a.reply import Files, TaskView, answer_text
from bridges.a2a.wire import INTERRUPTED, TERMINAL, Part, read
from bridges.client.rows import AgentInfo
from bridges.engine.plugin import AgentPlugin
from bridges.engine.turns import RetryTurn, Turn
from bridges.media.files import read_file
from bridges.media.replies import cache_dir
from state.errors import MediaRefused, YuiError
from state.host import HostState, Secret

log = logging.getLogger("yui.a2a")

NEW_CONTEXT = "/new"
CARD_EVERY = 600.0  # seconds before the card is read again (the last good one is kept)
POLL_FIRST = 0.5  # seconds before the first look at a task, doubling …
POLL_MAX = 30.0  # … up to this
# The thread's record is its `context`, and the `task` a `turn` went to, with its last known
# `state` (kept once it has ended, so a turn replayed after a crash finds its answer there),
# when it waits for the person `since` when, and for a turn that answered a waiting task, the
# wait it answered (`into`), to tell after a crash whether that answer reached the agent.
CLEARED: dict[str, Any] = {"task": None, "turn": None, "state": None, "since": None, "into": None}


@dataclass
class _Ask:
    """One turn being asked, as the Stop hook sees it."""

    turn: Turn
    context: str
    keep: bool = True  # record the task for resuming (a /command's one-off task isn't)
    task: str | None = None
    stopped: bool = False  # the person pressed Stop
    handled: bool = False  # … and the Stop hook (or this turn) has dealt with its task


class A2AAgent(AgentPlugin):
    """Asks the A2A agent at `url` (read from its card) each turn; the thread's A2A context
    and task live in `state`."""

    def __init__(
        self,
        url: str,
        state: HostState,
        *,
        card: Card | None = None,
        key: Secret | None = None,
        timeout: float = 300.0,
        stream: bool = True,
        session: requests.Session | None = None,
    ) -> None:
        self.url = url
        self.state = state
        self.stream = stream
        self._key = key
        self._timeout = timeout
        self._session = session or requests.Session()
        self._client = (
            A2AClient(card, key=key, timeout=timeout, session=self._session) if card else None
        )
        self._lock = threading.Lock()
        self._asks: dict[str, _Ask] = {}  # agent id → its running turn
        self._files = Files()

    # --- the contract ---------------------------------------------------------------------

    def answer(self, turn: Turn) -> list[str]:
        if turn.cancelled.is_set():
            raise RetryTurn("cancelled")
        client = self._ready()
        command = _command(turn)
        if command == NEW_CONTEXT:
            return self._new_context(turn, client)
        rec = self.state.remote(turn.agent.id)
        context = rec.get("context") or self._fresh_context(turn.agent.id)
        ask = _Ask(turn, context, keep=command is None)
        if ask.keep:
            with self._lock:
                self._asks[turn.agent.id] = ask
        try:
            view = self._ask(client, ask, rec)
        except HungUp:
            self._hung_up(client, ask)
            raise RetryTurn("cancelled") from None
        except AgentUnavailable as exc:
            raise RetryTurn(exc.reason, exc.after) from None
        except AgentRefused as exc:
            return [self._refused(turn.agent, exc)]
        except RpcError as exc:
            if exc.code == INTERNAL:
                raise RetryTurn(f"the agent's internal error: {exc.message}") from None
            log.warning("@%s: the agent refused the turn: %s", turn.agent.handle, exc)
            return [f"{turn.agent.name} couldn't answer: {exc.message} ({exc.code})."]
        finally:
            with self._lock:
                if self._asks.get(turn.agent.id) is ask:
                    del self._asks[turn.agent.id]
        self._settle(ask, view)
        text = answer_text(view, turn.agent.name, self._files)
        return [text] if text else []

    def on_stop(self, agent: AgentInfo) -> str | None:
        """Cancel the agent's task: the running turn's once it is named (that turn does it if
        it isn't yet), else one left waiting for input or left by a crash."""
        with self._lock:
            ask = self._asks.get(agent.id)
            if ask is not None:
                ask.stopped = True
                if ask.task is None:
                    return None
                ask.handled = True
                task: str | None = ask.task
            else:
                rec = self.state.remote(agent.id)
                task = rec.get("task") if rec.get("state") not in TERMINAL else None
            if task:
                self.state.update_remote(agent.id, CLEARED)
        if not task:
            return None
        try:
            client = self._ready()
        except RetryTurn as exc:
            return f"{agent.name} couldn't be stopped ({exc.reason}); it may still finish."
        return self._cancel(client, agent, task)

    # --- a turn -----------------------------------------------------------------------------

    def _ask(self, client: A2AClient, ask: _Ask, rec: dict[str, Any]) -> TaskView:
        turn = ask.turn
        if ask.keep and rec.get("turn") == turn.key and rec.get("task"):
            view = self._resume(client, ask, rec["task"], rec.get("into"))
            if view is not None:
                return view
            rec = self.state.remote(turn.agent.id)
        waiting = rec.get("task") if ask.keep and rec.get("state") in INTERRUPTED else None
        parts = self._parts(turn, client.card, new_task=waiting is None)
        dialect = client.card.dialect
        message = dialect.message(parts, "yui-" + turn.key, ask.context, waiting)
        if ask.keep:
            into = rec.get("since") if waiting else None
            with self._lock:
                ask.task = waiting
                self.state.update_remote(
                    turn.agent.id, {**CLEARED, "turn": turn.key, "task": waiting, "into": into}
                )
        view = TaskView()
        try:
            if self._streams(client):
                results = client.stream(dialect.stream, {"message": message}, turn.cancelled)
                self._read(ask, view, results)
            else:
                params = dialect.send_params(message, blocking=False)
                self._saw(ask, view, client.send(dialect.send, params, turn.cancelled))
        except RpcError as exc:
            if waiting is None or exc.code != TASK_NOT_FOUND:
                raise
            self.state.update_remote(turn.agent.id, CLEARED)  # the agent forgot it (a restart)
            raise AgentUnavailable("the task that waited is gone; asking anew", after=0.0) from None
        if view.done:
            return view
        if view.task_id is None:
            raise AgentUnavailable("the agent's answer ended before it named a task")
        return self._follow(client, ask, view.task_id, view)

    def _resume(self, client: A2AClient, ask: _Ask, task: str, into: str | None) -> TaskView | None:
        """A turn asked before: the task it started (or continued), followed to its end. None
        when it must be sent after all: the task is gone, or a continuation never landed."""
        with self._lock:
            ask.task = task
        view = self._look(client, task, ask)
        if view is None:
            log.warning("@%s: task %s is gone; sending the turn anew", ask.turn.agent.handle, task)
            self.state.update_remote(ask.turn.agent.id, CLEARED)
            return None
        if view.waiting and into is not None and view.at == into:
            self.state.update_remote(ask.turn.agent.id, {"state": view.state, "since": view.at})
            return None
        log.info("@%s: resuming task %s (%s)", ask.turn.agent.handle, task, view.state)
        return view if view.done else self._follow(client, ask, task, view)

    def _follow(self, client: A2AClient, ask: _Ask, task: str, known: TaskView) -> TaskView:
        """A task that hasn't ended, followed from what is `known` of it: on its stream again
        when the agent streams (a 1.x agent starts it with the whole task; a 0.3 one sends only
        what comes next, and keeps a resubscribed task's appended pieces twice, so the answer is
        what the stream said), else polled."""
        if self._streams(client):
            try:
                results = client.stream(
                    client.card.dialect.subscribe, {"id": task}, ask.turn.cancelled
                )
                self._read(ask, known, results)
            except RpcError as exc:
                if exc.code not in (UNSUPPORTED, TASK_NOT_FOUND):
                    raise
                log.info("@%s: can't subscribe to task %s: %s", ask.turn.agent.handle, task, exc)
            if known.done:
                return known
        return self._poll(client, ask, task)

    def _poll(self, client: A2AClient, ask: _Ask, task: str) -> TaskView:
        delay, quiet_since, last = POLL_FIRST, time.monotonic(), None
        while True:
            view = self._look(client, task, ask)
            if view is None:
                raise RpcError(TASK_NOT_FOUND, f"task {task} is gone")
            if view.done:
                return view
            now = time.monotonic()
            seen = (view.state, view.at, sum(len(p) for p in view.artifacts.values()))
            if seen != last:
                last, quiet_since = seen, now
            elif now - quiet_since > self._timeout:
                raise AgentUnavailable(f"no word from the agent for {self._timeout:g} s")
            if ask.turn.cancelled.wait(delay):
                raise HungUp
            delay = min(delay * 2, POLL_MAX)

    def _look(self, client: A2AClient, task: str, ask: _Ask) -> TaskView | None:
        """The task as the agent keeps it now, or None when it doesn't know it."""
        try:
            result = client.call(client.card.dialect.get, client.card.dialect.get_params(task))
        except RpcError as exc:
            if exc.code == TASK_NOT_FOUND:
                return None
            raise
        view = TaskView()
        self._saw(ask, view, result)
        return view

    def _read(self, ask: _Ask, view: TaskView, results: Generator[Any, None, None]) -> None:
        """Fold a stream's results into `view` until the agent has said all it will; the rest
        of the stream is hung up (a 0.3 server may never close it)."""
        try:
            for result in results:
                self._saw(ask, view, result)
                if view.done:
                    return
        finally:
            results.close()

    def _saw(self, ask: _Ask, view: TaskView, result: Any) -> None:
        """One result folded in; the task's id is kept the moment it is first named."""
        try:
            event = read(result)
        except ValueError as exc:
            raise AgentRefused(200, f"an answer that isn't A2A ({exc})") from None
        view.apply(event)
        if view.task_id is None or view.task_id == ask.task or view.message is not None:
            return
        agent = ask.turn.agent.id
        with self._lock:
            ask.task = view.task_id
            stopped = ask.stopped
            mine = self.state.remote(agent).get("context") == ask.context  # not after a /new
            if ask.keep and mine and not stopped:
                changes: dict[str, Any] = {"task": view.task_id}
                if view.context_id and view.context_id != ask.context:  # the agent's own
                    changes["context"] = ask.context = view.context_id
                self.state.update_remote(agent, changes)
        if stopped:
            raise HungUp

    def _settle(self, ask: _Ask, view: TaskView) -> None:
        """Keep the task as it is now: one that waits for the person gets their next message,
        one that has ended answers this turn again if it is replayed."""
        if not ask.keep:
            return
        agent = ask.turn.agent.id
        with self._lock:
            if self.state.remote(agent).get("context") != ask.context:  # /new meanwhile
                return
            if view.message is not None:
                self.state.update_remote(agent, CLEARED)
            else:
                since = view.at if view.waiting else None
                kept = {"task": view.task_id, "turn": ask.turn.key, "state": view.state}
                self.state.update_remote(agent, {**CLEARED, **kept, "since": since})

    def _hung_up(self, client: A2AClient, ask: _Ask) -> None:
        """After a hang-up: the person's Stop cancels the task (unless the hook did); the
        bridge stopping leaves it for the next run to resume."""
        with self._lock:
            act = ask.stopped and not ask.handled
            ask.handled = True
            if act and ask.keep:
                self.state.update_remote(ask.turn.agent.id, CLEARED)
        if not act:
            return
        agent = ask.turn.agent
        if ask.task is None:
            line: str | None = (
                f"{agent.name} may still finish what it started: it hadn't named its task "
                "when you stopped it."
            )
        else:
            line = self._cancel(client, agent, ask.task)
        if line:
            ask.turn.status(line)

    def _cancel(self, client: A2AClient, agent: AgentInfo, task: str) -> str | None:
        """Cancel `task`; a line for the person when it may go on anyway."""
        dialect = client.card.dialect
        try:
            read(client.call(dialect.cancel, {"id": task}))
            log.info("@%s: cancelled task %s", agent.handle, task)
            return None
        except RpcError as exc:
            if exc.code == TASK_NOT_FOUND:
                return None
            why = exc.message
        except (AgentUnavailable, AgentRefused) as exc:
            why = exc.reason
        except ValueError as exc:
            why = str(exc)
        try:
            ended = read(client.call(dialect.get, dialect.get_params(task))).state
        except (RpcError, AgentUnavailable, AgentRefused, ValueError):
            ended = None
        if ended in ("completed", "canceled"):
            return None
        log.warning("@%s: couldn't cancel task %s (%s)", agent.handle, task, why)
        return f"{agent.name} couldn't be stopped ({why}); it may still finish what it started."

    def _new_context(self, turn: Turn, client: A2AClient) -> list[str]:
        """`/new`: the thread starts a fresh A2A context; a task left waiting is cancelled."""
        rec = self.state.remote(turn.agent.id)
        old = rec.get("task") if rec.get("state") not in TERMINAL else None
        self._fresh_context(turn.agent.id)
        if old:
            self._cancel(client, turn.agent, old)
        return [f"A new conversation with {turn.agent.name} starts here."]

    def _fresh_context(self, agent_id: str) -> str:
        context = str(uuid.uuid4())
        self.state.update_remote(agent_id, {**CLEARED, "context": context})
        return context

    # --- what goes out --------------------------------------------------------------------

    def _parts(self, turn: Turn, card: Card, *, new_task: bool) -> list[Part]:
        """The guide (a new task's first message only), the turn's text, each tap as data,
        and the person's photos the agent takes."""
        parts: list[Part] = []
        guide = turn.guide or {}
        if new_task and guide.get("body"):
            about = {"yui": "channel_guide", "version": guide.get("version")}
            parts.append(Part("text", text=str(guide["body"]), metadata=about))
        parts.append(Part("text", text=turn.text))
        for row in turn.rows:
            meta = row.get("meta")
            if row.get("kind") != "event" or not isinstance(meta, dict) or not meta:
                continue
            if card.accepts("application/json"):
                tap = {k: meta.get(k) for k in ("id", "preset", "value")}
                parts.append(Part("data", data=tap, metadata={"yui": "event", "row": row["id"]}))
            for path in _photos(meta.get("value")):
                try:
                    media = read_file(path)
                except MediaRefused:
                    continue
                if card.accepts(media.type.mime):
                    parts.append(
                        Part("file", raw=media.data, media_type=media.type.mime, name=path.name)
                    )
        return parts

    # --- the card ---------------------------------------------------------------------------

    def _ready(self) -> A2AClient:
        """The client, its card read again every CARD_EVERY seconds (kept when that fails)."""
        client = self._client
        if client is not None and time.monotonic() - client.card.fetched < CARD_EVERY:
            return client
        try:
            card = fetch_card(self.url, self._session)
        except YuiError as exc:
            if client is None:
                raise RetryTurn(f"the agent's card: {exc.message}") from None
            log.info("keeping the agent's card read before: %s", exc.message)
            card = dataclasses.replace(client.card, fetched=time.monotonic())
        with self._lock:
            if self._client is None:
                self._client = A2AClient(
                    card, key=self._key, timeout=self._timeout, session=self._session
                )
            self._client.card = card
            return self._client

    def _streams(self, client: A2AClient) -> bool:
        return self.stream and client.card.streaming

    def _refused(self, agent: AgentInfo, exc: AgentRefused) -> str:
        """The one reply for an agent that said no at the HTTP level."""
        log.warning("@%s: the agent refused: %s %s", agent.handle, exc.status, exc.reason)
        said = f" ({exc.status}: {exc.reason})" if exc.reason else f" ({exc.status})"
        if exc.status in (401, 403):
            why = "turned the key down" if self._key else "wants a key, and none was given"
            return f"{agent.name} couldn't answer: the agent {why}{said}."
        return f"{agent.name} couldn't answer: {exc.reason or 'the agent refused'}."


def _command(turn: Turn) -> str | None:
    """The `/command` a turn is, if it is one (the engine sends each on its own)."""
    if len(turn.rows) != 1 or turn.rows[0].get("kind") != "text":
        return None
    body = str(turn.rows[0].get("body") or "").strip()
    return body.split()[0].lower() if body.startswith("/") else None


def _photos(value: Any) -> list[Path]:
    """The person's photos a tap names, as the engine downloaded them into the media cache."""
    if isinstance(value, dict):
        return [p for v in value.values() for p in _photos(v)]
    if isinstance(value, list):
        return [p for v in value for p in _photos(v)]
    if isinstance(value, str) and value.startswith("/"):
        path = Path(value)
        if path.parent == cache_dir() and path.is_file():
            return [path]
    return []
