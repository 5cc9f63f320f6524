"""A person with three paired agents in a group, for the group tests (reference §15.4): A has
coach, sage and quill (each on its own host) and "Loose" on none; B has "other". The group
"Race week" is led by coach."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.helpers.relay import Host, LocalRelay, Person
from tests.helpers.talk import answer, new_id, send


@dataclass
class Group:
    relay: LocalRelay
    a: Person
    b: Person
    agents: dict[str, dict[str, Any]]  # by handle: coach, sage, quill, loose, other
    hosts: dict[str, Host]  # coach, sage, quill, other
    id: str

    def say(self, words: str, to: list[str] | None = None, **row: Any) -> str:
        """The person's message to the group (the app writes it into the lead's thread)."""
        meta = row.pop("meta", {})
        if to is not None:
            meta["group"] = {"to": [self.agents[h]["id"] for h in to]}
        return send(self.a, self.agents["coach"], words, thread_id=self.id, meta=meta, **row)

    def control(self, meta: dict[str, Any], body: str) -> Any:
        """Let it or Stop, as the app writes them; the raw response."""
        return self.a.say(
            self.agents["coach"], body, id=new_id(), thread_id=self.id, meta={"group": meta}
        )

    def rows(self) -> list[dict[str, Any]]:
        """The whole group as the app loads it, oldest first."""
        answer_ = self.relay.rest(
            "GET", "yui_messages", self.a.token,
            params={"thread_id": f"eq.{self.id}", "order": "created_at.asc,id.asc"},
        )  # fmt: skip
        assert answer_.status_code == 200, answer_.text
        return answer_.json()

    def asks(self, handle: str) -> list[dict[str, Any]]:
        """The person rows in the group addressed to `handle`, oldest first."""
        agent = self.agents[handle]["id"]
        return [r for r in self.rows() if r["sender"] == "user" and r["agent_id"] == agent
                and "control" not in r["meta"]["group"]]  # fmt: skip

    def answer(self, handle: str, words: str, turn: str, *mentions: str) -> str:
        """`handle`'s host answers row `turn`, its @s in `meta.mentions`, as a bridge does."""
        meta = {"mentions": list(mentions)} if mentions else {}
        return answer(self.hosts[handle], self.agents[handle], words, [turn], **meta)

    def guards(self) -> list[dict[str, Any]]:
        return [r for r in self.rows() if "guard" in r["meta"].get("group", {})]


def make_group(person: Person, title: str, lead: dict[str, Any], *members: dict[str, Any]) -> str:
    group_id = new_id()
    made = person.relay.rest(
        "POST", "yui_threads", person.token,
        body={"id": group_id, "user_id": person.id, "title": title, "lead": lead["id"]},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    for member in members:
        seated = person.relay.rest(
            "POST", "yui_thread_members", person.token,
            body={"thread_id": group_id, "agent_id": member["id"], "user_id": person.id},
        )  # fmt: skip
        assert seated.status_code == 201, seated.text
    return group_id


def race_week(relay: LocalRelay) -> Group:
    a, b = relay.person("A"), relay.person("B")
    agents: dict[str, dict[str, Any]] = {}
    hosts: dict[str, Host] = {}
    for name in ("Coach", "Sage", "Quill"):
        agents[name.lower()], code = a.add_agent(name, handle=name.lower())
        hosts[name.lower()] = Host.pair(relay, code, name.lower())
    agents["loose"], _ = a.add_agent("Loose", handle="loose")
    agents["other"], code = b.add_agent("Other", handle="other")
    hosts["other"] = Host.pair(relay, code, "other")
    group_id = make_group(a, "Race week", agents["coach"], agents["sage"], agents["quill"])
    return Group(relay, a, b, agents, hosts, group_id)
