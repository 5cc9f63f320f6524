"""Mentions and groups as a host sees them: the notes an agent reads before its turn, and the
@handles its reply names.

The relay does the routing (migrations 0012 and 0013), so a host only reads and writes meta.
What another agent was asked in this agent's thread, what it answered there, and what the
rest of a group said is never this agent's turn; its host tells the agent on its next turn
instead, one `[yui] note: …` line per row, oldest first, before the person's rows. Going out,
the @handles in a reply's words become its `meta.mentions`: the relay turns them into a
depth-1 mention in a solo thread, or a handoff on the group's budget.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from typing import Any

from bridges.client.host import HostSession
from bridges.client.relay import raise_for_status
from yuilines.fences import outside_fences
from yuilines.preview import plain

NOTE_CHARS = 600  # words in one note at most
MAX_NOTES = 20  # notes of each kind per turn: the newest ones
MAX_GROUPS = 3  # groups whose notes one turn reads: those its rows came from, newest first
MAX_MENTIONS = 3  # the relay honours no more

Stamp = str | dt.datetime

_HANDLE = re.compile(r"(?<![\w@.])@([a-z0-9][a-z0-9-]{0,31})(?![\w@])", re.IGNORECASE)
_INLINE_CODE = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)


def _iso(stamp: Stamp) -> str:
    return stamp.isoformat() if isinstance(stamp, dt.datetime) else stamp


def _when(row: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(str(row["created_at"]).replace("Z", "+00:00"))


# --- notes, coming in ------------------------------------------------------------------------


def notes_for(
    session: HostSession,
    agent_id: str,
    since: Stamp,
    upto: Stamp,
    turn_rows: list[dict[str, Any]] | None = None,
    *,
    mentions: bool = True,
) -> list[str]:
    """The `[yui] note: …` lines for an agent's turn: what was mentioned or answered in its own
    thread, and what happened in its groups, after `since` (its last turn) and up to `upto`
    (the newest row of this turn), oldest first. Read as the host: the rows of its own thread,
    and `yui_group_notes` for groups, whose other rows a host can't read. The turn's own rows,
    when given with their `thread_id`, name its groups without another read. Raises the
    client's errors (`Unreachable`, `Refused`) for the engine to decide on. Without
    `mentions` (no row says there are any: `NoteWatch`), the thread is not read for them."""
    since, upto = _iso(since), _iso(upto)
    found = [
        (_when(row), line)
        for row in (_mention_rows(session, agent_id, since, upto) if mentions else [])
        if (line := _mention_note(row))
    ]
    threads = (
        _groups(session, agent_id, since, upto)
        if turn_rows is None
        else list(dict.fromkeys(r["thread_id"] for r in turn_rows[::-1] if r.get("thread_id")))
    )
    for thread in threads[:MAX_GROUPS]:
        response = session.rest(
            "POST",
            "rpc/yui_group_notes",
            body={"agent": agent_id, "thread": thread, "since": since, "upto": upto},
        )
        raise_for_status(response, "reading group notes")
        found += [(_when(row), line) for row in response.json() if (line := _group_note(row))]
    found.sort(key=lambda pair: pair[0])
    return [line for _, line in found]


class NoteWatch:
    """Whether an agent's thread may hold mention notes it hasn't read, so that a turn reads
    them only when a row said so. The live feed carries every row of the agents' threads: a
    mention row there (`is_mention`) marks its agent; so does a reply this host wrote to a
    mention, whose answer the relay mirrors into the asker's thread (the feed may not send a
    host the rows its own writes made). Everything is marked at start and each time the feed
    goes up or down, since rows may have gone by unheard; without the feed, every turn reads.

    Marks and reads are ordered by one counter: a mark that comes while the notes are read
    is newer than that read, so it is never lost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clock = 0
        self._everyone = 0  # when every agent was last marked
        self._marked: dict[str, int] = {}
        self._read: dict[str, int] = {}  # per agent: the mark its last read began after

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def mark(self, agent_id: str | None = None) -> None:
        """The agent's thread (None: every thread) may hold notes not read yet."""
        with self._lock:
            if agent_id is None:
                self._everyone = self._tick()
            else:
                self._marked[agent_id] = self._tick()

    def due(self, agent_id: str, live: bool) -> int | None:
        """A read is due (with the feed down, always): the tick to pass to `read` once it is
        done; None when no row said there is anything to read."""
        with self._lock:
            last = self._read.get(agent_id)
            marked = max(self._everyone, self._marked.get(agent_id, 0))
            if live and last is not None and marked < last:
                return None
            return self._tick()

    def read(self, agent_id: str, tick: int) -> None:
        """The notes were read, from a read that began at `tick`."""
        with self._lock:
            self._read[agent_id] = max(tick, self._read.get(agent_id, 0))


