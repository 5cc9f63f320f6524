"""The Yui platform inside a Hermes gateway: the engine on a thread, Hermes as its agent.

The engine (the same as `run-webhook`'s) reads the person's rows, keeps one turn at a time per
agent and writes the answers exactly once. Each turn comes here as an `Ask`: it is handed to
Hermes as one inbound message on the gateway's event loop, and what Hermes sends back as the
turn's final answer (`send` with `notify`, in reply to that message) is collected until Hermes
reports the turn done. Everything else Hermes sends on its own (busy and interrupt notices,
"Stopped.", shutdown notices, progress) never reaches the thread. Inbound is authorized
upstream: the relay only shows a host the rows of the people it is paired with.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import threading
import uuid
from typing import Any

from gateway.config import Platform, PlatformConfig
from gateway.platforms.base import (
    BasePlatformAdapter,
    MessageEvent,
    MessageType,
    ProcessingOutcome,
    SendResult,
)
from gateway.session import build_session_key

from bridges.client.rows import MAX_BODY
from bridges.engine.bridge import BridgeOptions
from bridges.hermes import paths
from bridges.hermes.agent import Ask, HermesAgent, ProfileBridge, ProfileSession
from bridges.hermes.controls import HermesControls
from bridges.hermes.guide import hint_for
from bridges.hermes.sender import hand_over, media_line
from state.bridgelock import BridgeLock
from state.errors import YuiError
from state.host import HostState

# Under Hermes's own prefix, so the gateway's log (gateway.log) has the Yui lines too.
log = logging.getLogger("gateway.platforms.yui")
PLATFORM = "yui"
STOP_JOIN = 30.0  # seconds a stopping gateway waits for the engine's last flush and bye
STARTUP_POLL = 0.1  # seconds between looks at a gateway still starting


class YuiAdapter(BasePlatformAdapter):
    """Hermes's adapter for Yui: serves this profile's agents through the engine."""

    MAX_MESSAGE_LENGTH = MAX_BODY

    def __init__(self, config: PlatformConfig) -> None:
        # Hermes's "gateway shutting down" notice to the home channel: a stop replays the turn,
        # so there is nothing to tell the person.
        config.gateway_restart_notification = False
        super().__init__(config=config, platform=Platform(PLATFORM))
        self.profile = paths.profile_name()
        paths.use_profile_home()
        self.state = HostState(paths.state_path())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bridge: ProfileBridge | None = None
        self._thread: threading.Thread | None = None
        self._asks: dict[str, Ask] = {}  # message id → the turn (or command) Hermes answers
        self._asks_lock = threading.Lock()
        self._serving = threading.Event()

    @property
    def authorization_is_upstream(self) -> bool:
        return True

    @property
    def serving(self) -> bool:
        return self._serving.is_set()

    # --- the engine's life -------------------------------------------------------------------

    async def connect(self, *, is_reconnect: bool = False) -> bool:
        self._loop = asyncio.get_running_loop()
        self._leave_replays_to_the_engine()
        paths.adopt_pairing(self.state)
        lock = BridgeLock(self.state.path, kind="hermes gateway")
        try:
            lock.acquire()
            session = ProfileSession(self.state, None, self.profile)
        except YuiError as exc:
            lock.release()
            log.error("Yui: %s%s", exc.message, f" ({exc.hint})" if exc.hint else "")
            self._set_fatal_error("yui_not_ready", exc.message, retryable=False)
            return False
        agent = HermesAgent(self, HermesControls(paths.hermes_home()))
        self._bridge = ProfileBridge(session, self.state, agent, _log_event, BridgeOptions())
        self._serving.set()
        self._thread = threading.Thread(
            target=self._run_engine, args=(lock,), name="yui-engine", daemon=True
        )
        self._thread.start()
        self._mark_connected()
        return True

    def _leave_replays_to_the_engine(self) -> None:
        """After a crash Hermes would resume the interrupted Yui sessions on its own: a turn
        nobody asked for, whose answer would go nowhere. The engine asks the interrupted turn
        again instead, so those sessions are taken off Hermes's list before it resumes any."""
        store = getattr(getattr(self, "gateway_runner", None), "session_store", None)
        if store is None:
            return
        for entry in store.list_sessions():
            platform = getattr(getattr(entry, "origin", None), "platform", None)
            if entry.resume_pending and getattr(platform, "value", platform) == PLATFORM:
                store.clear_resume_pending(entry.session_key)

    def _run_engine(self, lock: BridgeLock) -> None:
        assert self._bridge is not None
        try:
            self._bridge.run()
        except YuiError as exc:  # revoked or suspended: for good, until paired again
            log.error("Yui: %s", exc.message)
            self._set_fatal_error("yui_refused", exc.message, retryable=False)
        finally:
            self._serving.clear()
            lock.release()

    async def disconnect(self) -> None:
        self._serving.clear()
        if self._bridge is not None:
            self._bridge.stop()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, STOP_JOIN)
        self._mark_disconnected()

    # --- turns in ----------------------------------------------------------------------------

    def ask(self, ask: Ask) -> None:
        """Hand a turn to Hermes (called on the turn's thread)."""
        assert self._loop is not None
        agent = ask.turn.agent
        with self._asks_lock:
            self._asks[ask.message_id] = ask
        if ask.turn.guide:
            hint_for(ask.turn.guide)  # the platform's hint follows the relay's current guide
        photos = ask.photos
        source = self.build_source(
            chat_id=agent.id,
            chat_name=agent.name,
            chat_type="dm",
            user_id=self._bridge.session.user_id if self._bridge else None,
            user_name="person",
        )
        event = MessageEvent(
            text=ask.turn.text,
            message_type=MessageType.PHOTO if photos else MessageType.TEXT,
            source=source,
            message_id=ask.message_id,
            media_urls=photos,
            media_types=["image/jpeg"] * len(photos),
            timestamp=dt.datetime.now(dt.UTC),
        )
        # A command goes in at once, even mid-turn (Hermes answers /new, /status… itself).
        handing = self.handle_message(event) if ask.command else self._dispatch(event, ask)
        asyncio.run_coroutine_threadsafe(handing, self._loop)

    async def _dispatch(self, event: MessageEvent, ask: Ask) -> None:
        """Hand a message in once Hermes has finished starting: while it restores the sessions
        a restart interrupted, it queues what comes in and reports it done with no answer."""
        runner = getattr(self, "gateway_runner", None)
        key = build_session_key(event.source)
        # Also while Hermes still works on the chat on its own (resuming a session a crash
        # interrupted): a message then would be merged into that work instead of being a turn.
        while (
            getattr(runner, "_startup_restore_in_progress", False) or key in self._active_sessions
        ):
            await asyncio.sleep(STARTUP_POLL)
        if not ask.cancelled:
            await self.handle_message(event)

    def release(self, ask: Ask) -> None:
        """The turn is over: what Hermes still sends for it goes nowhere."""
        with self._asks_lock:
            self._asks.pop(ask.message_id, None)

    def interrupt(self, agent_id: str) -> None:
        """The person's Stop: Hermes abandons the turn (its own /stop ends the model request),
        and nothing it still sends for it reaches the thread."""
        with self._asks_lock:
            asks = [a for a in self._asks.values() if a.turn.agent.id == agent_id]
            for ask in asks:
                del self._asks[ask.message_id]
        for ask in asks:
            ask.cancelled = True
            ask.done.set()
        if not [a for a in asks if not a.command] or self._loop is None:
            return
        source = self.build_source(chat_id=agent_id, chat_type="dm", user_name="person")
        stop = MessageEvent(text="/stop", source=source, message_id=uuid.uuid4().hex)
        asyncio.run_coroutine_threadsafe(self.handle_message(stop), self._loop)

    async def on_processing_complete(self, event: MessageEvent, outcome: ProcessingOutcome) -> None:
        ask = self._ask_for(event.source.chat_id, event.message_id) if event.message_id else None
        if ask is not None:
            ask.outcome = outcome.value
            ask.done.set()

    def _ask_for(self, chat_id: str, message_id: str | None) -> Ask | None:
        """The live ask a message of Hermes's belongs to: by the message it answers, else
        the chat's turn (a picture Hermes attaches to its answer names no message)."""
        with self._asks_lock:
            if message_id is not None:
                ask = self._asks.get(message_id)
            else:
                chat = [a for a in self._asks.values() if a.turn.agent.id == str(chat_id)]
                ask = next((a for a in chat if not a.command), None)
        if ask is None or ask.cancelled or ask.turn.agent.id != str(chat_id):
            return None
        return ask

    # --- answers out -------------------------------------------------------------------------

    async def send(
        self,
        chat_id: str,
        content: str,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """A turn's final answer is kept for the engine to write, and a cron job's delivery
        (the gateway's own scheduler) is a hand-over; anything else is Hermes talking on its
        own, and stays out of the thread."""
        if (metadata or {}).get("job_id"):
            try:
                handed = await asyncio.to_thread(hand_over, content, chat_id)
            except YuiError as exc:
                return SendResult(success=False, error=exc.message)
            return SendResult(success=True, message_id=handed["id"])
        ask = self._ask_for(chat_id, reply_to) if reply_to else None
        if ask is not None and (metadata or {}).get("notify"):
            ask.replies.append(content)
            if ask.command:  # a command Hermes answers mid-turn reports no end: this is it
                ask.outcome = ProcessingOutcome.SUCCESS.value
                ask.done.set()
        else:
            log.info("Yui: kept out of the thread: %.80r", content)
        return SendResult(success=True, message_id=uuid.uuid4().hex)

    async def send_image_file(
        self,
        chat_id: str,
        image_path: str,
        caption: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SendResult:
        return self._media(chat_id, image_path, caption)

    async def send_video(
        self,
        chat_id: str,
        video_path: str,
        caption: str | None = None,
        reply_to: str | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SendResult:
        return self._media(chat_id, video_path, caption)

    async def send_multiple_images(
        self,
        chat_id: str,
        images: list[tuple[str, str]],
        metadata: dict[str, Any] | None = None,
        human_delay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        for url, caption in images:
            self._media(chat_id, url.removeprefix("file://"), caption or None)

    def _media(self, chat_id: str, source: str, caption: str | None) -> SendResult:
        """A picture or video Hermes attaches to its answer: a media line in the answer's
        message, which the engine stores in the relay before it writes the reply, as for every
        bridge."""
        ask = self._ask_for(chat_id, None)
        if ask is None:
            return SendResult(success=False, error="no Yui turn to attach it to")
        line = media_line(source, caption)
        if ask.replies:  # the words it goes with and the picture: one message
            ask.replies[-1] = f"{ask.replies[-1]}\n\n{line}"
        else:
            ask.replies.append(line)
        return SendResult(success=True, message_id=uuid.uuid4().hex)

    async def send_slash_confirm(
        self,
        chat_id: str,
        title: str,
        message: str,
        session_key: str,
        confirm_id: str,
        metadata: dict[str, Any] | None = None,
    ) -> SendResult:
        """Hermes asks to confirm `/new` and the like; in Yui the person's command is the
        decision (the app has no buttons for Hermes's prompt): done once, and what it did is
        the command's answer."""
        from tools import slash_confirm

        done = await slash_confirm.resolve(session_key, confirm_id, "once")
        with self._asks_lock:
            ask = next(
                (a for a in self._asks.values() if a.command and a.turn.agent.id == chat_id),
                None,
            )
        if ask is not None and done:
            ask.replies.append(done)
            ask.outcome = ProcessingOutcome.SUCCESS.value
            ask.done.set()
        return SendResult(success=True, message_id=uuid.uuid4().hex)

    async def send_typing(self, chat_id: str, metadata: Any = None) -> None:
        return None

    async def get_chat_info(self, chat_id: str) -> dict[str, Any]:
        return {"name": chat_id, "type": "dm"}


def _log_event(event: dict[str, Any]) -> None:
    """The engine's events, one JSON line each in the gateway's log."""
    log.info("Yui: %s", json.dumps(event, default=str))
