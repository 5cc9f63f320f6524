"""Rows, ledgers and look-ups for tests of the engine's plan (`bridges/engine/plan.py`): made
here, with no relay, no lock and no clock but the one passed in."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from bridges.engine.plan import Ledger, Plan

COACH, SAGE = "agent-coach", "agent-sage"
FLOOR = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
_seconds = itertools.count(1)


def row(body: str, agent: str = COACH, kind: str = "text", **fields: Any) -> dict[str, Any]:
    """A person's row, each one a second after the last."""
    at = FLOOR + dt.timedelta(seconds=next(_seconds))
    return {
        "id": f"{body}-{at.timestamp():.0f}",
        "agent_id": agent,
        "kind": kind,
        "body": body,
        "meta": fields.pop("meta", {}),
        "created_at": at.isoformat(),
        "delivered_at": None,
        **fields,
    }


def stop_row(agent: str = COACH) -> dict[str, Any]:
    return row("stop", agent, kind="control", meta={"op": "stop"})


def ledger(**fields: Any) -> Ledger:
    return Ledger(floors={COACH: FLOOR, SAGE: FLOOR}, **fields)


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [r["id"] for r in rows]


def of(decided: Plan, agent: str = COACH) -> Any:
    (found,) = [p for p in decided.agents if p.agent == agent]
    return found
