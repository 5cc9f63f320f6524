"""Group threads on the person's side, as the app does them: make a group of two or more
agents, talk to it (the lead answers what isn't addressed), Let it and Stop, its settings, and
its thread.

A group is a `yui_threads` row and its members, both the person's own. Every message still goes
through `yui_messages`, with `thread_id` set; the relay picks the member it goes to, rewrites it
with the group's header and quote, hands work on between agents within the budget, and holds
an ask past it in a guard row (migration 0013). Let it and Stop are rows too, so they travel
like any message.
"""

from __future__ import annotations

import uuid
from typing import Any

from bridges.client.relay import raise_for_status
from people.person import THREAD_COLUMNS, PersonApp, agent_named, named_at
from state.errors import BadInput
from state.rules import checked_text

GROUP_COLUMNS = "id,title,lead,max_hops,max_turns,stopped_at,created_at,archived_at"
MAX_ADDRESSEES = 3  # the relay refuses more


class Groups:
    """One person's group threads."""

    def __init__(self, app: PersonApp) -> None:
        self.app = app

    def _rest(self, method: str, table: str, what: str, **kwargs: Any) -> list[dict[str, Any]]:
        response = self.app.client.rest(
            method, table, auth=self.app.token(), prefer="return=representation", **kwargs
        )
        raise_for_status(response, what)
        return response.json()

    def all(self) -> list[dict[str, Any]]:
        """The person's groups, newest first, each with its members (the lead first)."""
        groups = self.app.client.rows(
            "yui_threads",
            auth=self.app.token(),
            params={"select": GROUP_COLUMNS, "order": "created_at.desc"},
        )
        seats = self.app.client.rows(
            "yui_thread_members",
            auth=self.app.token(),
            params={"select": "thread_id,agent_id", "left_at": "is.null", "order": "joined_at"},
        )
        agents = {a["id"]: a for a in self.app.agents()}
        for group in groups:
            members = [agents[s["agent_id"]] for s in seats if s["thread_id"] == group["id"]]
            group["members"] = sorted(members, key=lambda a: a["id"] != group["lead"])
        return groups

    def find(self, spec: str | None) -> dict[str, Any]:
        """The group `spec` names (its id or title), or the newest one still in use."""
        groups = self.all()
        live = [g for g in groups if g["archived_at"] is None]
        if spec is None:
            if not live:
                raise BadInput(f"{self.app.record.name} has no groups yet", hint=CREATE_HINT)
            return live[0]
        wanted = spec.casefold()
        for group in groups:
            if wanted in (group["id"], group["title"].casefold()):
                return group
        titles = ", ".join(repr(g["title"]) for g in live) or "none"
        raise BadInput(f"no group {spec!r} (groups: {titles})")

    def create(self, title: str, with_: list[str], lead: str | None = None) -> dict[str, Any]:
        """A group of the agents named (two or more), led by `lead` (default: the first)."""
        agents = self.app.agents()
        chosen: list[dict[str, Any]] = []
        for name in with_:
            agent = agent_named(agents, name, self.app.record.name)
            if agent not in chosen:
                chosen.append(agent)
        head = agent_named(agents, lead, self.app.record.name) if lead else chosen[0]
        if head not in chosen:
            chosen.insert(0, head)
        if len(chosen) < 2:
            raise BadInput("a group needs two agents or more", hint=CREATE_HINT)
        group_id = str(uuid.uuid4())
        body = {"id": group_id, "user_id": self.app.user_id, "title": title, "lead": head["id"]}
        self._rest("POST", "yui_threads", "making the group", body=body)
        for agent in chosen:
            if agent is not head:  # the relay seats the lead itself
                seat = {"thread_id": group_id, "agent_id": agent["id"], "user_id": self.app.user_id}
                self._rest("POST", "yui_thread_members", f"adding {agent['name']}", body=seat)
        return self.find(group_id)

    def say(
        self, text: str, group: str | None = None, to: list[str] | None = None
    ) -> dict[str, Any]:
        """A message to the group: to the members `to` names, else to those it @s, else to
        the lead."""
        checked_text(text)
        chosen = self.find(group)
        members = chosen["members"]
        if to:
            addressees = [agent_named(members, name, chosen["title"]) for name in to]
        else:
            addressees = named_at(text, members)[:MAX_ADDRESSEES]
        meta = {"group": {"to": [a["id"] for a in addressees]}} if addressees else {}
        return self.app._insert({"id": chosen["lead"]}, text, meta=meta, thread_id=chosen["id"])

    def held(self, group: dict[str, Any]) -> list[dict[str, Any]]:
        """The group's guard rows still holding an ask, newest first."""
        return self.app.client.rows(
            "yui_messages",
            auth=self.app.token(),
            params=[
                ("select", THREAD_COLUMNS),
                ("thread_id", f"eq.{group['id']}"),
                ("meta->group->guard->>state", "eq.held"),
                ("order", "created_at.desc,id.desc"),
            ],
        )

    def let_it(self, guard: str | None = None, group: str | None = None) -> dict[str, Any]:
        """Let it: the held ask goes out on a fresh budget (the newest guard, by default)."""
        chosen = self.find(group)
        if guard is None:
            waiting = self.held(chosen)
            if not waiting:
                raise BadInput(f"nothing is held in {chosen['title']}")
            guard = waiting[0]["id"]
        meta = {"group": {"control": "continue", "guard": guard}}
        body = f"[yui] group continue guard={guard}"
        return self.app._insert({"id": chosen["lead"]}, body, meta=meta, thread_id=chosen["id"])

    def stop(self, group: str | None = None) -> dict[str, Any]:
        """Stop: asks not picked up yet are cancelled, held ones stopped, and nothing rooted
        before it hands anything on."""
        chosen = self.find(group)
        meta = {"group": {"control": "stop"}}
        return self.app._insert(
            {"id": chosen["lead"]}, "[yui] group stop", meta=meta, thread_id=chosen["id"]
        )

    def settings(
        self,
        group: str | None = None,
        max_hops: int | None = None,
        max_turns: int | None = None,
    ) -> dict[str, Any]:
        """The group's budgets, after changing those given."""
        chosen = self.find(group)
        changes = {
            key: value
            for key, value in (("max_hops", max_hops), ("max_turns", max_turns))
            if value is not None
        }
        if changes:
            self._rest(
                "PATCH",
                "yui_threads",
                "changing the settings",
                params={"id": f"eq.{chosen['id']}"},
                body=changes,
            )
            chosen = self.find(chosen["id"])
        return chosen

    def thread(self, group: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The group and its rows, oldest first (every member's part, as the app loads it)."""
        chosen = self.find(group)
        rows = self.app.client.rows(
            "yui_messages",
            auth=self.app.token(),
            params=[
                ("select", THREAD_COLUMNS),
                ("thread_id", f"eq.{chosen['id']}"),
                ("order", "created_at.asc,id.asc"),
            ],
        )
        return chosen, rows


CREATE_HINT = "yui app group create TITLE --with a,b[,c]"
