"""Hand-overs from outside the gateway: `hermes send --to yui`, cron's `--deliver yui` and the
model's `send_message(target="yui")`.

None of them reach a running gateway's adapter, so they write through the profile's outbox as
`yui send` does: the message is queued in the state file before the first try and sent behind
anything the gateway hasn't written yet; when the relay can't be reached it waits there and the
gateway writes it. The target is the agent a chat id names, else the profile's own agent, else
the person's first agent; pictures and videos attached go as media lines, stored like every
bridge's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from bridges.client.host import HostSession
from bridges.client.rows import MAX_BODY, AgentInfo
from bridges.hermes import paths
from bridges.media.bucket import media_message
from bridges.send import deliver, reach
from state.errors import BadInput, YuiError
from state.host import HostState

VIDEO = (".mp4", ".mov", ".m4v")  # the rest is a picture; the bytes decide when it is stored


def media_line(source: str, caption: str | None = None) -> str:
    """A picture or video as a message: a ```yui fence the outbox stores in the relay (a local
    file, or a remote one fetched from a public address) before the row goes out."""
    kind = "video" if source.split("?")[0].lower().endswith(VIDEO) else "image"
    return media_message(kind, source, caption)


def hand_over(text: str, target: str | None = None, media: Sequence[str] = ()) -> dict[str, Any]:
    """Queue and send one hand-over message from this profile; says whether it landed."""
    paths.use_profile_home()
    state = HostState(paths.state_path())
    paths.adopt_pairing(state)
    lines = [text.strip()] if text and text.strip() else []
    lines += [media_line(source) for source in media]
    body = "\n".join(lines)
    if not body:
        raise BadInput("nothing to send")
    if len(body) > MAX_BODY:
        raise BadInput(f"the message has {len(body):,} characters; the limit is {MAX_BODY:,}")
    session = HostSession(state)
    online = reach(session)
    [result] = deliver(session, state, [(body, _target(session, target))], online=online)
    return result


def _target(session: HostSession, wanted: str | None) -> AgentInfo:
    """The agent a chat id names (id, handle, ref or name), else this profile's own agent,
    else the person's first."""
    for name in (wanted, paths.profile_name()):
        if name:
            try:
                return session.agent(name)
            except BadInput:
                pass
    return session.agent(None)


async def standalone_send(
    pconfig: Any,
    chat_id: str,
    message: str,
    *,
    thread_id: str | None = None,
    media_files: Sequence[Any] | None = None,
    force_document: bool = False,
) -> dict[str, Any]:
    """Hermes's out-of-process sender for the Yui platform (`standalone_sender_fn`)."""
    files = [str(m[0] if isinstance(m, list | tuple) else m) for m in media_files or ()]
    try:
        result = await asyncio.to_thread(hand_over, message, chat_id, files)
    except YuiError as exc:
        return {"error": f"Yui: {exc.message}"}
    return {"success": True, "platform": "yui", "chat_id": chat_id, "message_id": result["id"]}
