"""The model plug-in: any OpenAI-compatible model server as an agent in Yui.

The engine owns delivery (in-flight turns, the outbox, retries, Stop); this plug-in turns a
turn into the model's answer. Each turn, the chat is built afresh from the agent's own rows
(`history`), the model is asked (`client`) and its text cleaned (`clean`).

What the person sees when the model can't answer:
- the server can't be reached or is busy: nothing at first, the engine asks again with growing
  waits (after `Retry-After` when given); once it has been unreachable `note_after` seconds
  (90) for a turn, one quiet status line says so, and the turn is answered once it is back;
- the server says no (unknown model, bad key, a context it refuses): one short reply naming
  why, and the turn is done, rather than asking forever;
- the model answers nothing, twice: one status line, and the turn ends without a reply.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridges.client.host import HostSession
from bridges.controls.provider import ControlsProvider
from bridges.engine.plugin import AgentPlugin
from bridges.engine.turns import RetryTurn, Turn
from bridges.model.clean import ThinkingFilter, clean, has_screen
from bridges.model.client import (
    Cancelled,
    ChatClient,
    Completion,
    ModelRefused,
    ModelUnavailable,
)
from bridges.model.controls import ModelControls
from bridges.model.history import (
    DEFAULT_RESERVE,
    Chat,
    build_chat,
    fits_full_guide,
    system_prompt,
)
from state.errors import YuiError

log = logging.getLogger("yui.model")

HISTORY_ROWS = 200  # the newest rows read before a turn; the window usually keeps fewer
HISTORY_COLUMNS = "id,sender,kind,body,meta,created_at"
UNREACHABLE = "Can't reach the model right now. Your message waits and is answered once it's back."


@dataclass(frozen=True)
class ModelOptions:
    context: int = 4096  # the model's window, in tokens
    max_tokens: int | None = None  # sent to the server only when set
    temperature: float | None = None
    system: str = ""  # the host's own words, after the guide
    system_file: Path | None = None  # where they come from: Controls edits it as the personality
    server: str | None = None  # the kind of server (ollama, openai, …), for Controls' words
    note_after: float = 90.0  # seconds unreachable before the person is told

    @property
    def reserve(self) -> int:
        """Tokens of the window kept free for the answer."""
        return self.max_tokens or DEFAULT_RESERVE


class ModelAgent(AgentPlugin):
    """Answers each turn with one chat completion; the thread's history is read with the
    bridge's own `session` (as the host, on its token). With `controls`, the person may read
    and edit the personality (`options.system_file`) and read the model in words."""

    def __init__(
        self,
        client: ChatClient,
        options: ModelOptions,
        session: HostSession,
        *,
        controls: bool = False,
    ) -> None:
        self.client = client
        self.options = options
        self.session = session
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[Turn, threading.Timer]] = {}  # turn key → its note timer
        self._controls = (
            ModelControls(self, options.system_file, options.server) if controls else None
        )

    def controls(self) -> ControlsProvider | None:
        return self._controls

    def answer(self, turn: Turn) -> list[str]:
        if turn.cancelled.is_set():
            raise RetryTurn("cancelled")
        chat = self.chat(turn)
        try:
            completion, text = self._ask(chat, turn)
        except Cancelled:
            raise RetryTurn("cancelled") from None
        except ModelUnavailable as exc:
            self._unreachable(turn)
            raise RetryTurn(exc.reason, exc.after) from None
        except ModelRefused as exc:
            self._reached(turn)
            log.warning("@%s: %s; said so to the person, turn done", turn.agent.handle, exc.reason)
            return [f"{turn.agent.name} couldn't answer: {exc.reason}."]
        self._reached(turn)
        if text:
            return [text]
        finish = (
            f" (it stopped: {completion.finish})" if completion.finish not in (None, "stop") else ""
        )
        log.warning("@%s: the model answered nothing, twice%s", turn.agent.handle, finish)
        turn.status(f"The model gave no answer{finish}.")
        return []

    def chat(self, turn: Turn) -> Chat:
        """The messages for this turn: guide and system text, the thread that fits, the turn."""
        guide = (turn.guide or {}).get("body")
        system = system_prompt(guide, self.options.system, self.options.context)
        chat = build_chat(
            system,
            self._history(turn),
            turn.rows,
            context=self.options.context,
            reserve=self.options.reserve,
            notes=turn.notes,
        )
        if chat.over:
            log.warning(
                "@%s: the guide and this turn alone are over --context %d; sent anyway",
                turn.agent.handle,
                self.options.context,
            )
        elif chat.dropped:
            log.info("@%s: %d older rows left out of the window", turn.agent.handle, chat.dropped)
        return chat

    def _history(self, turn: Turn) -> list[dict[str, Any]]:
        """The agent's rows before the turn, both senders, oldest first."""
        try:
            rows = self.session.rows(
                "yui_messages",
                [
                    ("select", HISTORY_COLUMNS),
                    ("agent_id", f"eq.{turn.agent.id}"),
                    ("created_at", f"lt.{turn.rows[0]['created_at']}"),
                    ("order", "created_at.desc,id.desc"),
                    ("limit", str(HISTORY_ROWS)),
                ],
            )
        except YuiError as exc:
            raise RetryTurn(f"reading the thread: {exc.message}") from None
        asked = set(turn.ids)
        return [row for row in reversed(rows) if str(row["id"]) not in asked]

    def _ask(self, chat: Chat, turn: Turn) -> tuple[Completion, str]:
        """The completion and its cleaned text; an empty answer is asked once more, since small
        models sometimes end with nothing."""
        completion = self._complete(chat, turn)
        text = clean(completion.text)
        if not text:
            log.info("@%s: an empty answer; asking once more", turn.agent.handle)
            completion = self._complete(chat, turn)
            text = clean(completion.text)
        return completion, text

    def _complete(self, chat: Chat, turn: Turn) -> Completion:
        return self.client.complete(
            chat.messages,
            max_tokens=self.options.max_tokens,
            temperature=self.options.temperature,
            cancelled=turn.cancelled,
        )

    # --- the one status line while the server is away -------------------------------------

    def _unreachable(self, turn: Turn) -> None:
        """Start this turn's clock at its first failure: `note_after` seconds on, unless it was
        answered meanwhile, the person reads one status line."""
        with self._lock:
            for key, (waiting, timer) in list(self._waiting.items()):
                if waiting.cancelled.is_set():  # stopped: never asked again
                    timer.cancel()
                    del self._waiting[key]
            if turn.key in self._waiting:
                return
            timer = threading.Timer(self.options.note_after, self._note, args=(turn,))
            timer.daemon = True
            self._waiting[turn.key] = (turn, timer)
        timer.start()

    def _note(self, turn: Turn) -> None:
        with self._lock:
            if turn.key not in self._waiting or turn.cancelled.is_set():
                return
        log.warning(
            "@%s: the model server is still unreachable; told the person", turn.agent.handle
        )
        turn.status(UNREACHABLE)

    def _reached(self, turn: Turn) -> None:
        with self._lock:
            _, timer = self._waiting.pop(turn.key, (None, None))
        if timer is not None:
            timer.cancel()


