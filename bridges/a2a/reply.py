"""From what an A2A agent said to what the person reads.

A task's events are folded into one view (`TaskView`): artifacts by id, in the order they first
came (an `append` adds to its artifact, anything else replaces it), and the latest status, whose
message counts only once the task has ended or waits for the person: progress messages are left
out. The reply is the artifacts, then the final status message when it adds words (agents older
than 1.0 put their result there); a task that waits for input or a sign-in asks its question;
one that failed, was rejected or was canceled gives one line with the agent's reason.

An artifact's text parts are joined as they are, the way streamed pieces fit together. A file
part, bytes or a URL, is kept in the private media cache and shown as a ```yui `image` or
`video` line naming that file, which the outbox stores in the bucket like any reply's media; a
URL is fetched from public addresses only (`--allow-private-media` lifts that for testing).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bridges.a2a.wire import INTERRUPTED, TERMINAL, Event, Part
from bridges.media.bucket import media_message
from bridges.media.files import Media, fetch, media_from
from bridges.media.remote import where
from bridges.media.replies import cache_dir
from state.errors import MediaRefused

log = logging.getLogger("yui.a2a")

MAX_REASON = 300  # characters of an agent's reason kept in a one-line answer


@dataclass
class TaskView:
    """Everything known of one task (or the one message that answered instead of a task)."""

    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    status: tuple[Part, ...] = ()
    at: str | None = None
    artifacts: dict[str, list[Part]] = field(default_factory=dict)
    message: tuple[Part, ...] | None = None

    def apply(self, event: Event) -> None:
        self.task_id = event.task_id or self.task_id
        self.context_id = event.context_id or self.context_id
        if event.message is not None:
            self.message = event.message
            return
        if event.snapshot:
            self.artifacts = {}
        for artifact in event.artifacts:
            if event.append and artifact.id in self.artifacts:
                self.artifacts[artifact.id].extend(artifact.parts)
            else:
                self.artifacts[artifact.id] = list(artifact.parts)
        if event.state:
            self.state, self.status, self.at = event.state, event.status, event.at

    @property
    def done(self) -> bool:
        """The agent has said all it will for now: a message, an end, or a question."""
        return self.message is not None or self.state in TERMINAL | INTERRUPTED

    @property
    def waiting(self) -> bool:
        """The task waits for the person (input or a sign-in): their next message goes to it."""
        return self.message is None and self.state in INTERRUPTED


class Files:
    """Turns file parts into lines the person sees; bytes land in the media cache once."""

    def __init__(self, folder: Path | None = None) -> None:
        self._folder = folder

    def line(self, part: Part) -> str:
        name = part.name or part.media_type or "a file"
        try:
            media = media_from(part.raw, name) if part.raw is not None else fetch(part.url or "")
        except MediaRefused as exc:
            shown = where(part.url) if part.url else name
            log.warning("an agent's file left as words (%s): %s", shown, exc.message)
            if part.url:
                return f"📎 {part.name or 'a file'}: {part.url}"
            return f"📎 {name} (a file Yui can't show)"
        return media_message(media.type.kind, str(self._keep(media)))

    def _keep(self, media: Media) -> Path:
        """The bytes in the private cache, named by what they are (so kept once)."""
        folder = self._folder or cache_dir()
        target = folder / f"a2a-{hashlib.sha256(media.data).hexdigest()[:32]}.{media.type.ext}"
        if target.is_file():
            return target
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".part-")  # 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(media.data)
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return target


def words(parts: tuple[Part, ...] | list[Part], files: Files) -> str:
    """Parts as the person reads them: text as it is, data as JSON, files as media lines."""
    blocks: list[str] = []
    text = ""
    for part in parts:
        if part.kind == "text":
            text += part.text
            continue
        blocks.append(text)
        text = ""
        if part.kind == "data":
            blocks.append(
                "```json\n" + json.dumps(part.data, indent=2, ensure_ascii=False) + "\n```"
            )
        else:
            blocks.append(files.line(part))
    blocks.append(text)
    return "\n\n".join(block.strip() for block in blocks if block.strip())


def answer_text(view: TaskView, name: str, files: Files) -> str:
    """The one reply for what the agent said (empty when it said nothing)."""
    if view.message is not None:
        return words(view.message, files)
    said = words(view.status, files)
    if view.state in ("failed", "rejected", "canceled"):
        lead = {
            "failed": f"{name} couldn't finish this",
            "rejected": f"{name} turned this down",
            "canceled": f"{name} called this off",
        }[view.state]
        reason = " ".join(said.split()) or "it gave no reason"
        if len(reason) > MAX_REASON:
            reason = reason[: MAX_REASON - 1] + "…"
        return f"{lead}: {reason}"
    body = "\n\n".join(b for b in (words(p, files) for p in view.artifacts.values()) if b)
    if said and said not in body:
        body = f"{body}\n\n{said}" if body else said
    if not body and view.state == "input-required":
        return f"{name} needs more from you to go on."
    if not body and view.state == "auth-required":
        return f"{name} asks you to sign in first."
    return body
