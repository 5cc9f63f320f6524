"""A relay operator's two tools: the retention sweep and the kill switch.

Both act with the relay's service key: the local relay's own (found in its folder), else
`$YUI_SERVICE_KEY`. The rules live in SQL (`yui_retention`, `yui_media_orphans`,
`yui_suspend`), so this module only asks, deletes media through Storage (which owns the bytes
and refuses direct SQL deletes), and reports. The kill switch is reversible and deletes nothing;
every change is logged as a JSON line in `$YUI_HOME/kill-switch.log` (mode 600), since who cut
off whom, and why, is worth keeping.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridges.client.relay import RelayClient, client_for, raise_for_status, service_key_for
from bridges.client.storage import Bucket
from state.errors import BadInput
from state.paths import ensure_private_dir, yui_home

KINDS = ("connector", "user")


@dataclass(frozen=True)
class Operator:
    """A relay and its service key (never printed)."""

    client: RelayClient
    key: str

    def __repr__(self) -> str:
        return f"Operator({self.client.url!r})"

    @classmethod
    def of(cls, url: str | None) -> Operator:
        client = client_for(url)
        return cls(client, service_key_for(client.url))

    def rpc(self, function: str, args: dict[str, Any]) -> Any:
        response = self.client.rest("POST", f"rpc/{function}", auth=self.key, body=args)
        raise_for_status(response, function)
        return response.json()


# --- the sweep ------------------------------------------------------------------------------


def sweep(url: str | None, *, delete: bool, grace: dt.timedelta) -> dict[str, Any]:
    """Retention, then orphaned media (`grace`: how old an unreferenced upload must be); a dry
    run counts what a real one removes."""
    op = Operator.of(url)
    retention = {r["what"]: r["n_rows"] for r in op.rpc("yui_retention", {"dry": not delete})}
    names = op.rpc("yui_media_orphans", {"grace": f"{int(grace.total_seconds())} seconds"})
    removed = Bucket(op.client, op.key).remove(names) if delete else 0
    return {
        "url": op.client.url,
        "deleted": delete,
        "retention": retention,
        "orphans": len(names),
        "removed": removed,
        "names": names,
    }


# --- the kill switch ------------------------------------------------------------------------


def suspended(url: str | None) -> list[dict[str, Any]]:
    """Every person and host suspended now, oldest first (ids only: no names, no emails)."""
    op = Operator.of(url)
    found = []
    for kind, table in (("user", "yui_users"), ("connector", "yui_connectors")):
        rows = op.client.rows(
            table,
            auth=op.key,
            params={
                "select": "id,suspended_at,suspended_reason",
                "suspended_at": "not.is.null",
            },
        )
        found += [
            {
                "kind": kind,
                "id": r["id"],
                "since": r["suspended_at"],
                "reason": r["suspended_reason"],
            }
            for r in rows
        ]
    return sorted(found, key=lambda r: r["since"])


def switch(
    url: str | None, kind: str, target: str, *, on: bool, reason: str | None = None
) -> dict[str, Any]:
    """Suspend (`on`) or restore a person or a host, and log it."""
    if kind not in KINDS:
        raise BadInput(f"kind must be one of {', '.join(KINDS)}")
    try:
        target = str(uuid.UUID(target))
    except ValueError:
        raise BadInput(f"id must be a uuid, not {target!r}") from None
    op = Operator.of(url)
    response = op.client.rest(
        "POST",
        "rpc/yui_suspend",
        auth=op.key,
        body={"kind": kind, "target": target, "on_": on, "reason": reason if on else None},
    )
    if response.status_code == 404:
        raise BadInput(f"no {kind} {target} on {op.client.url}")
    raise_for_status(response, "yui_suspend")
    record = {
        "at": dt.datetime.now(dt.UTC).isoformat(),
        "action": "suspend" if on else "restore",
        "kind": kind,
        "id": target,
        "reason": reason if on else None,
        "suspended_at": response.json(),
        "url": op.client.url,
        "by": f"{getpass.getuser()}@{socket.gethostname()}",
    }
    _log(record)
    return record


def log_path() -> Path:
    return yui_home() / "kill-switch.log"


def _log(record: dict[str, Any]) -> None:
    """One JSON line, appended to a file only its owner can read."""
    ensure_private_dir(yui_home())
    fd = os.open(log_path(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (json.dumps(record, ensure_ascii=False) + "\n").encode())
    finally:
        os.close(fd)