@dataclass(frozen=True)
class Tried:
    """One answer to `--try`."""

    raw: str
    text: str  # cleaned, as the person would read it
    finish: str | None
    streamed: bool
    seconds: float
    full_guide: bool

    @property
    def screen(self) -> bool:
        """Whether the person would see a screen: a complete `yui` fence once cleaned."""
        return has_screen(self.text)

    @property
    def verdict(self) -> str:
        if not self.screen:
            return "no Yui screen"
        return "drew a Yui screen" if has_screen(self.raw) else "drew a Yui screen once cleaned"


def try_model(
    client: ChatClient,
    text: str,
    *,
    guide: str | None,
    options: ModelOptions,
    out: Callable[[str], None],
) -> Tried:
    """Ask the model one message with the guide, showing the answer as it streams (without
    its thinking): a quick check of what a model makes of Yui."""
    messages = [
        {"role": "system", "content": system_prompt(guide, options.system, options.context)},
        {"role": "user", "content": text},
    ]
    shown = ThinkingFilter(out)
    started = time.monotonic()
    completion = client.complete(
        messages,
        max_tokens=options.max_tokens,
        temperature=options.temperature,
        on_text=shown.feed,
    )
    shown.end()
    return Tried(
        raw=completion.text,
        text=clean(completion.text),
        finish=completion.finish,
        streamed=completion.streamed,
        seconds=time.monotonic() - started,
        full_guide=fits_full_guide(guide, options.context),
    )
