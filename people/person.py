"""The person's side of Yui, as the phone does it: sign up (and set a password for the official
clients' `auth`), add an agent and get its pairing code, say something (an @ to another agent
makes a mention), tap a button, react to or reply to a message, read the thread, see agents and
hosts, remove a host. Group threads are in `people.groups`.

It goes through the same client and the same HTTP contract as a host, with the person's
app token instead of a host's, so every read and write is decided by the relay's policies.
"""

from __future__ import annotations

import datetime as dt
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from bridges.client.relay import (
    RelayClient,
    client_for,
    error_code,
    raise_for_status,
    service_key_for,
)
from bridges.client.storage import Bucket
from bridges.media.bucket import object_path
from bridges.media.files import Media, MediaRefused
from state.errors import BadInput, Refused, Unreachable
from state.people import People, PersonRecord
from state.rules import checked_handle, checked_text
from yuilines.events import EventLineError, event_meta, format_event_line, parse_cli_values
from yuilines.preview import plain, screens

REFRESH_MARGIN = 60.0  # seconds before an app token expires that it is renewed
FOLLOW_OVERLAP = dt.timedelta(seconds=10)  # a row that commits late still shows up
THREAD_COLUMNS = (
    "id,agent_id,thread_id,sender,kind,body,meta,reaction,created_at,delivered_at,handled_at"
)
AGENT_COLUMNS = (
    "id,name,handle,color,kind,connector_id,connector_name,remote_ref,"
    "is_default,status,presence,last_seen_at,created_at"
)
HOST_COLUMNS = "id,name,kind,created_at,last_seen_at,stopped_at,revoked_at"
QUOTE_CHARS = 120  # a reply's quote of the message it answers
REACTED_CHARS = 200  # a reaction's quote of the message it is on
# The six reactions the app offers, and the words a command line can use for them.
REACTIONS = {
    "👍": "👍", "up": "👍", "yes": "👍",
    "👎": "👎", "down": "👎", "no": "👎",
    "🤔": "🤔", "think": "🤔", "hmm": "🤔",
    "❤️": "❤️", "❤": "❤️", "heart": "❤️", "love": "❤️",
    "⏳": "⏳", "wait": "⏳", "later": "⏳",
    "🔥": "🔥", "fire": "🔥",
}  # fmt: skip
TAKE_BACK = ("none", "-", "")
_AT = re.compile(r"(?<![\w@.])@")
_HANDLE_AT = re.compile(r"([a-z0-9][a-z0-9-]{0,31})(?![\w@])", re.IGNORECASE)
CONTROLS_V = 1
# What the relay says when it won't take a password, in words (the relay keeps the rules).
PASSWORD_REFUSALS = {
    "email_required": "signing in with a password needs an e-mail address: give --email",
    "invalid_email": "that is not an e-mail address",
    "email_exists": "someone on this relay already signs in with that e-mail address",
    "weak_password": "a password is at least 6 characters",
    "password_too_long": "a password is at most 72 bytes",
    "invalid_password": "that password can't be stored",
}


def signup(name: str, url: str | None = None) -> PersonRecord:
    """Create a person on the relay (a service-role operation) and remember them here."""
    people = People()
    if people.exists(name):
        raise BadInput(
            f"{name!r} has already signed up on this machine",
            hint=f"use --as {name!r}, or pick another name",
        )
    client = client_for(url)
    answer = client.call(
        "yui-auth", {"grant_type": "signup", "name": name}, auth=service_key_for(client.url)
    )
    record = _record(name, client.url, answer)
    people.save(record, make_current=True)
    return record


def _record(name: str, url: str, answer: dict[str, Any]) -> PersonRecord:
    return PersonRecord(
        name=name,
        user_id=str(answer["user"]["id"]),
        url=url,
        refresh_token=answer["refresh_token"],
        access_token=answer["access_token"],
        access_expires=time.time() + float(answer["expires_in"]),
    )


@contextmanager
def typed_event() -> Iterator[None]:
    """An event line or value the person got wrong is bad input, named as such."""
    try:
        yield
    except EventLineError as exc:
        raise BadInput(str(exc)) from None


def tap_values(words: list[str]) -> dict[str, Any]:
    """A tap's value from `key=value` words, as `yui app tap` takes them."""
    with typed_event():
        return parse_cli_values(words)


