"""The people `yui app` acts for, in `$YUI_HOME/app.json` (mode 600: it holds their tokens).

Several people can share one relay in a demo or a test; `--as NAME` picks one, and the last one
signed up is the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from state.errors import BadInput
from state.jsonfile import JsonFile
from state.paths import yui_home


@dataclass(frozen=True)
class PersonRecord:
    """One person as this machine knows them: who, on which relay, and their tokens."""

    name: str
    user_id: str
    url: str
    refresh_token: str
    access_token: str
    access_expires: float  # unix seconds

    def __repr__(self) -> str:
        return f"PersonRecord({self.name!r}, {self.user_id!r}, <tokens redacted>)"


class People:
    """The app.json document."""

    def __init__(self) -> None:
        self.file = JsonFile(yui_home() / "app.json")

    def get(self, name: str | None) -> PersonRecord:
        doc = self.file.read()
        people: dict[str, Any] = doc.get("people", {})
        chosen = name or doc.get("current")
        if not chosen:
            raise BadInput("nobody has signed up on this machine yet", hint="yui app signup NAME")
        if chosen not in people:
            known = ", ".join(sorted(people)) or "none"
            raise BadInput(
                f"no person named {chosen!r} here (known: {known})",
                hint="yui app signup NAME, or --as one of those",
            )
        return PersonRecord(name=chosen, **people[chosen])

    def names(self) -> list[str]:
        return sorted(self.file.read().get("people", {}))

    def exists(self, name: str) -> bool:
        return name in self.file.read().get("people", {})

    def save(self, record: PersonRecord, *, make_current: bool = False) -> None:
        with self.file.edit() as doc:
            fields = {k: v for k, v in record.__dict__.items() if k != "name"}
            doc.setdefault("people", {})[record.name] = fields
            if make_current or not doc.get("current"):
                doc["current"] = record.name
