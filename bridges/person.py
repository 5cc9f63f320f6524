"""The person's side of Yui, as the phone does it: sign up, add an agent and get its pairing
code, say something, tap a button, read the thread, see agents and hosts, remove a host.

It goes through the same client and the same HTTP contract as a host, with the person's
app token instead of a host's, so every read and write is decided by the relay's policies.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from bridges.client import RelayClient, client_for, raise_for_status, service_key_for
from bridges.yuilines.events import event_meta, format_event_line
from state.errors import BadInput, Refused, Unreachable
from state.people import People, PersonRecord

REFRESH_MARGIN = 60.0  # seconds before an app token expires that it is renewed
FOLLOW_OVERLAP = dt.timedelta(seconds=10)  # a row that commits late still shows up
THREAD_COLUMNS = "id,sender,kind,body,meta,created_at,delivered_at,handled_at"
AGENT_COLUMNS = (
    "id,name,handle,color,kind,connector_id,connector_name,remote_ref,"
    "is_default,status,presence,last_seen_at,created_at"
)
HOST_COLUMNS = "id,name,kind,created_at,last_seen_at,stopped_at,revoked_at"
CONTROLS_V = 1


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
        "yui-auth", {"grant_type": "signup", "name": name}, token=service_key_for(client.url)
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

    # --- agents and hosts ---------------------------------------------------------------

    def agents(self) -> list[dict[str, Any]]:
        return self.client.rows(
            "yui_agent_list",
            token=self.token(),
            params={"select": AGENT_COLUMNS, "order": "sort.asc,created_at.asc"},
        )

    def agent(self, spec: str | None) -> dict[str, Any]:
        """The agent `spec` names (id, handle or name), or the default one when it is None."""
        agents = self.agents()
        if not agents:
            raise BadInput(f"{self.record.name} has no agents yet", hint="yui app add-agent NAME")
        if spec is None:
            return next((a for a in agents if a["is_default"]), agents[0])
        wanted = spec.lower().lstrip("@")
        for agent in agents:
            if wanted in (agent["id"], agent["handle"], agent["name"].lower()):
                return agent
        names = ", ".join(a["handle"] for a in agents)
        raise BadInput(f"no agent {spec!r} (agents: {names})")

    def add_agent(self, name: str, handle: str | None = None) -> dict[str, Any]:
        """A new agent and the 6-digit code that pairs a computer with it."""
        body: dict[str, Any] = {"action": "create", "name": name, "pair": True}
        if handle:
            body["handle"] = handle
        return self.client.call("yui-agents", body, token=self.token())

    def pair_code(self, agent: str | None) -> dict[str, Any]:
        chosen = self.agent(agent)
        return self.client.call(
            "yui-agents", {"action": "pair_code", "agent_id": chosen["id"]}, token=self.token()
        )

    def hosts(self) -> list[dict[str, Any]]:
        return self.client.rows(
            "yui_connectors",
            token=self.token(),
            params={"select": HOST_COLUMNS, "order": "created_at.asc"},
        )

    def remove_host(self, host_id: str) -> None:
        """What "remove this computer" does in the app: the host is revoked at once."""
        try:
            self.client.call(
                "yui-agents", {"action": "connector_revoke", "id": host_id}, token=self.token()
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
            token=self.token(),
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
        response = self.client.rest(
            "POST", "yui_messages", token=self.token(), body=row, prefer="return=representation"
        )
        raise_for_status(response, "sending")
        return response.json()[0]

    def say(self, text: str, agent: str | None = None) -> dict[str, Any]:
        return self._insert(self.agent(agent), text)

    def tap(
        self,
        element_id: str,
        preset: str,
        value: dict[str, Any],
        echo: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        """A tap or submit on a screen: one event row, its body the line the agent reads."""
        body = format_event_line(element_id, preset, value)
        return self._insert(
            self.agent(agent), body, kind="event", meta=event_meta(element_id, preset, value, echo)
        )

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
        return chosen, self.client.rows("yui_messages", token=self.token(), params=params)

    def follow(
        self, agent: str | None = None, interval: float = 1.5
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Every row of the thread, then each new one as it lands, forever (as the app polls:
        with an overlap, dropping rows already shown)."""
        shown: set[str] = set()
        after: str | None = None
        while True:
            chosen, rows = self.thread(agent, after)
            for row in rows:
                if row["id"] not in shown:
                    shown.add(row["id"])
                    yield chosen, row
            if rows:
                newest = max(dt.datetime.fromisoformat(r["created_at"]) for r in rows)
                after = (newest - FOLLOW_OVERLAP).isoformat()
            time.sleep(interval)

    # --- Controls -------------------------------------------------------------------------

    def controls_report(self, agent: str | None = None) -> dict[str, Any] | None:
        """The sections the agent's host serves in Controls (None: it reports none)."""
        chosen = self.agent(agent)
        rows = self.client.rows(
            "yui_agent_list",
            token=self.token(),
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
                token=self.token(),
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
