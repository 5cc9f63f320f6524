"""`yui run-a2a --try`: one message to the agent, and what Yui would show of its answer."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from bridges.a2a.client import A2AClient, AgentUnavailable
from bridges.a2a.plugin import POLL_FIRST, POLL_MAX
from bridges.a2a.reply import Files, TaskView, answer_text
from bridges.a2a.wire import Part, read


@dataclass(frozen=True)
class Tried:
    text: str  # as the person would read it
    state: str | None  # the task's state (None: the agent answered with a plain message)
    task: str | None
    streamed: bool
    seconds: float


def try_agent(
    client: A2AClient,
    text: str,
    *,
    guide: dict[str, Any] | None,
    stream: bool,
    files: Files | None = None,
) -> Tried:
    """Send `text` (after the channel guide, as a new task's first message) in a context of
    its own, and wait for the agent to finish or ask something back."""
    card = client.card
    parts = []
    if guide and guide.get("body"):
        about = {"yui": "channel_guide", "version": guide.get("version")}
        parts.append(Part("text", text=str(guide["body"]), metadata=about))
    parts.append(Part("text", text=text))
    message = card.dialect.message(parts, f"yui-try-{uuid.uuid4().hex}", str(uuid.uuid4()), None)
    started = time.monotonic()
    streamed = stream and card.streaming
    view = TaskView()
    never = threading.Event()
    if streamed:
        results = client.stream(card.dialect.stream, {"message": message}, never)
        try:
            for result in results:
                view.apply(read(result))
                if view.done:
                    break
        finally:
            results.close()
    else:
        params = card.dialect.send_params(message, blocking=False)
        view.apply(read(client.send(card.dialect.send, params, never)))
    delay, task = POLL_FIRST, view.task_id
    while not view.done:
        if task is None or time.monotonic() - started > client.timeout:
            raise AgentUnavailable(f"no answer from the agent within {client.timeout:g} s")
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)
        view = TaskView()
        view.apply(read(client.call(card.dialect.get, card.dialect.get_params(task))))
    return Tried(
        text=answer_text(view, card.name, files or Files()),
        state=None if view.message is not None else view.state,
        task=view.task_id,
        streamed=streamed,
        seconds=time.monotonic() - started,
    )