def _mention_rows(
    session: HostSession, agent_id: str, since: str, upto: str
) -> list[dict[str, Any]]:
    """Rows of the agent's own thread that a mention put there: the person asking another
    agent, and that agent's answer mirrored back (status lines among them are skipped later)."""
    rows = session.rows(
        "yui_messages",
        [
            ("select", "id,sender,body,meta,created_at"),
            ("agent_id", f"eq.{agent_id}"),
            ("or", "(meta->mention.not.is.null,meta->mention_reply.not.is.null)"),
            ("created_at", f"gt.{since}"),
            ("created_at", f"lte.{upto}"),
            ("order", "created_at.desc,id.desc"),
            ("limit", str(MAX_NOTES)),
        ],
    )
    return rows[::-1]


def _groups(session: HostSession, agent_id: str, since: str, upto: str) -> list[str]:
    """The groups this turn's rows came from (the person's rows of the agent's thread in the
    window that carry a group), newest first."""
    rows = session.rows(
        "yui_messages",
        [
            ("select", "thread_id"),
            ("agent_id", f"eq.{agent_id}"),
            ("sender", "eq.user"),
            ("thread_id", "not.is.null"),
            ("created_at", f"gt.{since}"),
            ("created_at", f"lte.{upto}"),
            ("order", "created_at.desc"),
            ("limit", "200"),
        ],
    )
    return list(dict.fromkeys(row["thread_id"] for row in rows))[:MAX_GROUPS]


def _name(about: dict[str, Any]) -> str:
    return about.get("name") or about.get("handle") or "another agent"


def _mention_note(row: dict[str, Any]) -> str | None:
    meta = row.get("meta") or {}
    words = plain(row["body"], NOTE_CHARS)
    if row["sender"] == "user" and isinstance(meta.get("mention"), dict):
        who = _name(meta["mention"])
        return f"[yui] note: from your thread, the person put this to {who}, not you: {words}"
    reply = meta.get("mention_reply")
    if row["sender"] == "agent" and isinstance(reply, dict) and not reply.get("status"):
        return f"[yui] note: {_name(reply)} replied in your thread: {words}"
    return None


def _group_note(row: dict[str, Any]) -> str | None:
    title = row.get("title") or "a group"
    words = " ".join(str(row.get("words") or "").split())[:NOTE_CHARS]
    if row.get("kind") == "asked":
        who = row.get("to_names") or "another member"
        return f"[yui] note: in {title}, the person put this to {who}, not you: {words}"
    if row.get("kind") == "answered" and words:
        return f"[yui] note: in {title}, {row.get('name') or 'another member'} replied: {words}"
    if row.get("kind") == "stopped":
        return f"[yui] note: in {title}, the person pressed Stop; hand nothing more on."
    return None


# --- handles, going out --------------------------------------------------------------------------


def _prose(text: str) -> str:
    """The reply without its fenced blocks and without inline code."""
    return _INLINE_CODE.sub(" ", outside_fences(text))


def mentions_in(text: str, own_handle: str) -> list[str]:
    """The @handles a reply names in its words, for its `meta.mentions`: outside fences and
    inline code, lowercased, each once, in order, never the agent's own, at most three. An
    email address is not a mention."""
    own = own_handle.lower()
    found: list[str] = []
    for match in _HANDLE.finditer(_prose(text)):
        handle = match.group(1).lower().rstrip("-")
        if handle != own and handle not in found:
            found.append(handle)
    return found[:MAX_MENTIONS]
