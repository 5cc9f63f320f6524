"""Output, rendered once: data on stdout (a readable line per result; a list as a table on a
terminal and as JSON lines in a pipe; one JSON object per line with `--json`), people-facing
progress and messages on stderr."""

from __future__ import annotations

import datetime as dt
import functools
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

Column = str | Callable[[dict[str, Any]], Any]
"""A table column: the record's key, or what to show for a record."""


@functools.cache
def console() -> Console:
    """The stderr console for people (honours NO_COLOR)."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


def emit(record: dict[str, Any], human: str, *, json_: bool) -> None:
    """One result: `record` as a JSON line, or `human` as a readable line."""
    if json_:
        click.echo(json.dumps(record, default=_default, ensure_ascii=False))
    else:
        click.echo(human)


def emit_rows(
    records: Iterable[dict[str, Any]],
    columns: Mapping[str, Column],
    *,
    json_: bool,
    table_: bool = False,
    title: str | None = None,
) -> None:
    """A list of records: an aligned table with `columns`' names as headers (under `title`,
    when given) on a terminal or with `--table`; one JSON object per line in a pipe or with
    `--json` (which wins), so a script reads every field whatever the columns show.

    In a table a missing value shows as `-`, and a line break in a value as a space, so each
    record stays one line.
    """
    if json_ or not (table_ or sys.stdout.isatty()):
        for record in records:
            emit(record, "", json_=True)
        return
    getters = [_getter(column) for column in columns.values()]
    rows = [[_cell(get(record)) for get in getters] for record in records]
    if title is not None:
        click.echo(title)
    click.echo(_table(rows, list(columns)))


def _getter(column: Column) -> Callable[[dict[str, Any]], Any]:
    if callable(column):
        return column
    return lambda record: record.get(column)


def _cell(value: Any) -> str:
    return "-" if value is None else " ".join(str(value).splitlines())


def _table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """Plain aligned columns, two spaces apart."""
    grid = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in grid
    )


def progress(message: str) -> None:
    """A progress line for people, on stderr."""
    console().print(f"[dim]{escape(message)}[/dim]", markup=True)


def clock(iso: str | None) -> str:
    """`HH:MM:SS` of an ISO timestamp, in local time."""
    if not iso:
        return "-"
    return dt.datetime.fromisoformat(iso).astimezone().strftime("%H:%M:%S")
