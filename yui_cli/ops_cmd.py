"""A relay operator's commands: `yui sweep` (retention and orphaned media) and `yui
kill-switch` (suspend or restore a host or a person). Both use the relay's service key: the
local relay's own, else $YUI_SERVICE_KEY."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import click

from people import operator as ops
from yui_cli.options import json_option, table_option, url_option
from yui_cli.output import emit, emit_rows, progress, show

SHOWN_NAMES = 20
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _duration(ctx: click.Context, param: click.Parameter, value: str) -> dt.timedelta:
    match = re.fullmatch(r"(\d+)\s*([smhdw])", value.strip())
    if not match:
        raise click.BadParameter("a number and a unit: 90s, 30m, 24h, 7d or 2w")
    return dt.timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items())


@click.command(name="sweep")
@click.option("--delete", is_flag=True, help="Remove what is due (default: only count it).")
@click.option(
    "--grace",
    default="24h",
    show_default=True,
    callback=_duration,
    help="How old an upload no message points at must be before it goes (30m, 24h, 7d).",
)
@url_option
@json_option
def sweep(delete: bool, grace: dt.timedelta, url: str | None, json_: bool) -> None:
    """Apply the relay's retention and remove orphaned media (for relay operators).

    \b
    Rows: messages older than message_retention_days (the limits table), control rows after
    7 days, pairing codes, failed pairing attempts and sessions a day after they ended, idle
    rate buckets. Media: objects whose person or agent is gone, and uploads older than the
    grace that no message points at. A dry run unless --delete; run it daily.
    """
    report = ops.sweep(url, delete=delete, grace=grace)
    verb = "removed" if delete else "due"
    media = f"{report['removed']} of {report['orphans']}" if delete else str(report["orphans"])
    emit(
        report,
        f"{report['url']}: rows {verb}: {_counts(report['retention'])}; "
        f"orphaned media {verb}: {media}",
        json_=json_,
    )
    if not json_:
        for name in report["names"][:SHOWN_NAMES]:
            show(f"  {name}")
        if len(report["names"]) > SHOWN_NAMES:
            show(f"  … and {len(report['names']) - SHOWN_NAMES} more")
    if not delete:
        progress("A dry run: nothing was removed. Run with --delete to remove it.")


@click.group(name="kill-switch")
def kill_switch() -> None:
    """Suspend or restore a host (connector) or a person on a relay (for relay operators).

    \b
    Reversible and deletes nothing: a suspended host's next call is refused (403 suspended)
    and a running bridge stops with exit code 5; the person's messages wait for restore.
    Every change is logged as a JSON line in $YUI_HOME/kill-switch.log (mode 600).
    """


kind_argument = click.argument("kind", type=click.Choice(ops.KINDS))
id_argument = click.argument("target", metavar="ID")


def _done(record: dict[str, Any], json_: bool) -> None:
    if record["action"] == "suspend":
        human = f"{record['kind']} {record['id']} suspended at {record['suspended_at']}"
    else:
        human = f"{record['kind']} {record['id']} restored"
    emit(record, human, json_=json_)


@kill_switch.command(name="status")
@url_option
@json_option
@table_option
def status(url: str | None, json_: bool, table_: bool) -> None:
    """List who is suspended now, oldest first (ids only)."""
    rows = ops.suspended(url)
    columns = {"KIND": "kind", "ID": "id", "SINCE": "since", "REASON": "reason"}
    emit_rows(rows, columns, json_=json_, table_=table_, title=f"{len(rows)} suspended")


@kill_switch.command(name="suspend")
@kind_argument
@id_argument
@click.option("--reason", metavar="R", help="Why (kept with the suspension, and in the log).")
@url_option
@json_option
def suspend(kind: str, target: str, reason: str | None, url: str | None, json_: bool) -> None:
    """Suspend a host or a person: every call they make is refused until restore."""
    _done(ops.switch(url, kind, target, on=True, reason=reason), json_)


@kill_switch.command(name="restore")
@kind_argument
@id_argument
@url_option
@json_option
def restore(kind: str, target: str, url: str | None, json_: bool) -> None:
    """Lift a suspension: everything works again as before."""
    _done(ops.switch(url, kind, target, on=False), json_)