def agent_named(agents: list[dict[str, Any]], spec: str | None, person: str) -> dict[str, Any]:
    """The agent `spec` names (id, handle, @handle or name), or the default one when None."""
    if not agents:
        raise BadInput(f"{person} has no agents yet", hint="yui app add-agent NAME")
    if spec is None:
        return next((a for a in agents if a["is_default"]), agents[0])
    wanted = spec.lower().lstrip("@")
    for agent in agents:
        if wanted in (agent["id"], agent["handle"], agent["name"].lower()):
            return agent
    names = ", ".join(a["handle"] for a in agents)
    raise BadInput(f"no agent {spec!r} (agents: {names})")


def named_at(text: str, agents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agents `text` @s, in order, each once, as the app's composer resolves them: `@Name`
    (the longest name that fits, so `@Coach Two` beats `@Coach`) or `@handle`."""
    by_length = sorted(agents, key=lambda a: -len(a["name"]))
    found: list[dict[str, Any]] = []
    for at in _AT.finditer(text):
        rest = text[at.end() :]
        agent = next(
            (
                a
                for a in by_length
                if rest.lower().startswith(a["name"].lower())
                and not rest[len(a["name"]) : len(a["name"]) + 1].isalnum()
            ),
            None,
        )
        if agent is None and (handle := _HANDLE_AT.match(rest)):
            wanted = handle.group(1).lower().rstrip("-")
            agent = next((a for a in agents if a["handle"] == wanted), None)
        if agent is not None and agent not in found:
            found.append(agent)
    return found


def _quoted(text: str) -> str:
    """A value in a `[yui] …` line, always in quotes (escapes as in event lines)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def first_line(row: dict[str, Any], limit: int = QUOTE_CHARS) -> str:
    """What a reply quotes: the first line of the message's words (a group message's own
    words, not its header), or `[screen]` for a message that is only a screen."""
    words = ((row.get("meta") or {}).get("group") or {}).get("words") or row["body"]
    lines = [" ".join(line.split()) for line in screens(words).splitlines()]
    lines = [line for line in lines if line and not line.startswith("[yui] ")]
    return lines[0][:limit] if lines else plain(row["body"], limit)


class PersonApp:
    """One person's view of the relay."""

    def __init__(self, name: str | None = None) -> None:
        self.people = People()
        self.record = self.people.get(name)
        self.client: RelayClient = client_for(self.record.url)

    @property
    def user_id(self) -> str:
        return self.record.user_id

    def token(self) -> str:
        """A live app token, renewed with the refresh token when it is about to expire."""
        if self.record.access_expires - time.time() > REFRESH_MARGIN:
            return self.record.access_token
        answer = self.client.call(
            "yui-auth", {"grant_type": "refresh", "refresh_token": self.record.refresh_token}
        )
        self.record = replace(_record(self.record.name, self.record.url, answer))
        self.people.save(self.record)
        return self.record.access_token

    def set_password(self, password: str, email: str | None = None) -> dict[str, Any]:
        """A password for signing in with the official clients' `auth` (signInWithPassword),
        and the e-mail address that names the person there (needed unless they have one)."""
        body = {"grant_type": "set_password", "password": password}
        if email is not None:
            body["email"] = email
        response = self.client.function("yui-auth", body, auth=self.token())
        if response.status_code in (400, 422) and error_code(response) in PASSWORD_REFUSALS:
            raise BadInput(PASSWORD_REFUSALS[error_code(response)])
        raise_for_status(response, "setting the password")
        return dict(response.json()["user"])

    # --- agents and hosts ---------------------------------------------------------------

    def agents(self) -> list[dict[str, Any]]:
        return self.client.rows(
            "yui_agent_list",
            auth=self.token(),
            params={"select": AGENT_COLUMNS, "order": "sort.asc,created_at.asc"},
        )

    def agent(self, spec: str | None) -> dict[str, Any]:
        """The agent `spec` names (id, handle or name), or the default one when it is None."""
        return agent_named(self.agents(), spec, self.record.name)

    def add_agent(self, name: str, handle: str | None = None) -> dict[str, Any]:
        """A new agent and the 6-digit code that pairs a computer with it."""
        body: dict[str, Any] = {"action": "create", "name": name, "pair": True}
        if handle:
            body["handle"] = checked_handle(handle)
        return self.client.call("yui-agents", body, auth=self.token())

    def pair_code(self, agent: str | None) -> dict[str, Any]:
        chosen = self.agent(agent)
        return self.client.call(
            "yui-agents", {"action": "pair_code", "agent_id": chosen["id"]}, auth=self.token()
        )

    def hosts(self) -> list[dict[str, Any]]:
        return self.client.rows(
            "yui_connectors",
            auth=self.token(),
            params={"select": HOST_COLUMNS, "order": "created_at.asc"},
        )

    def remove_host(self, host_id: str) -> None:
        """What "remove this computer" does in the app: the host is revoked at once."""
        try:
            self.client.call(
                "yui-agents", {"action": "connector_revoke", "id": host_id}, auth=self.token()
            )
        except Refused as exc:
            if exc.status == 404:
                raise BadInput(f"no host {host_id!r} among {self.record.name}'s") from None
            raise

    def notifications(self, limit: int = 20) -> list[dict[str, Any]]:
        """The pushes sent to this person's phones, newest first (the local relay records
        each one; with its default sink, that's all that happens to them)."""
        return self.client.rows(
            "yui_notifications",
            auth=self.token(),
            params={
                "select": "id,agent_id,message_id,title,body,environment,status,reason,created_at",
                "order": "created_at.desc",
                "limit": str(limit),
            },
        )

    # --- the thread ---------------------------------------------------------------------

    def _insert(
        self,
        agent: dict[str, Any],
        body: str,
        kind: str = "text",
        meta: dict[str, Any] | None = None,
        thread_id: str | None = None,
    ) -> dict[str, Any]:
        row = {
            "id": str(uuid.uuid4()),
            "user_id": self.user_id,
            "agent_id": agent["id"],
            "sender": "user",
            "kind": kind,
            "body": body,
            "meta": meta or {},
        }
        if thread_id is not None:  # a group row: the relay picks the member it goes to
            row["thread_id"] = thread_id
        response = self.client.rest(
            "POST", "yui_messages", auth=self.token(), body=row, prefer="return=representation"
        )
        raise_for_status(response, "sending")
        return response.json()[0]

    def say(self, text: str, agent: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """A message in an agent's thread, and the agent whose thread it is (with its
        presence, so the caller can say who got it). If it @s another of the person's agents,
        it is a mention: that agent gets it (the first one named; one agent per message), and
        this thread's agent reads it as a note on its next turn."""
        checked_text(text)
        agents = self.agents()
        here = agent_named(agents, agent, self.record.name)
        other = next((a for a in named_at(text, agents) if a["id"] != here["id"]), None)
        if other is None:
            return here, self._insert(here, text)
        mention = {"to": other["id"], "handle": other["handle"], "name": other["name"]}
        body = f"[yui] mention to={other['handle']}\n{text}"
        return here, self._insert(here, body, meta={"mention": mention})

    def message(self, spec: str, agent: str | None = None) -> dict[str, Any]:
        """A row of the person's threads by its id, or `last`: the newest agent message in
        the agent's thread."""
        params = [("select", THREAD_COLUMNS), ("order", "created_at.desc,id.desc"), ("limit", "1")]
        if spec == "last":
            params += [("agent_id", f"eq.{self.agent(agent)['id']}"), ("sender", "eq.agent")]
        elif re.fullmatch(r"[0-9a-fA-F-]{36}", spec):
            params.append(("id", f"eq.{spec}"))
        else:
            raise BadInput(f"{spec!r} is not a message id", hint="use its id, or `last`")
        rows = self.client.rows("yui_messages", auth=self.token(), params=params)
        if not rows:
            raise BadInput(f"no message {spec!r} in {self.record.name}'s threads")
        return rows[0]

    def react(
        self, msg: str, emoji: str, meaning: str | None = None, agent: str | None = None
    ) -> dict[str, Any]:
        """Hold an agent's message and pick one of six (or `none` to take it back): an event
        row the agent reads, and the emoji on that message."""
        row = self.message(msg, agent)
        if row["sender"] != "agent":
            raise BadInput("only an agent's message takes a reaction")
        if emoji.lower() in TAKE_BACK:
            chosen = None
        elif emoji.lower() in REACTIONS:
            chosen = REACTIONS[emoji.lower()]
        else:
            raise BadInput(f"{emoji!r} is not a reaction", hint="one of 👍 👎 🤔 ❤️ ⏳ 🔥, or none")
        line = f"[yui] react msg={row['id']} emoji={chosen or 'none'}"
        if meaning:
            line += f" meaning={_quoted(' '.join(meaning.split()))}"
        body = f"{line}\n> {plain(row['body'], REACTED_CHARS)}"
        meta = {"react": {"msg": row["id"], "emoji": chosen}}
        return self._insert(
            {"id": row["agent_id"]}, body, kind="event", meta=meta, thread_id=row["thread_id"]
        )

    def reply(self, msg: str, text: str, agent: str | None = None) -> dict[str, Any]:
        """Hold a message and tap Reply: the app's first line quoting it, then the words. In
        a group the reply goes to the message's author."""
        checked_text(text, "a reply")
        row = self.message(msg, agent)
        author = "agent" if row["sender"] == "agent" else "user"
        quote = first_line(row)
        line = f"[yui] reply to={row['id']} from={author} quote={_quoted(quote)}"
        meta = {"reply_to": {"msg": row["id"], "from": author, "quote": quote}}
        return self._insert(
            {"id": row["agent_id"]}, f"{line}\n{text}", meta=meta, thread_id=row["thread_id"]
        )

    def tap(
        self,
        element_id: str,
        preset: str,
        value: dict[str, Any],
        echo: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        """A tap or submit on a screen: one event row, its body the line the agent reads."""
        with typed_event():
            body = format_event_line(element_id, preset, value)
        return self._insert(
            self.agent(agent), body, kind="event", meta=event_meta(element_id, preset, value, echo)
        )

    def bucket(self) -> Bucket:
        """The media bucket, as this person (their threads, their side of them)."""
        return Bucket(self.client, self.token())

    def photo(
        self, media: Media, element_id: str = "c1", agent: str | None = None
    ) -> dict[str, Any]:
        """A photo from the camera, as the app sends it: stored on the person's side of the
        thread, then the event row that names it (`[yui] c1 camera photo=<path>`)."""
        if media.type.kind != "image":
            raise MediaRefused(f"{media.name} is a video; a camera photo is a picture")
        chosen = self.agent(agent)
        path = object_path(self.user_id, chosen["id"], "user", f"{uuid.uuid4()}.{media.type.ext}")
        self.bucket().upload(path, media.data, media.type.mime, name=media.name)
        value = {"photo": path}
        with typed_event():
            body = format_event_line(element_id, "camera", value)
        meta = event_meta(element_id, "camera", value)
        return {**self._insert(chosen, body, kind="event", meta=meta), "path": path}

    def stop(self, agent: str | None = None) -> dict[str, Any]:
        """The person's Stop: the agent's running turn ends, and what waits is dropped."""
        return self._insert(self.agent(agent), "stop", kind="control", meta={"op": "stop"})

    def thread(
        self, agent: str | None = None, after: str | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The agent and its thread's rows, oldest first (only those after `after`, if given)."""
        chosen = self.agent(agent)
        params = [
            ("select", THREAD_COLUMNS),
            ("agent_id", f"eq.{chosen['id']}"),
            ("order", "created_at.asc,id.asc"),
        ]
        if after:
            params.append(("created_at", f"gt.{after}"))
        return chosen, self.client.rows("yui_messages", auth=self.token(), params=params)

    # --- Controls -------------------------------------------------------------------------

    def controls_report(self, agent: str | None = None) -> dict[str, Any] | None:
        """The sections the agent's host serves in Controls (None: it reports none)."""
        chosen = self.agent(agent)
        rows = self.client.rows(
            "yui_agent_list",
            auth=self.token(),
            params={"select": "controls", "id": f"eq.{chosen['id']}"},
        )
        return rows[0]["controls"] if rows else None

    def control(
        self,
        op: str,
        section: str,
        item_id: str | None = None,
        *,
        agent: str | None = None,
        timeout: float = 10.0,
        **fields: Any,
    ) -> dict[str, Any]:
        """One Controls request as the app sends it (a control row; `fields` are rev, value,
        verb, confirmed or another v), and the host's answer: the meta of the one agent row
        naming it in `meta.for`, with `request` set to the request's row id."""
        meta: dict[str, Any] = {
            "v": CONTROLS_V,
            "req": "c-" + uuid.uuid4().hex[:12],
            "op": op,
            "section": section,
        }
        if item_id is not None:
            meta["id"] = item_id
        meta.update({k: v for k, v in fields.items() if v is not None})
        body = " ".join(["controls:", op, section, *([item_id] if item_id else [])])
        row = self._insert(self.agent(agent), body[:200], kind="control", meta=meta)
        return {**self.control_answer(row["id"], timeout), "request": row["id"]}

    def control_answer(self, request_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """Wait for the host's answer to a Controls request, as the app does."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.client.rows(
                "yui_messages",
                auth=self.token(),
                params=[
                    ("select", "meta"),
                    ("kind", "eq.control"),
                    ("sender", "eq.agent"),
                    ("meta->>for", f"eq.{request_id}"),
                ],
            )
            if rows:
                return rows[0]["meta"]
            if time.monotonic() >= deadline:
                raise Unreachable(
                    f"the agent's computer didn't answer in {timeout:g} s",
                    hint="is its bridge running? Try again",
                )
            time.sleep(0.25)
